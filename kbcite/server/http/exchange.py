"""One POST as one object, as uvicorn's request cycle is: its headers checked, its body read,
then on one worker thread the token, the message, its session and its answer (a quick read
is served where it stands, on the event loop: ``McpApp.serves_in_place``).

A small body is read before the token is checked and parsed on the event loop, so a request
costs one thread hop; the client is watched while a request that may wait is served.
"""

import asyncio
import functools
import json
import logging
import threading
from typing import Any

from ...errors import WouldWait
from ..inbound import ERROR_STATUS, route, session_version_error
from ..jsonrpc import PARSE_ERROR, error_response, id_if_any
from .handshakes import SessionSubscriptions
from .request import Refusal, Reply, refusal
from .streams import ListenStreams, Stream

# Bodies up to this size are read before the token is checked and decoded on the event loop
# (microseconds), so a request costs one thread hop; a larger one is let in only with a valid
# token, so an anonymous client cannot make the server hold many large bodies.
SMALL_BODY = 64 * 1024

# 2026-07-28 holds no subscriptions of a request's own: a listen stream does.
LISTEN_STREAMS = ListenStreams()

log = logging.getLogger(__name__)


def _parse(body):
    """``(message, None)`` or ``(None, the parse error's text)``."""
    try:
        return json.loads(body.decode("utf-8")), None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # RecursionError: JSON nested deeper than the decoder goes is unparsable too.
        return None, "Parse error: %s" % exc


async def _watch(receive, watch):
    """Wait for the client to go away; tell ``watch`` if it does."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            watch.went_away()
            return


class Watch:
    """Whether a request's client went away while it was served, and what that ends: in
    2026-07-28 the request ("closing the response stream MUST be treated as cancellation",
    streamable-http.mdx), in a 2025-11-25 session the questions it waits on (a disconnection
    is not a cancellation there, but no answer can reach the client any more)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._gone = False
        self._call = self._session = None
        self._modern = False

    def attach(self, call, session, modern):
        """On the worker thread: the call now being served."""
        with self._lock:
            self._call, self._session, self._modern = call, session, modern
            gone = self._gone
        if gone:
            self._end()

    def went_away(self):
        """On the event loop: the client closed its connection."""
        with self._lock:
            self._gone = True
            attached = self._call is not None
        if attached:
            # Stopping a store call may wait on the database (PostgreSQL's cancel): not here.
            threading.Thread(target=self._end, daemon=True, name="kb-http-gone").start()

    def _end(self):
        call = self._call
        assert call is not None  # attached before anything can end it
        if self._modern:
            # Cancelled before it is said: what the line promises holds once it can be read.
            call.cancel()
            log.info("request %r: the client closed its connection, which cancels it (nothing "
                     "is written that was not yet)", call.request_id)
        elif self._session is not None and self._session.abandon(call):
            log.info("session %s: the client closed the stream of request %r while a person "
                     "was asked; the question ends unanswered", self._session.id,
                     call.request_id)


class Exchange:
    """One POST: a JSON-RPC message in, a JSON body or an event stream out."""

    def __init__(self, app, req, receive, send):
        self.app = app
        self.req = req
        self.receive = receive
        self.send = send
        self.no_wait = False  # the call is tried on the loop (``McpApp.tries_in_place``)

    async def run(self):
        """The reply, or None when the client went away or a stream was held open."""
        self.app.begun += 1
        try:
            reply = await self._reply()
        finally:
            self.app.begun -= 1
        if reply is not None and reply.stream is not None:
            await self.app.streams.hold(self.req, self.receive, self.send, reply)
            return None
        return reply

    async def _reply(self):
        """The reply: whole, or one whose stream is to be held open; None when the client
        went away."""
        req, app = self.req, self.app
        content_type = (req.header(b"content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise Refusal(415, refusal("Unsupported Media Type: send Content-Type: "
                                       "application/json"))
        length = req.headers.get(b"content-length")
        if length is None:
            raise Refusal(411, refusal("Length Required: send Content-Length"))
        if not length.isdigit() or len(length) > 20:  # bytes: ASCII digits only
            raise Refusal(400, refusal("Bad Request: Content-Length is not a number"), close=True)
        length = int(length)
        if length > app.settings.max_body:
            raise Refusal(413, refusal("Payload Too Large: at most %d bytes a request"
                                       % app.settings.max_body), close=True)
        principal = None
        if length > SMALL_BODY:
            principal = await app.on_thread(req, app.auth.authenticated, req)
        body = await self._body(length)
        if body is None:
            return None  # the client went away
        parsed = routed = None
        if length <= SMALL_BODY:
            message, problem = _parse(body)
            routed = route(message, req.scope["headers"]) if problem is None else None
            parsed = message, problem, routed
        # A question put to the client streams the answer; the stream is made only then.
        stream = Stream(asyncio.get_running_loop(), self.send, lambda: app.guards.cors(req))
        if routed is not None and principal is None:
            if app.serves_in_place(routed):
                with app.pool.in_place():
                    return self._message(body, parsed, None, stream, None)  # never watched
            if app.tries_in_place(routed):
                try:
                    with app.pool.in_place():
                        return self._message(body, parsed, None, stream, None, no_wait=True)
                except WouldWait:
                    pass  # nothing was written: on a thread it may wait
        watch = watcher = None
        if parsed is None or (routed is not None and routed.may_wait):
            watch = Watch()
            watcher = asyncio.ensure_future(_watch(self.receive, watch))
        try:
            return await app.on_thread(req, self._message, body, parsed, principal, stream,
                                       watch)
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _body(self, length):
        """The body's bytes, whole; None when the client went away first."""
        chunks = []
        got = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            if chunk:
                chunks.append(chunk)
                got += len(chunk)
            if not message.get("more_body", False):
                break
        if got != length:
            raise Refusal(400, refusal("Parse error: the body is not Content-Length bytes",
                                       PARSE_ERROR), close=True)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _message(self, body, parsed, principal, stream, watch, no_wait=False):
        """On a worker thread (or the loop: a quick one, or with ``no_wait`` an edit alone,
        which raises WouldWait where it would wait): the token, the message, its session,
        then its answer."""
        self.no_wait = no_wait
        return self.app.sessions.answer(self.req, self._answer, body, parsed, principal,
                                        stream, watch)

    def _answer(self, hold, body, parsed, principal, stream, watch):
        req, app = self.req, self.app
        if parsed is None:
            message, problem = _parse(body)
            routed = route(message, req.scope["headers"]) if problem is None else None
        else:
            message, problem, routed = parsed
        session_id = req.header(b"mcp-session-id")
        session = None
        with app.pool.borrow(app.auth.connections) as store:
            if principal is None:
                principal = app.auth.authenticate(req, store, routed)
            if routed is not None:
                app.auth.check_scope(req, routed, principal)
            if problem is not None:
                return Reply(400, refusal(problem, PARSE_ERROR))
            assert routed is not None  # a message that parsed is routed
            if routed.kind is None:
                return Reply(400, error_response(id_if_any(message), routed.error))
            if session_id is not None and not routed.sessionless:
                session = hold(app.sessions.find(store, session_id, principal))
                if session is None:
                    raise Refusal(404, refusal("Session not found: it ended, or never "
                                               "was; send initialize for a new one"))
        if routed.kind == "request":
            return self._request(message, routed, principal, session, stream, watch)
        if routed.kind == "notification":
            return self._notification(message, session)
        return self._response(message, session)

    def _notification(self, message, session):
        """202 for any notification; a session's initialized and cancelled are acted on."""
        self.app.dispatch.notification(message, session, self.app.sessions)
        return Reply(202)

    def _response(self, message, session):
        """A client's answer to our question (elicitation/create): 202."""
        if session is None:
            raise Refusal(400, refusal("Invalid Request: a response belongs to a session; this "
                                       "POST names none"))
        self.app.dispatch.response(message, session, self.app.sessions)
        return Reply(202)

    def _request(self, message, routed, principal, session, stream, watch):
        """The era's HTTP checks, then the request answered: JSON, or a stream that asks."""
        app = self.app
        new = None
        if routed.error is not None:  # 2026-07-28 routing headers that do not match the body
            return Reply(ERROR_STATUS[routed.error.code],
                         error_response(message["id"], routed.error))
        if routed.opens_session:
            session = new = app.sessions.new(principal)
        elif session is not None and not routed.version_served:
            error = session_version_error(routed, session.protocol_version)
            return Reply(400, error_response(message["id"], error))
        call, refused = app.dispatch.begin(message, session)
        if refused is not None:
            return Reply(400, refused.response)
        call.no_wait = self.no_wait
        if watch is not None:
            watch.attach(call, session, routed.modern)
        subscriptions: Any
        if session is not None:
            subscriptions = SessionSubscriptions(app.sessions, session,
                                                 app.settings.subscriptions_per_token)
        else:
            subscriptions = LISTEN_STREAMS
        outcome = app.dispatch.serve(call, message, routed, principal, session,
                                     ask=functools.partial(stream.ask, session),
                                     subscriptions=subscriptions)
        if outcome.listen is not None:
            return app.streams.open_listen(principal, outcome.listen)
        response = outcome.response
        if response is None:  # cancelled: no response for it
            return Reply(200, None, streamed=True) if stream.started else Reply(202)
        headers = []
        if new is not None and "error" not in response:
            app.sessions.open(new)
            headers.append((b"Mcp-Session-Id", new.id.encode("ascii")))
        if stream.started:
            return Reply(200, response, streamed=True)
        status = 200
        if "error" in response and session is None:
            status = ERROR_STATUS.get(response["error"]["code"], 200)
        return Reply(status, response, headers)
