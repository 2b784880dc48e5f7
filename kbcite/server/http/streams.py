"""Server-sent events: a request's stream that asks the client first (2025-11-25 elicitation),
and the notification streams held open (a session's GET, a 2026-07-28 listen)."""

import asyncio

from ..jsonrpc import METHOD_NOT_FOUND, RpcError, encode
from ..session import Cancelled

# A worker thread writing to a stream gives up on the event loop after this long.
SEND_TIMEOUT_S = 30.0

# A notification stream (a session's GET, a listen) says it is alive this often: an SSE
# comment, which clients skip, so that proxies and clients' read timeouts (the Python SDK's is
# 300 s) never take a quiet stream for a dead one. The Python SDK's server uses the same.
KEEPALIVE_S = 15.0

# Notifications waiting to be written to one stream; a client that reads none of them is cut
# off past this (it lists and reads again when it comes back).
STREAM_BACKLOG = 1000

KEEPALIVE = b":\r\n\r\n"

SSE_HEADERS = [(b"Content-Type", b"text/event-stream"), (b"Cache-Control", b"no-store"),
               (b"X-Accel-Buffering", b"no"), (b"Connection", b"close")]


def event(message):
    """A JSON-RPC message as one server-sent event."""
    return b"event: message\r\ndata: " + encode(message) + b"\r\n\r\n"


async def _disconnected(receive):
    """Returns once the client has gone away."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class Stream:
    """A request's event stream, written from its worker thread: opened when the server must
    ask the client something first (2025-11-25 elicitation), closed by the last event, the
    answer (transports.mdx, "Sending Messages to the Server", item 6)."""

    def __init__(self, loop, send, headers):
        self.loop = loop
        self.send = send
        self.headers = headers
        self.started = False

    def _run(self, message):
        """Send one ASGI message through the event loop; False when that failed."""
        try:
            asyncio.run_coroutine_threadsafe(self.send(message), self.loop).result(
                SEND_TIMEOUT_S)
            return True
        except Exception:  # the loop is closing, or the transport is gone
            return False

    def ask(self, session, call, params):
        """Send elicitation/create on the stream; wait for the answer POSTed on the session."""
        if session is None:
            raise Cancelled()
        if not self.started:
            self.started = True
            if not self._run({"type": "http.response.start", "status": 200,
                              "headers": SSE_HEADERS + self.headers}):
                call.cancelled.set()

        def send(message):
            if not self._run({"type": "http.response.body", "body": event(message),
                              "more_body": True}):
                call.cancelled.set()

        _, reply = session.ask(call, params, send)
        if call.cancelled.is_set():
            raise Cancelled()
        return reply


class ListenStreams:
    """2026-07-28: a listen request opens a stream; the transport holds it (``Listen``)."""

    def add(self, uri):
        raise RpcError(METHOD_NOT_FOUND, "Method not found: 2026-07-28 subscribes through "
                       "subscriptions/listen")

    remove = add

