"""kb-server's Streamable HTTP endpoint as an ASGI application: ``create_app`` to mount it in a
team's own Starlette or FastAPI application, ``app_from_env`` for ``uvicorn --factory``.

It owns HTTP's concerns and none of the protocol's: framing the server in front let through
(both Transfer-Encoding and Content-Length, two Hosts, two lengths), ``Origin`` and ``Host``,
CORS for the allowed origins, the bearer token, body caps, ``Mcp-Session-Id``, and the
2026-07-28 routing headers checked against the body. Everything that touches the store runs
on a worker thread from a bounded pool, one hop a request, so the event loop never waits for
the database; a question put to a person in a 2025-11-25 session streams the request's answer
as server-sent events. The app needs no particular server: ``serve_http`` runs it on uvicorn
with the guarded h11 protocol, which closes what the app cannot see (slow heads, huge heads).
"""

import asyncio
import base64
import contextlib
import ipaddress
import json
import logging
import os
import queue
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Optional

from ..errors import ToolError
from ..store import KBStore
from .approval import APPROVAL_TTL_S, ApprovalSigner
from .http_sessions import SESSION_TIMEOUT_S, SESSIONS_PER_TOKEN, HttpSessions
from .jsonrpc import (HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
                      METHOD_NOT_FOUND, MISSING_CAPABILITY, PARSE_ERROR, UNSUPPORTED_VERSION,
                      RpcError, classify, encode, error_response, id_if_any)
from .pool import QUEUED_EDITS, READERS, Connections, StorePool
from .protocol import (LEGACY_VERSIONS, META_VERSION, SERVER_NAME, SUBSCRIPTIONS_MAX, Context,
                       Listen, Principal, Protocol, answer)
from .session import Call, Cancelled
from .subscriptions import Hub, Subscriber, TooMany
from .throttle import Throttle
from . import web

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource" + MCP_PATH

# A 1 MiB article JSON-escaped with \u sequences takes six bytes a character: 8 MiB holds any
# valid edit, and refuses a flood.
MAX_BODY = 8 * 1024 * 1024

# Bodies up to this size are read before the token is checked and decoded on the event loop
# (microseconds), so a request costs one thread hop; a larger one is let in only with a valid
# token, so an anonymous client cannot make the server hold many large bodies.
SMALL_BODY = 64 * 1024

# Requests in progress at once per process, each on a thread (a question waiting for its
# person holds one, but no store connection); one more is 503 at once.
MAX_REQUESTS = 128

# Set in a request's scope once its bearer token is valid: the guarded protocol lets such a
# connection out of its address's share (kbcite.server.h11_guard).
AUTHENTICATED = "kbcite.authenticated"

# Token checks have connections of their own: a request is authenticated even while every tool
# connection is busy.
AUTH_CONNECTIONS = 4

# A refusal that asks the client to come back says when.
RETRY_AFTER_S = 1

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

# Where the lifespan state holds ``McpApp.stop_streams`` for the server's shutdown to call.
STOP_STREAMS = "kbcite.stop_streams"

# The HTTP status of each error on the 2026-07-28 path (transports/streamable-http.mdx).
ERROR_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400,
                HEADER_MISMATCH: 400, MISSING_CAPABILITY: 400, UNSUPPORTED_VERSION: 400,
                METHOD_NOT_FOUND: 404}

# The names a loopback server answers to, besides its own address: its Host and Origin.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

# CORS for the allowed origins. Every header an MCP client sends (neither Authorization nor
# application/json is CORS-safelisted, so a browser preflights every POST), and those it must
# read: the session ID, the bearer challenge, when to retry.
CORS_METHODS = "POST, GET, DELETE, OPTIONS"
CORS_ALLOWED = ("authorization", "content-type", "accept", "mcp-session-id",
                "mcp-protocol-version", "mcp-method", "mcp-name", "last-event-id")
CORS_EXPOSED = b"Mcp-Session-Id, WWW-Authenticate, Retry-After"
CORS_MAX_AGE = b"600"

SSE_HEADERS = [(b"Content-Type", b"text/event-stream"), (b"Cache-Control", b"no-store"),
               (b"X-Accel-Buffering", b"no"), (b"Connection", b"close")]

# The environment app_from_env reads, each to a Settings field and its type.
ENVIRONMENT = {"KB_ALLOW_ORIGINS": ("allowed_origins", "list"), "KB_MAX_BODY": ("max_body", int),
               "KB_THREADS": ("threads", int), "KB_QUEUED_EDITS": ("queued_edits", int),
               "KB_APPROVAL_TTL": ("approval_ttl", int),
               "KB_AUTHORIZATION_SERVER": ("authorization_server", str),
               "KB_SESSION_TIMEOUT": ("session_timeout", float),
               "KB_SESSIONS_PER_TOKEN": ("sessions_per_token", int),
               "KB_KEEPALIVE": ("keepalive", float),
               "KB_SUBSCRIPTIONS_PER_TOKEN": ("subscriptions_per_token", int)}

log = logging.getLogger(__name__)


class Refusal(Exception):
    """An HTTP request refused: a status, headers, a JSON body, and whether to close."""

    def __init__(self, status, body=None, headers=(), close=False):
        super().__init__(status)
        self.reply = Reply(status, body, list(headers), close)


@dataclass(frozen=True)


class Settings:
    """What the app serves and its limits; plain data, so uvicorn can hand it to every worker
    process."""

    db: str
    signing_secret: bytes
    allowed_origins: tuple = ()
    # The name the server was told to listen on (kb-server --http NAME:PORT): also its own.
    host: Optional[str] = None
    max_body: int = MAX_BODY
    threads: int = READERS
    queued_edits: int = QUEUED_EDITS
    approval_ttl: int = APPROVAL_TTL_S
    authorization_server: Optional[str] = None
    session_timeout: float = SESSION_TIMEOUT_S
    sessions_per_token: int = SESSIONS_PER_TOKEN
    max_requests: int = MAX_REQUESTS
    keepalive: float = KEEPALIVE_S
    # Subscribed URIs all the handshake sessions of one token hold at once.
    subscriptions_per_token: int = SUBSCRIPTIONS_MAX


class Reply:
    """A whole response (JSON when there is a body), or the last event of a stream."""

    __slots__ = ("status", "body", "headers", "close", "streamed", "cors", "stream")

    def __init__(self, status, body=None, headers=None, close=False, streamed=False, cors=True,
                 stream=None):
        self.status = status
        # A notification stream to hold open: ``(subscriber, first message, last message)``.
        self.stream = stream
        self.body = body
        self.headers = headers or []
        self.close = close
        self.streamed = streamed
        # False for a refused preflight: the browser must not read it as allowed.
        self.cors = cors


quiet = Throttle(log)


class Threads:
    """Up to ``size`` worker threads, started as they are needed, for the app's blocking work.

    Each call's result comes back to the event loop in one wake-up. ThreadPoolExecutor's
    futures, chained to the loop's, took about a tenth of the server's CPU per request under
    load (measured with py-spy at 500 calls a second).
    """

    def __init__(self, size, name):
        self.size = size
        self.name = name
        self._work = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads = []
        self._lock = threading.Lock()

    def run(self, loop, fn, *args):
        """An asyncio future of ``fn(*args)``, run on one of the threads."""
        future = loop.create_future()
        self._work.put((loop, future, fn, args))
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if len(self._threads) < self.size:
                    thread = threading.Thread(target=self._serve, daemon=True,
                                              name="%s_%d" % (self.name, len(self._threads)))
                    self._threads.append(thread)
                    thread.start()
        return future

    def _serve(self):
        while True:
            item = self._work.get()
            if item is None:
                return
            loop, future, fn, args = item
            del item
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the awaiting task, which raises it
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:
                pass  # the loop closed: nobody waits any more
            del loop, future, fn, args, result, error
            self._idle.release()

    def close(self):
        """Let every thread end once the work queued before is done."""
        with self._lock:
            for _ in self._threads:
                self._work.put(None)


def _settle(future, result, error):
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def refusal(message, code=INVALID_REQUEST, request_id=None, data=None):
    """The JSON-RPC error body of a refused request: clients read the reason there."""
    return error_response(request_id, RpcError(code, message, data))


class Request:
    """One HTTP request's scope, its headers read once."""

    __slots__ = ("scope", "method", "path", "headers", "framing")

    def __init__(self, scope):
        self.scope = scope
        self.method = scope["method"]
        root, path = scope.get("root_path", ""), scope["path"]
        self.path = path[len(root):] if root and path.startswith(root) else path
        headers = {}
        hosts, lengths, chunked = 0, set(), False
        for name, value in scope["headers"]:
            if name == b"host":
                hosts += 1
            elif name == b"content-length":
                lengths.add(value)
            elif name == b"transfer-encoding":
                chunked = True
            headers[name] = value
        self.headers = headers
        self.framing = None
        if chunked and lengths:
            self.framing = ("both Transfer-Encoding and Content-Length frame this request (RFC "
                            "9112 6.3); send one")
        elif hosts > 1:
            self.framing = "more than one Host header (RFC 9112 3.2)"
        elif len(lengths) > 1:
            self.framing = "Content-Length headers that differ (RFC 9110 8.6)"

    def header(self, name):
        """A header's value as text, or None."""
        value = self.headers.get(name)
        return value.decode("latin-1") if value is not None else None

    @property
    def client(self):
        """The client's address, for the log."""
        client = self.scope.get("client")
        return client[0] if client else "?"


def decode_name_header(value):
    """An ``Mcp-Name`` header's value, the ``=?base64?...?=`` sentinel form decoded."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
    return value


def is_loopback(host):
    """Whether a host name or address is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bracketed(host):
    return "[%s]" % host if ":" in host and not host.startswith("[") else host


def _parse(body):
    """``(message, None)`` or ``(None, the parse error's text)``."""
    try:
        return json.loads(body.decode("utf-8")), None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # RecursionError: JSON nested deeper than the decoder goes is unparsable too.
        return None, "Parse error: %s" % exc


def _may_wait(message):
    """Whether a request may wait long (an edit: for a lock, or a person), so that a client
    going away must be noticed while it is served."""
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return False
    params = message.get("params")
    return isinstance(params, dict) and params.get("name") == "edit_knowledge_article"


def event(message):
    """A JSON-RPC message as one server-sent event."""
    return b"event: message\r\ndata: " + encode(message) + b"\r\n\r\n"


async def _watch(receive, watch):
    """Wait for the client to go away; tell ``watch`` if it does."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            watch.went_away()
            return


async def _disconnected(receive):
    """Returns once the client has gone away."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
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
        if self._modern:
            log.info("request %r: the client closed its connection, which cancels it (nothing "
                     "is written that was not yet)", self._call.request_id)
            self._call.cancel()
        elif self._session is not None and self._session.abandon(self._call):
            log.info("session %s: the client closed the stream of request %r while a person "
                     "was asked; the question ends unanswered", self._session.id,
                     self._call.request_id)


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


class SessionSubscriptions:
    """A handshake session's resources/subscribe URIs, kept in the store with the session, so
    that whichever process holds its GET stream notifies them."""

    def __init__(self, app, session):
        self.app = app
        self.session = session

    def add(self, uri):
        """Subscribe the session to ``uri``; TooMany past its token's bound."""
        with self.app.sessions_store() as store:
            done = store.sessions.subscribe(self.session.id, self.session.principal.name, uri,
                                            per_token=self.app.settings.subscriptions_per_token)
        if done is False:
            raise TooMany("the sessions of token %s subscribe to %d URIs, the bound; "
                          "unsubscribe some first" % (self.session.principal.name,
                                                      self.app.settings.subscriptions_per_token))

    def remove(self, uri):
        """Forget the session's subscription to ``uri``."""
        with self.app.sessions_store() as store:
            store.sessions.unsubscribe(self.session.id, uri)


class ListenStreams:
    """2026-07-28: a listen request opens a stream; the transport holds it (``Listen``)."""

    def add(self, uri):
        raise RpcError(METHOD_NOT_FOUND, "Method not found: 2026-07-28 subscribes through "
                       "subscriptions/listen")

    remove = add


class McpApp:
    """The MCP endpoint (``/mcp``) as an ASGI 3 application: both eras, tokens, the HTTP
    safeguards. Mount it anywhere; ``lifespan`` closes it with the host application."""

    def __init__(self, settings):
        self.settings = settings
        # Fail at startup, not at the first request, when the store is not there.
        KBStore(settings.db).close()
        self.pool = StorePool(settings.db, readers=settings.threads,
                              writers=max(1, settings.threads // 2),
                              queued_edits=settings.queued_edits)
        self.auth = Connections(settings.db, AUTH_CONNECTIONS)
        self.protocol = Protocol(self.pool, ApprovalSigner(settings.signing_secret,
                                                           settings.approval_ttl))
        self.sessions = HttpSessions(settings.db, settings.session_timeout,
                                     settings.sessions_per_token)
        self.threads = Threads(settings.max_requests, "kb-http")
        self.hub = Hub(settings.db)
        self._get_streams = set()  # sessions whose GET stream this process holds
        self._in_progress = 0
        self._allowed = {}  # (scheme, server host, port) -> (hosts, origins)
        self._closed = False
        self._web = None  # the people's pages, made on the first asked for

    # -- ASGI --------------------------------------------------------------------------------

    async def __call__(self, scope, receive, send):
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(scope, receive, send)
        else:  # a websocket: this endpoint speaks none
            await send({"type": "websocket.close", "code": 1008})

    async def _lifespan(self, scope, receive, send):
        state = scope.get("state")
        if isinstance(state, dict):
            # The server's graceful shutdown comes before the lifespan's, and waits for
            # responses under way: a notification stream never ends by itself, so the guarded
            # protocol calls this first (h11_guard), and each stream ends with its result.
            state[STOP_STREAMS] = self.stop_streams
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    @contextlib.asynccontextmanager
    async def lifespan(self, app=None):
        """For a host application's ``lifespan=``: the endpoint closes when it stops (mounted
        apps are not told of the host's lifespan)."""
        try:
            yield
        finally:
            self.close()

    def stop_streams(self):
        """End every notification stream gracefully (a listen's with its result): the
        server is stopping."""
        for subscriber in self.hub.subscribers():
            self.hub.remove(subscriber)

    def close(self):
        """End every open question unanswered, stop the threads, close the connections."""
        if self._closed:
            return
        self._closed = True
        self.hub.close()
        self.sessions.close()
        self.threads.close()
        self.pool.close()
        self.auth.close()

    async def _http(self, scope, receive, send):
        req = Request(scope)
        try:
            reply = await self._route(req, receive, send)
        except Refusal as refused:
            reply = refused.reply
        if reply is not None:
            await self._send(send, req, reply)

    async def _route(self, req, receive, send):
        """The request's checks in order (framing, endpoint, Origin and Host), then its
        method's own."""
        if req.framing is not None:
            quiet.info("framing", "refused a request from %s: %s", req.client, req.framing)
            raise Refusal(400, refusal("Bad Request: %s" % req.framing), close=True)
        method = req.method
        if method == "GET" and req.path == METADATA_PATH and self.settings.authorization_server:
            self._check_origin_and_host(req)
            return Reply(200, self.metadata(req))
        if req.path != MCP_PATH and web.serves(req.path):
            if self._web is None:
                self._web = web.pages_for(self)
            await self._web(req, receive, send)
            return None
        if req.path != MCP_PATH:
            raise Refusal(404, refusal("Not found: the MCP endpoint is %s" % MCP_PATH))
        self._check_origin_and_host(req)
        if method == "POST":
            return await self._post(req, receive, send)
        if method == "OPTIONS":
            return self._preflight(req)
        if method == "DELETE":
            return await self._on_thread(self._delete, req)
        if method == "GET":
            reply = await self._on_thread(self._open_get, req)
            if reply.stream is not None:
                await self._stream(req, receive, send, reply)
                return None
            return reply
        raise Refusal(405, refusal("Method not allowed"), [(b"Allow", b"POST, DELETE, OPTIONS")],
                      close=True)

    async def _send(self, send, req, reply):
        """Send a whole reply (or a stream's last event), with CORS headers where an allowed
        Origin asked."""
        if reply.streamed:  # the stream's last event: the answer (none if it was cancelled)
            await send({"type": "http.response.body", "more_body": False,
                        "body": event(reply.body) if reply.body is not None else b""})
            return
        data = encode(reply.body) if reply.body is not None else b""
        headers = reply.headers + (self._cors(req) if reply.cors else [])
        if reply.body is not None:
            headers.append((b"Content-Type", b"application/json"))
        if reply.status != 204:
            headers.append((b"Content-Length", b"%d" % len(data)))
        if reply.close:
            headers.append((b"Connection", b"close"))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    async def _on_thread(self, fn, *args):
        """What ``fn(*args)`` returns, run on a worker thread, at most ``max_requests`` at once
        (503 when full); a Refusal it raises is raised here."""
        if self._in_progress >= self.settings.max_requests:
            quiet.info("full", "refused a request from %s: %d requests are in progress",
                       args[0].client, self._in_progress)
            raise Refusal(503, refusal("Service Unavailable: the server is busy; retry "
                                       "shortly"), [(b"Retry-After", b"%d" % RETRY_AFTER_S)])
        self._in_progress += 1
        try:
            return await self.threads.run(asyncio.get_running_loop(), fn, *args)
        finally:
            self._in_progress -= 1

    # -- the checks every request passes ---------------------------------------------------------

    def _own(self, req):
        """``(the Host values allowed, the Origins allowed)`` for the address and scheme the
        request came in on: DNS rebinding protection (transports, "Security Warning")."""
        scheme = req.scope.get("scheme", "http")
        server = req.scope.get("server") or (None, None)
        key = (scheme, server[0], server[1])
        found = self._allowed.get(key)
        if found is None:
            host, port = server
            names = set()
            if host is not None:
                names.add(_bracketed(host))
                if self.settings.host:
                    names.add(_bracketed(self.settings.host))
                if is_loopback(host):
                    names.update(LOOPBACK_NAMES)
            suffix = "" if port is None else ":%d" % port
            # On a loopback address a browser's page must not reach us under another name; a
            # server others reach is theirs to name (its tokens are what protect it).
            hosts = ({name + suffix for name in names}
                     if host is not None and is_loopback(host) else None)
            origins = {"%s://%s%s" % (s, name, suffix) for s in ("http", "https")
                       for name in names} | set(self.settings.allowed_origins)
            found = self._allowed[key] = (hosts, origins)
        return found

    def _check_origin_and_host(self, req):
        hosts, origins = self._own(req)
        origin = req.header(b"origin")
        if origin is not None and origin not in origins:
            raise Refusal(403, refusal("Forbidden: Origin %.100s is not allowed (kb-server "
                                       "--allow-origin adds one)" % origin))
        if hosts is not None and req.header(b"host") not in hosts:
            raise Refusal(421, refusal("Misdirected Request: Host %.100s is not this server's "
                                       "address" % req.header(b"host")))

    def _cors(self, req):
        """The CORS headers of an answer to an allowed Origin (none for any other)."""
        origin = req.headers.get(b"origin")
        if origin is None or origin.decode("latin-1") not in self._own(req)[1]:
            return []
        return [(b"Access-Control-Allow-Origin", origin), (b"Vary", b"Origin"),
                (b"Access-Control-Expose-Headers", CORS_EXPOSED)]

    def _preflight(self, req):
        """OPTIONS: a browser asks whether an allowed Origin may POST with MCP's headers."""
        if req.header(b"origin") is None:
            return Reply(204, headers=[(b"Allow", b"POST, DELETE, OPTIONS")])
        method = req.header(b"access-control-request-method") or ""
        asked = [h.strip().lower() for h in
                 (req.header(b"access-control-request-headers") or "").split(",") if h.strip()]
        refused = [h for h in asked if h not in CORS_ALLOWED]
        if method not in ("POST", "GET", "DELETE") or refused:
            return Reply(403, refusal("Forbidden: CORS allows %s with headers %s; asked %s %s"
                                      % (CORS_METHODS, ", ".join(CORS_ALLOWED), method or
                                         "no method", ", ".join(refused))), cors=False)
        headers = [(b"Access-Control-Allow-Methods", CORS_METHODS.encode("ascii")),
                   (b"Access-Control-Max-Age", CORS_MAX_AGE)]
        if asked:
            headers.append((b"Access-Control-Allow-Headers", ", ".join(asked).encode("ascii")))
        return Reply(204, headers=headers)

    def _authenticate(self, req, store):
        """The caller a bearer token names; 401 with WWW-Authenticate: Bearer otherwise, the
        reason logged (never the token)."""
        value = req.header(b"authorization") or ""
        scheme, _, token = value.partition(" ")
        token = token.strip()
        challenge = 'Bearer realm="kb-server"'
        if self.settings.authorization_server:
            challenge += ', resource_metadata="%s"' % self.metadata_url(req)
        if scheme.lower() != "bearer" or not token:
            quiet.info("401", "401 for %s: %s", req.client, "no Authorization header" if not value
                       else "the Authorization header is not Bearer TOKEN")
            raise Refusal(401, refusal("Unauthorized: send Authorization: Bearer TOKEN (kb token "
                                       "create makes one)"),
                          [(b"WWW-Authenticate", challenge.encode("latin-1"))])
        found = store.tokens.principal(token)
        if found is None:
            quiet.info("401", "401 for %s: %s", req.client, store.tokens.refusal(token))
            raise Refusal(401, refusal("Unauthorized: the token is not valid (unknown or "
                                       "revoked)"),
                          [(b"WWW-Authenticate",
                            (challenge + ', error="invalid_token"').encode("latin-1"))])
        # The connection may now use the slots kept for authenticated clients (h11_guard).
        req.scope[AUTHENTICATED] = True
        return Principal(found["name"], frozenset(found["grants"]), found["writes"])

    def metadata_url(self, req):
        """Where this server's OAuth protected-resource metadata is (RFC 9728)."""
        return "%s://%s%s%s" % (req.scope.get("scheme", "http"),
                                req.header(b"host") or "127.0.0.1",
                                req.scope.get("root_path", ""), METADATA_PATH)

    def metadata(self, req):
        """The RFC 9728 document naming the authorization server that issues our tokens."""
        return {"resource": "%s://%s%s%s" % (req.scope.get("scheme", "http"),
                                             req.header(b"host"),
                                             req.scope.get("root_path", ""), MCP_PATH),
                "authorization_servers": [self.settings.authorization_server],
                "bearer_methods_supported": ["header"], "resource_name": SERVER_NAME}

    # -- POST ------------------------------------------------------------------------------------

    async def _post(self, req, receive, send):
        """One JSON-RPC message in: its headers checked here, its body read, then everything
        else (the token, the protocol) on one worker thread."""
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
        if length > self.settings.max_body:
            raise Refusal(413, refusal("Payload Too Large: at most %d bytes a request"
                                       % self.settings.max_body), close=True)
        principal = None
        if length > SMALL_BODY:
            principal = await self._on_thread(self._authenticated, req)
        body = await self._body(receive, length)
        if body is None:
            return None  # the client went away
        parsed = _parse(body) if length <= SMALL_BODY else None
        watch = watcher = None
        if parsed is None or _may_wait(parsed[0]):
            watch = Watch()
            watcher = asyncio.ensure_future(_watch(receive, watch))
        stream = Stream(asyncio.get_running_loop(), send, self._cors(req))
        try:
            reply = await self._on_thread(self._message, req, body, parsed, principal, stream,
                                          watch)
        finally:
            if watcher is not None:
                watcher.cancel()
        if reply is not None and reply.stream is not None:
            await self._stream(req, receive, send, reply)
            return None
        return reply

    async def _body(self, receive, length):
        """The body's bytes, whole; None when the client went away first."""
        chunks = []
        got = 0
        while True:
            message = await receive()
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

    def _authenticated(self, req):
        """On a worker thread: the caller, before a large body is read."""
        try:
            with self.auth.borrow() as store:
                return self._authenticate(req, store)
        except ToolError as exc:
            raise self._unavailable(req, exc)

    def _unavailable(self, req, exc):
        """503 for a request the store could not serve (down, busy): never a dropped
        connection; the JSON-RPC error says to retry."""
        quiet.info("503", "503 for %s: the store failed while checking the request (%s)",
                   req.client, exc.message)
        return Refusal(503, refusal("Service Unavailable: the store could not be reached to "
                                    "check this request (%s); retry shortly" % exc.code,
                                    INTERNAL_ERROR, data={"retryable": True, "reason": exc.code}),
                       [(b"Retry-After", b"%d" % RETRY_AFTER_S)])

    def _message(self, req, body, parsed, principal, stream, watch):
        """On a worker thread: the token, the message, its session, then its answer."""
        session = None
        try:
            if parsed is None:
                parsed = _parse(body)
            message, problem = parsed
            session_id = req.header(b"mcp-session-id")
            try:
                with self.auth.borrow() as store:
                    if principal is None:
                        principal = self._authenticate(req, store)
                    if problem is not None:
                        return Reply(400, refusal(problem, PARSE_ERROR))
                    kind, error = classify(message)
                    if error is not None:
                        return Reply(400, error_response(id_if_any(message), error))
                    if session_id is not None and not (kind == "request" and (
                            message["method"] == "initialize"
                            or self.protocol.modern_meta(message.get("params")) is not None)):
                        session = self.sessions.find(store, session_id, principal)
                        if session is None:
                            raise Refusal(404, refusal("Session not found: it ended, or never "
                                                       "was; send initialize for a new one"))
            except ToolError as exc:
                raise self._unavailable(req, exc)
            if kind == "request":
                return self._request(req, message, principal, session, stream, watch)
            if kind == "notification":
                return self._notification(message, session)
            return self._response(message, session)
        except Refusal as refused:
            return refused.reply
        except ToolError as exc:
            return self._unavailable(req, exc).reply
        finally:
            if session is not None:
                self.sessions.release(session)

    def _notification(self, message, session):
        """202 for any notification; a session's initialized and cancelled are acted on."""
        if session is not None:
            params = message.get("params")
            params = params if isinstance(params, dict) else {}
            if message["method"] == "notifications/initialized":
                self.sessions.initialized(session)
            elif message["method"] == "notifications/cancelled":
                self.sessions.cancel(session, params)
        return Reply(202)

    def _response(self, message, session):
        """A client's answer to our question (elicitation/create): 202."""
        if session is None:
            raise Refusal(400, refusal("Invalid Request: a response belongs to a session; this "
                                       "POST names none"))
        self.sessions.deliver(session, message)
        return Reply(202)

    def _request(self, req, message, principal, session, stream, watch):
        """Route a request to its era's checks, then answer it (JSON, or a stream that asks)."""
        protocol = self.protocol
        modern = protocol.modern_meta(message.get("params")) is not None
        new = None
        if modern:
            self._check_routing_headers(req, message)
        elif message["method"] == "initialize":
            session = new = self.sessions.new(principal)
        elif session is not None:
            self._check_session_version(req, message, session)
        if session is None:
            call = Call(message["id"])  # 2026-07-28: the request is all there is
        else:
            try:
                call = session.begin(message)
            except RpcError as exc:
                return Reply(400, error_response(message["id"], exc))
        if watch is not None:
            watch.attach(call, session, modern)
        ctx = Context(principal=principal, call=call, session=session,
                      ask=lambda params: stream.ask(session, call, params),
                      subscriptions=(SessionSubscriptions(self, session) if session is not None
                                     else ListenStreams()))
        try:
            response = answer(protocol, message, ctx)
        finally:
            if session is not None:
                session.end(call)
        if isinstance(response, Listen):
            return self._open_listen(principal, response)
        if response is None:  # cancelled: no response for it
            return Reply(200, None, streamed=True) if stream.started else Reply(202)
        headers = []
        if new is not None and "error" not in response:
            self.sessions.open(new)
            headers.append((b"Mcp-Session-Id", new.id.encode("ascii")))
        if stream.started:
            return Reply(200, response, streamed=True)
        status = 200
        if "error" in response and session is None:
            status = ERROR_STATUS.get(response["error"]["code"], 200)
        return Reply(status, response, headers)

    def _check_session_version(self, req, message, session):
        """2025-11-25 transports.mdx, "Protocol Version Header": 400 only for "an invalid or
        unsupported MCP-Protocol-Version"; any handshake version this server speaks is served
        in the session (the SDKs' servers do the same)."""
        version = req.header(b"mcp-protocol-version")
        if version is not None and version not in LEGACY_VERSIONS:
            raise Refusal(400, refusal(
                "Bad Request: MCP-Protocol-Version %.40s is not a version this session can "
                "speak (%s; negotiated %s)" % (version, ", ".join(LEGACY_VERSIONS),
                                               session.protocol_version),
                request_id=message["id"]))

    def _check_routing_headers(self, req, message):
        """2026-07-28: MCP-Protocol-Version, Mcp-Method and Mcp-Name must match the body
        (transports/streamable-http.mdx, "Server Validation")."""
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        meta = self.protocol.modern_meta(params)
        problems = []
        version = req.header(b"mcp-protocol-version")
        if version is None:
            problems.append("the MCP-Protocol-Version header is missing")
        elif version != meta.get(META_VERSION):
            problems.append("MCP-Protocol-Version %.40s is not the body's %.40s"
                            % (version, meta.get(META_VERSION)))
        method_header = req.header(b"mcp-method")
        if method_header is None:
            problems.append("the Mcp-Method header is missing")
        elif method_header != message["method"]:
            problems.append("Mcp-Method %.60s is not the body's %.60s"
                            % (method_header, message["method"]))
        if message["method"] in ("tools/call", "resources/read", "prompts/get"):
            name = req.header(b"mcp-name")
            body_name = params.get("name", params.get("uri"))
            if name is None:
                problems.append("the Mcp-Name header is missing")
            elif decode_name_header(name) != body_name:
                problems.append("Mcp-Name %.60s is not the body's %.60s" % (name, body_name))
        if problems:
            raise Refusal(400, refusal("Header mismatch: %s" % "; ".join(problems),
                                       HEADER_MISMATCH, message["id"]))

    # -- notification streams --------------------------------------------------------------------

    @contextlib.contextmanager
    def sessions_store(self):
        """A store connection for the sessions' writes (subscriptions)."""
        with self.sessions.store() as store:
            yield store

    def _open_listen(self, principal, listen):
        """2026-07-28 subscriptions/listen: its subscriber, watched from now on; the stream
        (acknowledgement first) is the event loop's."""
        subscriber = Subscriber(principal, None, token=True, tag=listen.request_id,
                                list_changed=bool(listen.honored.get("resourcesListChanged")),
                                limit=SUBSCRIPTIONS_MAX)
        for uri in listen.honored.get("resourceSubscriptions", ()):
            subscriber.add(uri)
        return Reply(200, stream=(subscriber, listen.acknowledgement(), listen.ended()))

    def _open_get(self, req):
        """On a worker thread: GET with a handshake session's ID opens its notification stream
        (2025-11-25 transports.mdx, "Listening for Messages from the Server"); one a session."""
        session_id = req.header(b"mcp-session-id")
        allow = [(b"Allow", b"GET, POST, DELETE, OPTIONS")]
        try:
            with self.auth.borrow() as store:
                principal = self._authenticate(req, store)
                if session_id is None:
                    raise Refusal(405, refusal("Method not allowed: GET opens the event stream "
                                               "of a session, and this request names none "
                                               "(Mcp-Session-Id); 2026-07-28 clients listen "
                                               "with subscriptions/listen"), allow)
                if "text/event-stream" not in (req.header(b"accept") or ""):
                    raise Refusal(406, refusal("Not Acceptable: GET opens a session's event "
                                               "stream; send Accept: text/event-stream"))
                row = store.sessions.find(session_id, principal.name,
                                          idle_s=self.settings.session_timeout)
            if row is None:
                raise Refusal(404, refusal("Session not found: it ended, or never was; send "
                                           "initialize for a new one"))
        except Refusal as refused:
            return refused.reply
        except ToolError as exc:
            return self._unavailable(req, exc).reply
        if session_id in self._get_streams:
            return Reply(409, refusal("Conflict: this session's event stream is already open; "
                                      "a session has one"))

        def source(watcher_store):
            return watcher_store.sessions.subscriptions(session_id)

        subscriber = Subscriber(principal, None, token=True, list_changed=True, source=source)
        subscriber.session_id = session_id
        return Reply(200, stream=(subscriber, None, None))

    async def _stream(self, req, receive, send, reply):
        """Hold a notification stream open: its first message, then what the watcher hands
        the subscriber, keep-alive comments between; until the client goes (a listen is then
        cancelled: no response) or the server ends it (a listen's result, then the end)."""
        subscriber, first, last = reply.stream
        loop = asyncio.get_running_loop()
        inbox = asyncio.Queue()
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
            if session_id in self._get_streams:
                await self._send(send, req, Reply(409, refusal(
                    "Conflict: this session's event stream is already open; a session has one")))
                return
            self._get_streams.add(session_id)
        try:
            try:
                await self.threads.run(loop, self.hub.add, subscriber)
            except TooMany as exc:
                request_id = last["id"] if last is not None else None
                await self._send(send, req, Reply(429, refusal(
                    "Subscription limit reached: %s" % exc, INTERNAL_ERROR, request_id,
                    {"reason": "subscription_limit"}), [(b"Retry-After", b"%d" % RETRY_AFTER_S)]))
                return
            await send({"type": "http.response.start", "status": 200,
                        "headers": SSE_HEADERS + self._cors(req)})
            if first is not None:
                await send({"type": "http.response.body", "body": event(first),
                            "more_body": True})
            else:  # tells the client at once that the stream is open
                await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
            gone = asyncio.ensure_future(_disconnected(receive))
            closed = loop.create_future()
            subscriber.on_close = lambda: loop.call_soon_threadsafe(_settle, closed, None, None)
            if subscriber.closed.is_set():
                _settle(closed, None, None)
            try:
                while True:
                    getter = asyncio.ensure_future(inbox.get())
                    done, _ = await asyncio.wait([getter, gone, closed],
                                                 timeout=self.settings.keepalive,
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
            self.hub.remove(subscriber)
            if session_id is not None:
                self._get_streams.discard(session_id)

    # -- DELETE --------------------------------------------------------------------------------

    def _delete(self, req):
        """On a worker thread: the caller's session named by Mcp-Session-Id ends; 204."""
        session_id = req.header(b"mcp-session-id")
        session = None
        try:
            with self.auth.borrow() as store:
                principal = self._authenticate(req, store)
                if session_id is None:
                    raise Refusal(405, refusal("Method not allowed: DELETE ends a session; this "
                                               "request names none"),
                                  [(b"Allow", b"POST, DELETE, OPTIONS")])
                session = self.sessions.find(store, session_id, principal)
            if session is None:
                raise Refusal(404, refusal("Session not found: it ended, or never was"))
            self.sessions.end(session)
            log.info("session %s ended by its client", session_id)
            return Reply(204)
        except Refusal as refused:
            return refused.reply
        except ToolError as exc:
            return self._unavailable(req, exc).reply
        finally:
            if session is not None:
                self.sessions.release(session)


def create_app(db, *, signing_secret=None, **options):
    """The MCP endpoint for the store at ``db``, as an ASGI application to run or mount.

    ``signing_secret`` (bytes) signs 2026-07-28 approval handles; give every process that
    shares the store the same one (a random one serves this process alone). ``options`` are
    ``Settings`` fields: ``allowed_origins``, ``max_body``, ``threads``, ``session_timeout``...
    """
    if signing_secret is None:
        log.info("no signing secret given: 2026-07-28 approvals can be finished by this process "
                 "only (set KB_SIGNING_SECRET on every server that shares the database)")
        signing_secret = secrets.token_bytes(32)
    if "allowed_origins" in options:
        options["allowed_origins"] = tuple(options["allowed_origins"])
    return McpApp(Settings(db=db, signing_secret=signing_secret, **options))


def app_from_env():
    """``uvicorn --factory kbcite.server.asgi:app_from_env``: the app for the store at
    ``$KB_DB``, signed with ``$KB_SIGNING_SECRET``, its options from ``ENVIRONMENT``."""
    db = os.environ.get("KB_DB")
    if not db:
        raise RuntimeError("KB_DB is not set: export KB_DB=STORE (a file or a postgresql:// "
                           "URL made with kb init) before starting the app")
    options = {}
    for name, (field, kind) in ENVIRONMENT.items():
        value = os.environ.get(name)
        if value:
            try:
                options[field] = (tuple(v for v in value.replace(",", " ").split() if v)
                                  if kind == "list" else kind(value))
            except ValueError:
                raise RuntimeError("%s=%r is not a valid %s" % (name, value, kind.__name__)
                                   ) from None
    secret = os.environ.get("KB_SIGNING_SECRET")
    return create_app(db, signing_secret=secret.encode("utf-8") if secret else None, **options)
