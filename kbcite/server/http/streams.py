"""Server-sent events: a request's stream that asks the client first (2025-11-25 elicitation),
and the notification streams held open (a session's GET, a 2026-07-28 listen)."""

import asyncio
import concurrent.futures
from typing import Any

from ...errors import ToolError
from ..calls import Cancelled
from ..jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND, RpcError, encode
from ..subscriptions import SUBSCRIPTIONS_MAX, Subscriber, TooMany
from .request import RETRY_AFTER_S, Refusal, Reply, refusal, unavailable
from .threads import settle

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

    __slots__ = ("loop", "send", "headers", "started")

    def __init__(self, loop, send, headers):
        self.loop = loop
        self.send = send
        # The response's own headers (CORS), made when the stream opens: most requests never
        # open one.
        self.headers = headers
        self.started = False

    def _run(self, message):
        """Send one ASGI message through the event loop; False when that failed."""
        try:
            asyncio.run_coroutine_threadsafe(self.send(message), self.loop).result(
                SEND_TIMEOUT_S)
            return True
        except (RuntimeError, OSError, concurrent.futures.TimeoutError,
                concurrent.futures.CancelledError):  # the loop is closing, the client gone
            return False

    def ask(self, session, call, params):
        """Send elicitation/create on the stream; wait for the answer POSTed on the session."""
        if session is None:
            raise Cancelled()
        if not self.started:
            self.started = True
            if not self._run({"type": "http.response.start", "status": 200,
                              "headers": SSE_HEADERS + self.headers()}):
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



class NotificationStreams:
    """The notification streams this process holds open: a handshake session's GET (one a
    session) and 2026-07-28 listens, each a subscriber of the hub."""

    def __init__(self, app):
        self.app = app
        self._gets = set()  # sessions whose GET stream this process holds

    def open_listen(self, principal, listen):
        """2026-07-28 subscriptions/listen: its subscriber, watched from now on; the stream
        (acknowledgement first) is the event loop's."""
        subscriber = Subscriber(principal, None, token=True, tag=listen.request_id,
                                list_changed=bool(listen.honored.get("resourcesListChanged")),
                                limit=SUBSCRIPTIONS_MAX)
        for uri in listen.honored.get("resourceSubscriptions", ()):
            subscriber.add(uri)
        return Reply(200, stream=(subscriber, listen.acknowledgement(), listen.ended()))

    def open_get(self, req):
        """On a worker thread: GET with a handshake session's ID opens its notification stream
        (2025-11-25 transports.mdx, "Listening for Messages from the Server"); one a session."""
        app = self.app
        session_id = req.header(b"mcp-session-id")
        allow = [(b"Allow", b"GET, POST, DELETE, OPTIONS")]
        try:
            with app.auth.borrow() as store:
                principal = app.auth.authenticate(req, store)
                if session_id is None:
                    raise Refusal(405, refusal("Method not allowed: GET opens the event stream "
                                               "of a session, and this request names none "
                                               "(Mcp-Session-Id); 2026-07-28 clients listen "
                                               "with subscriptions/listen"), allow)
                if "text/event-stream" not in (req.header(b"accept") or ""):
                    raise Refusal(406, refusal("Not Acceptable: GET opens a session's event "
                                               "stream; send Accept: text/event-stream"))
                row = store.sessions.find(session_id, principal.name,
                                          idle_s=app.settings.session_timeout)
            if row is None:
                raise Refusal(404, refusal("Session not found: it ended, or never was; send "
                                           "initialize for a new one"))
        except Refusal as refused:
            return refused.reply
        except ToolError as exc:
            return unavailable(req, exc).reply
        if session_id in self._gets:
            return Reply(409, refusal("Conflict: this session's event stream is already open; "
                                      "a session has one"))

        def source(watcher_store):
            return watcher_store.sessions.subscriptions(session_id)

        subscriber = Subscriber(principal, None, token=True, list_changed=True, source=source)
        subscriber.session_id = session_id
        return Reply(200, stream=(subscriber, None, None))

    async def hold(self, req, receive, send, reply):
        """Hold a notification stream open: its first message, then what the watcher hands
        the subscriber, keep-alive comments between; until the client goes (a listen is then
        cancelled: no response) or the server ends it (a listen's result, then the end)."""
        app = self.app
        subscriber, first, last = reply.stream
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        waiting = [0]

        def put(message):
            waiting[0] += 1
            inbox.put_nowait(message)

        def deliver(message):  # on the watcher's thread
            if subscriber.closed.is_set() or waiting[0] >= STREAM_BACKLOG:
                return False
            try:
                loop.call_soon_threadsafe(put, message)
            except RuntimeError:  # the loop closed
                return False
            return True

        subscriber.deliver = deliver
        session_id = getattr(subscriber, "session_id", None)
        if session_id is not None:
            if session_id in self._gets:
                await app.send(send, req, Reply(409, refusal(
                    "Conflict: this session's event stream is already open; a session has one")))
                return
            self._gets.add(session_id)
        try:
            try:
                await app.threads.run(loop, app.hub.add, subscriber)
            except TooMany as exc:
                request_id = last["id"] if last is not None else None
                await app.send(send, req, Reply(429, refusal(
                    "Subscription limit reached: %s" % exc, INTERNAL_ERROR, request_id,
                    {"reason": "subscription_limit"}), [(b"Retry-After", b"%d" % RETRY_AFTER_S)]))
                return
            await send({"type": "http.response.start", "status": 200,
                        "headers": SSE_HEADERS + app.guards.cors(req)})
            if first is not None:
                await send({"type": "http.response.body", "body": event(first),
                            "more_body": True})
            else:  # tells the client at once that the stream is open
                await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
            gone = asyncio.ensure_future(_disconnected(receive))
            closed = loop.create_future()
            subscriber.on_close = lambda: loop.call_soon_threadsafe(settle, closed, None, None)
            if subscriber.closed.is_set():
                settle(closed, None, None)
            try:
                while True:
                    getter = asyncio.ensure_future(inbox.get())
                    done, _ = await asyncio.wait([getter, gone, closed],
                                                 timeout=app.settings.keepalive,
                                                 return_when=asyncio.FIRST_COMPLETED)
                    if getter in done:
                        waiting[0] -= 1
                        await send({"type": "http.response.body", "body": event(getter.result()),
                                    "more_body": True})
                        continue
                    getter.cancel()
                    if gone in done:
                        return  # the client went away: a listen is cancelled, no response
                    if closed in done:
                        await send({"type": "http.response.body", "more_body": False,
                                    "body": event(last) if last is not None else b""})
                        return
                    await send({"type": "http.response.body", "body": KEEPALIVE,
                                "more_body": True})
            except OSError:
                return  # the connection broke while we wrote
            finally:
                gone.cancel()
        finally:
            app.hub.remove(subscriber)
            if session_id is not None:
                self._gets.discard(session_id)
