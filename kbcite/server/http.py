"""The Streamable HTTP transport: one endpoint (``/mcp``), a thread per connection.

A POST is one message in and a JSON body or an event stream out. This module owns HTTP's
concerns and nothing of the protocol's: the bearer token, ``Origin`` and ``Host``, body caps,
slow and idle clients, ``Mcp-Session-Id``, and the 2026-07-28 routing headers checked against
the body.
"""

import base64
import contextlib
import http.server
import ipaddress
import json
import logging
import secrets
import socket
import socketserver
import threading

from .jsonrpc import (HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
                      MISSING_CAPABILITY, PARSE_ERROR, UNSUPPORTED_VERSION, RpcError, classify,
                      encode, error_response, id_if_any)
from .pool import StorePool
from .protocol import META_VERSION, SERVER_NAME, SERVER_VERSION, Context, Principal, answer
from .session import Call, Cancelled, Session

# Streamable HTTP defaults. A 1 MiB article JSON-escaped with \u sequences takes six bytes a
# character: 8 MiB holds any valid edit, and refuses a flood.
MCP_PATH = "/mcp"
MAX_BODY = 8 * 1024 * 1024

# A request must arrive whole within this (a client trickling a byte a second is cut off), and
# an open connection waits this long for its next request.
REQUEST_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 60.0
MAX_CONNECTIONS = 64

# Connections the kernel queues before the server accepts them. socketserver's 5 overflows
# when many clients connect at once, and Linux then resets what it dropped: 64 connecting
# together got 20 to 37 "connection reset" in each of five tries. Room for every connection
# the server would serve, and never less than this.
LISTEN_BACKLOG = 128

# The HTTP status of each error on the 2026-07-28 path (transports/streamable-http.mdx).
ERROR_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400,
                HEADER_MISMATCH: 400, MISSING_CAPABILITY: 400, UNSUPPORTED_VERSION: 400,
                METHOD_NOT_FOUND: 404}

# The names a loopback server answers to: its own Host header and Origin, whichever is used.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

log = logging.getLogger(__name__)


class HttpRejected(Exception):
    """An HTTP request refused before the protocol saw it: a status, headers, a JSON body."""

    def __init__(self, status, body=None, headers=None):
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


def refusal(message, code=INVALID_REQUEST, request_id=None):
    """The JSON-RPC error body of a refused request: clients read the reason there."""
    return error_response(request_id, RpcError(code, message))


class HttpServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """A thread per connection, at most ``max_connections`` at once."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, transport):
        self.transport = transport
        self._slots = threading.BoundedSemaphore(transport.max_connections)
        self.request_queue_size = max(LISTEN_BACKLOG, transport.max_connections)
        http.server.HTTPServer.__init__(self, address, HttpHandler)

    def process_request(self, request, client_address):
        """Serve a connection on a thread of its own, or refuse it with 503 when full."""
        if not self._slots.acquire(blocking=False):
            # Full: say so at once rather than queue a client behind a slow one.
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                b"Retry-After: 1\r\nConnection: close\r\n\r\n")
            self.shutdown_request(request)
            return
        socketserver.ThreadingMixIn.process_request(self, request, client_address)

    def process_request_thread(self, request, client_address):
        """The connection's thread; its slot is free again when it ends."""
        try:
            socketserver.ThreadingMixIn.process_request_thread(self, request, client_address)
        finally:
            self._slots.release()


class HttpTransport:
    """Streamable HTTP on one endpoint (``/mcp``): both eras, tokens, the HTTP safeguards."""

    def __init__(self, protocol, address, host, port, *, allowed_origins=(), max_body=MAX_BODY,
                 request_timeout=REQUEST_TIMEOUT_S, idle_timeout=IDLE_TIMEOUT_S,
                 max_connections=MAX_CONNECTIONS, authorization_server=None):
        self.protocol = protocol
        # Token checks have connections of their own: a request is authenticated even while
        # every tool connection waits (on a lock, say), and reads never wait for writers.
        self.auth_pool = StorePool(address, readers=2, writers=1)
        self.max_body = max_body
        self.request_timeout = request_timeout
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self.authorization_server = authorization_server
        self.sessions = {}
        self.sessions_lock = threading.Lock()
        self.server = HttpServer((host, port), self)
        self.port = self.server.server_address[1]
        self.loopback = _is_loopback(host)
        self.allowed_hosts = {"%s:%d" % (name, self.port) for name in
                              LOOPBACK_NAMES} if self.loopback else None
        self.allowed_origins = set(allowed_origins) | {
            "http://%s:%d" % (name, self.port) for name in LOOPBACK_NAMES}

    def serve_forever(self):
        """Serve until interrupted."""
        self.server.serve_forever(poll_interval=0.2)

    def close(self):
        """Stop serving, close the socket and the token connections."""
        self.server.shutdown()
        self.server.server_close()
        self.auth_pool.close()

    # -- the checks every request passes ---------------------------------------------------------

    def check_origin_and_host(self, headers):
        """DNS rebinding: a page's Origin must be ours; on loopback, the Host must be too
        (transports, "Security Warning": validate Origin, bind to localhost)."""
        origin = headers.get("Origin")
        if origin is not None and origin not in self.allowed_origins:
            raise HttpRejected(403, refusal("Forbidden: Origin %.100s is not allowed (kb-server "
                                            "--allow-origin adds one)" % origin))
        if self.allowed_hosts is not None and headers.get("Host") not in self.allowed_hosts:
            raise HttpRejected(421, refusal("Misdirected Request: Host %.100s is not this "
                                            "server's loopback address" % headers.get("Host")))

    def authenticate(self, headers):
        """The caller a bearer token names; 401 with WWW-Authenticate: Bearer otherwise."""
        value = headers.get("Authorization") or ""
        scheme, _, token = value.partition(" ")
        challenge = 'Bearer realm="kb-server"'
        if self.authorization_server:
            challenge += ', resource_metadata="%s"' % self.metadata_url(headers)
        if scheme.lower() != "bearer" or not token.strip():
            raise HttpRejected(401, refusal("Unauthorized: send Authorization: Bearer TOKEN (kb "
                                            "token create makes one)"),
                               {"WWW-Authenticate": challenge})
        with self.auth_pool.reading() as store:
            found = store.token_principal(token.strip())
        if found is None:
            raise HttpRejected(401, refusal("Unauthorized: the token is not valid (unknown or "
                                            "revoked)"),
                               {"WWW-Authenticate": challenge + ', error="invalid_token"'})
        return Principal(found["name"], frozenset(found["grants"]), found["writes"])

    def metadata_url(self, headers):
        """Where this server's OAuth protected-resource metadata is (RFC 9728)."""
        return "http://%s/.well-known/oauth-protected-resource%s" % (
            headers.get("Host", "127.0.0.1:%d" % self.port), MCP_PATH)

    def metadata(self, headers):
        """The RFC 9728 document naming the authorization server that issues our tokens."""
        return {"resource": "http://%s%s" % (headers.get("Host"), MCP_PATH),
                "authorization_servers": [self.authorization_server],
                "bearer_methods_supported": ["header"], "resource_name": SERVER_NAME}

    # -- sessions (2025-11-25 and earlier) -------------------------------------------------------

    def new_session(self, principal):
        """A session for an initialize, under a fresh, unguessable ID."""
        session = Session(principal, secrets.token_urlsafe(24))
        with self.sessions_lock:
            self.sessions[session.id] = session
        return session

    def session_for(self, session_id, principal):
        """The live session with this ID, held by this caller; 404 otherwise."""
        with self.sessions_lock:
            session = self.sessions.get(session_id)
        # Another caller's session looks exactly like none: sessions are not authentication.
        if session is None or session.closed or session.principal.name != principal.name:
            raise HttpRejected(404, refusal("Session not found: it ended, or never was; send "
                                            "initialize for a new one"))
        return session

    def end_session(self, session):
        """DELETE: the session ends; questions it waits on end unanswered."""
        with self.sessions_lock:
            self.sessions.pop(session.id, None)
        session.close()


def _is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def decode_name_header(value):
    """An ``Mcp-Name`` header's value, the ``=?base64?...?=`` sentinel form decoded."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
    return value


class HttpHandler(http.server.BaseHTTPRequestHandler):
    """One connection's requests; the transport's rules, the protocol's answers."""

    protocol_version = "HTTP/1.1"
    server_version = "%s/%s" % (SERVER_NAME, SERVER_VERSION)
    # Headers and body leave in two writes; with Nagle's algorithm the body waits for the
    # client's delayed ACK of the headers, 40 ms on Linux, on every response.
    disable_nagle_algorithm = True

    def setup(self):
        """The connection's transport, and its idle timeout on the socket."""
        self.transport = self.server.transport
        self.timeout = self.transport.idle_timeout
        http.server.BaseHTTPRequestHandler.setup(self)

    def handle_one_request(self):
        """One request, cut off unless it arrives whole within the request timeout."""
        # A client that trickles its headers or body is cut off, whatever the socket's idle
        # timeout allows; serve() says when the request has been read.
        self._read_done = False
        watchdog = threading.Timer(self.transport.request_timeout, self._too_slow)
        watchdog.daemon = True
        watchdog.start()
        try:
            http.server.BaseHTTPRequestHandler.handle_one_request(self)
        finally:
            watchdog.cancel()

    def _too_slow(self):
        if not self._read_done:
            log.info("closed a connection from %s: no whole request in %g s",
                     self.client_address[0], self.transport.request_timeout)
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        """The base class's access log, at debug level."""
        log.debug("%s %s", self.client_address[0], format % args)

    # -- replies -----------------------------------------------------------------------------

    def reply(self, status, body=None, headers=None):
        """A whole response: JSON when there is a body (errors too: clients read them)."""
        data = encode(body) if body is not None else b""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def reject(self, exc):
        """Answer an HttpRejected; a refused request ends its connection."""
        self.close_connection = True
        headers = dict(exc.headers, Connection="close")
        self.reply(exc.status, exc.body, headers)

    # -- methods -----------------------------------------------------------------------------

    def serve(self, respond, read=None):
        """Read the request (``read``: its checks, then its body; None when the headers were
        all of it), then ``respond`` with what was read; a rejection from either is answered."""
        try:
            try:
                request = read() if read is not None else ()
            finally:
                # Read whole, or refused before its body: nothing more will be read, and the
                # watchdog stands down. Every method comes through here.
                self._read_done = True
            respond(*request)
        except HttpRejected as exc:
            self.reject(exc)

    def do_GET(self):
        """No server-to-client stream: 405 (the metadata document excepted)."""
        self.serve(self.get)

    def do_PUT(self):
        """Not an MCP method."""
        self.serve(self.put)

    do_PATCH = do_PUT

    def do_DELETE(self):
        """End a handshake session (transports, "Session Management")."""
        self.serve(self.delete)

    def do_POST(self):
        """One JSON-RPC message in, its answer out."""
        self.serve(self.post, read=self.read_post)

    def get(self):
        """GET: the metadata document, or 405 (and 404 off the endpoint)."""
        self.transport.check_origin_and_host(self.headers)
        if self.path.startswith("/.well-known/oauth-protected-resource") and \
                self.transport.authorization_server:
            return self.reply(200, self.transport.metadata(self.headers))
        if self.path.split("?")[0] != MCP_PATH:
            return self.reply(404, refusal("Not found: the MCP endpoint is %s" % MCP_PATH))
        self.reply(405, refusal("Method not allowed: this server opens no stream on GET; POST "
                                "requests to %s" % MCP_PATH), {"Allow": "POST, DELETE"})

    def put(self):
        """PUT and PATCH: 405, and the connection closes."""
        raise HttpRejected(405, refusal("Method not allowed"), {"Allow": "POST, DELETE"})

    def delete(self):
        """DELETE: the caller's session named by Mcp-Session-Id ends; 204."""
        transport = self.transport
        transport.check_origin_and_host(self.headers)
        principal = transport.authenticate(self.headers)
        session_id = self.headers.get("Mcp-Session-Id")
        if session_id is None:
            raise HttpRejected(405, refusal("Method not allowed: DELETE ends a session; this "
                                            "request names none"), {"Allow": "POST, DELETE"})
        session = transport.session_for(session_id, principal)
        transport.end_session(session)
        log.info("session %s ended by its client", session.id)
        self.reply(204)

    def read_post(self):
        """A POST's checks in order (endpoint, Origin and Host, token), then its body:
        ``(principal, body bytes)``."""
        transport = self.transport
        if self.path.split("?")[0] != MCP_PATH:
            raise HttpRejected(404, refusal("Not found: the MCP endpoint is %s" % MCP_PATH))
        transport.check_origin_and_host(self.headers)
        principal = transport.authenticate(self.headers)
        return principal, self.read_body()

    def read_body(self):
        """The body's bytes: JSON by its Content-Type, size-capped, whole; or an HttpRejected."""
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise HttpRejected(415, refusal("Unsupported Media Type: send Content-Type: "
                                            "application/json"))
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise HttpRejected(411, refusal("Length Required: send Content-Length"))
        if int(length) > self.transport.max_body:
            raise HttpRejected(413, refusal("Payload Too Large: at most %d bytes a request"
                                            % self.transport.max_body))
        try:
            raw = self.rfile.read(int(length))
        except OSError:
            raw = b""
        if len(raw) != int(length):
            raise HttpRejected(400, refusal("Parse error: the body ended early", PARSE_ERROR))
        return raw

    def post(self, principal, raw):
        """The body decoded as one message, then routed by its kind."""
        try:
            message = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise HttpRejected(400, refusal("Parse error: %s" % exc, PARSE_ERROR)) from None
        kind, error = classify(message)
        if error is not None:
            return self.reply(400, error_response(id_if_any(message), error))
        if kind == "request":
            self.on_request(message, principal)
        elif kind == "notification":
            self.on_notification(message, principal)
        else:
            self.on_response(message, principal)

    def on_notification(self, message, principal):
        """202 for any notification; a handshake session's are acted on."""
        session_id = self.headers.get("Mcp-Session-Id")
        if session_id is not None:
            # Params that are not an object are read as none here (stdio ignores them).
            self.transport.session_for(session_id, principal).notify(message, strict=False)
        self.reply(202)

    def on_response(self, message, principal):
        """A client's answer to our question (elicitation/create): 202."""
        session_id = self.headers.get("Mcp-Session-Id")
        if session_id is None:
            raise HttpRejected(400, refusal("Invalid Request: a response belongs to a session; "
                                            "this POST names none"))
        self.transport.session_for(session_id, principal).deliver(message)
        self.reply(202)

    def on_request(self, message, principal):
        """Route a request to its era's checks, then answer it (JSON, or a stream that asks)."""
        transport, protocol = self.transport, self.transport.protocol
        method, params = message["method"], message.get("params")
        session = None
        headers = {}
        if method == "initialize" and protocol.modern_meta(params) is None:
            session = transport.new_session(principal)
            headers["Mcp-Session-Id"] = session.id
        elif self.headers.get("Mcp-Session-Id") is not None and \
                protocol.modern_meta(params) is None:
            session = transport.session_for(self.headers.get("Mcp-Session-Id"), principal)
            version = self.headers.get("MCP-Protocol-Version")
            if version is not None and version != session.protocol_version:
                raise HttpRejected(400, refusal(
                    "Bad Request: MCP-Protocol-Version %.40s is not this session's %s"
                    % (version, session.protocol_version), request_id=message["id"]))
        else:
            self.check_routing_headers(message)
        if session is None:
            call = Call(message["id"])  # 2026-07-28: the request is all there is
        else:
            try:
                call = session.begin(message)
            except RpcError as exc:
                return self.reply(400, error_response(message["id"], exc))
        stream = Stream(self, headers)
        ctx = Context(principal=principal, call=call, session=session,
                      ask=lambda params: stream.ask(session, call, params))
        try:
            response = answer(protocol, message, ctx)
        finally:
            if session is not None:
                session.end(call)
        if response is None:  # cancelled: no response for it
            return stream.end()
        if session is not None and method == "initialize" and "error" in response:
            transport.end_session(session)
            headers.pop("Mcp-Session-Id", None)
        status = 200
        if "error" in response and session is None:
            status = ERROR_STATUS.get(response["error"]["code"], 200)
        stream.finish(status, response)

    def check_routing_headers(self, message):
        """2026-07-28: MCP-Protocol-Version, Mcp-Method and Mcp-Name must match the body
        (transports/streamable-http.mdx, "Server Validation")."""
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        meta = self.transport.protocol.modern_meta(params)
        if meta is None:
            return  # the protocol answers it: no _meta and no session is -32602 (400)
        problems = []
        version = self.headers.get("MCP-Protocol-Version")
        if version is None:
            problems.append("the MCP-Protocol-Version header is missing")
        elif version != meta.get(META_VERSION):
            problems.append("MCP-Protocol-Version %.40s is not the body's %.40s"
                            % (version, meta.get(META_VERSION)))
        method_header = self.headers.get("Mcp-Method")
        if method_header is None:
            problems.append("the Mcp-Method header is missing")
        elif method_header != message["method"]:
            problems.append("Mcp-Method %.60s is not the body's %.60s"
                            % (method_header, message["method"]))
        if message["method"] in ("tools/call", "resources/read", "prompts/get"):
            name = self.headers.get("Mcp-Name")
            body_name = params.get("name", params.get("uri"))
            if name is None:
                problems.append("the Mcp-Name header is missing")
            elif decode_name_header(name) != body_name:
                problems.append("Mcp-Name %.60s is not the body's %.60s" % (name, body_name))
        if problems:
            raise HttpRejected(400, refusal("Header mismatch: %s" % "; ".join(problems),
                                            HEADER_MISMATCH, message["id"]))


class Stream:
    """An HTTP answer that is one JSON body, unless the server must ask the client something
    first (2025-11-25 elicitation): then an event stream carrying the question, then the
    answer (transports, "Sending Messages to the Server", item 6)."""

    def __init__(self, handler, headers):
        self.handler = handler
        self.headers = headers
        self.streaming = False

    def _event(self, message):
        self.handler.wfile.write(b"event: message\r\ndata: " + encode(message) + b"\r\n\r\n")
        self.handler.wfile.flush()

    def ask(self, session, call, params):
        """Send elicitation/create on the stream; wait for the answer POSTed on the session."""
        if session is None:
            raise Cancelled()
        if not self.streaming:
            handler = self.handler
            handler.send_response(200)
            for name, value in self.headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Cache-Control", "no-store")
            handler.send_header("X-Accel-Buffering", "no")
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.close_connection = True
            self.streaming = True
        def send(message):
            try:
                self._event(message)
            except OSError:
                call.cancelled.set()

        _, reply = session.ask(call, params, send)
        if call.cancelled.is_set():
            raise Cancelled()
        return reply

    def finish(self, status, response):
        """Send the answer: the last event of the stream, or a whole JSON response."""
        if self.streaming:
            with contextlib.suppress(OSError):
                self._event(response)
        else:
            self.handler.reply(status, response, self.headers)

    def end(self):
        """No answer (cancelled): close the stream, or say 202 to an un-streamed POST."""
        if not self.streaming:
            self.handler.reply(202)
