"""What the guarded HTTP protocols share, whichever parser reads the bytes: the settings, the
connection cap and each address's share of it, probation, the request and idle deadlines, and
refusals answered with a JSON-RPC error body.

``Guarded`` is mixed into a uvicorn protocol class (``h11_guard``'s ``GuardedH11Protocol``,
``httptools_guard``'s ``GuardedHttpToolsProtocol``), which starts the deadline at a request's
first byte, measures its head (``_head_too_big``) and disarms the deadline once it is whole;
it reads uvicorn's own attributes (``cycle``, ``transport``, ``timeout_keep_alive_task``,
``connections``). See ``h11_guard`` for what uvicorn leaves open and why each guard exists.
"""

import asyncio
import json
import logging
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from ..throttle import Throttle
from .request import AUTHENTICATED

# A request head at most this large (request line and headers): far beyond any MCP client's
# (a bearer token and a dozen headers are under 2 KiB), small enough that a thousand
# connections sending endless heads hold 64 MiB, not gigabytes.
HEAD_MAX = 64 * 1024

# A request must arrive whole, head and body, within this long of its first byte, however it
# trickles; a connection is closed after this long without a request in progress.
REQUEST_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 60.0

# Connections held at once by one process; one more is refused with 503 at once. An idle
# connection costs a few kilobytes under asyncio, so this is sized for floods of idle sockets,
# under the descriptor limit serve raises to fit it.
MAX_CONNECTIONS = 2048

# One client address may hold this share of a process's connections before one of its
# requests is authenticated (max_connections // ADDRESS_SHARE: 256 of 2048), and as many
# requests in progress. A connection past its address's share, or past max_connections, is
# on probation: it must start a request within PROBATION_S and that request must carry a
# valid token, else it is closed. Past max_connections only such connections are let in, up
# to a reserve of max_connections // ADDRESS_SHARE more: a flood of idle sockets from one
# address holds its share and cycles the rest, while a client with a token, even from that
# address, is served.
ADDRESS_SHARE = 8
PROBATION_S = 10.0

# A new connection has this long to start its request before it may be closed to make room
# for another (past the reserve): a client sends its head at once.
GRACE_S = 0.5

# Request deadlines are looked at this often, for every connection at once: a timer of its own
# for each request cost more than the deadline is worth at hundreds of requests a second. A
# request is cut off within this long after its deadline.
SWEEP_S = 0.5

# A refused connection is closed this long after its answer (RFC 9112 9.6, "lingering
# close"): closing with input unread would reset it, and the client could lose the answer.
LINGER_S = 1.0

# Which parser reads the requests (--http-parser): httptools (llhttp, C) where installed,
# else h11 (pure Python); or either by name. The same guards stand in front of both.
PARSERS = ("auto", "httptools", "h11")

# The HTTP versions served (both parsers read any one-digit major and minor).
VERSIONS = ("1.0", "1.1")

PHRASES = {400: b"Bad Request", 408: b"Request Timeout", 431: b"Request Header Fields Too Large",
           501: b"Not Implemented", 503: b"Service Unavailable"}

log = logging.getLogger(__name__)
quiet = Throttle(log)


@dataclass(frozen=True)
class Guard:
    """The guarded protocol's settings (pickled to every worker with uvicorn's Config);
    ``parser`` is one of ``PARSERS``."""

    head_max: int = HEAD_MAX
    request_timeout: float = REQUEST_TIMEOUT_S
    idle_timeout: float = IDLE_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    parser: str = "auto"

    @property
    def per_address(self):
        """Connections (and requests in progress) one address holds before it authenticates."""
        return max(1, self.max_connections // ADDRESS_SHARE)

    @property
    def ceiling(self):
        """Connections a process holds at most: the cap and the reserve above it."""
        return self.max_connections + self.per_address


if TYPE_CHECKING:
    class UvicornProtocol(asyncio.Protocol):
        """What the mixin reads of the uvicorn protocol it is mixed into (h11's or
        httptools', which both have these)."""

        transport: asyncio.Transport
        cycle: Any
        loop: asyncio.AbstractEventLoop
        server_state: Any
        app_state: dict
        connections: set
        client: Any
        timeout_keep_alive_handler: Any
        timeout_keep_alive_task: Any

        def __init__(self, config: Any, server_state: Any, app_state: dict,
                     _loop: Any = None) -> None: ...

        def on_response_complete(self) -> None: ...

        def shutdown(self) -> None: ...
else:
    UvicornProtocol = object


class Guarded(UvicornProtocol):
    """The guards of a uvicorn HTTP protocol, mixed in before it (see the module docstring)."""

    def __init__(self, config, server_state, app_state, _loop=None):
        super().__init__(config, server_state, app_state, _loop)
        self.guard = getattr(config, "kb_guard", None) or Guard()
        # The loop's time at the first byte of the request under way.
        self._started: Optional[float] = None
        self._refused = False
        self._untrusted = None  # its address's share, until a request is authenticated
        self._opened = 0.0
        self._probation = None  # the loop's time by which a request must start, on probation
        self._head_seen = 0
        self._head_tail = b""
        self._refusal = None  # (status, why) of the request being refused, for its answer

    # -- the connection -------------------------------------------------------------------------

    def connection_made(self, transport):
        """Count the connection against the cap, turn Nagle off, start the idle deadline."""
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self._opened = self.loop.time()
        self._untrusted = _untrusted(self.server_state).setdefault(self._peer(), {})
        self._untrusted[self] = None
        if len(self._untrusted) > self.guard.per_address or \
                len(self.connections) > self.guard.max_connections:
            self._probation = self._opened + PROBATION_S
        heaviest = _heaviest(self.server_state)
        why = "%d connections are open (--max-connections and its reserve)" % len(
            self.connections)
        if len(self.connections) > self.guard.ceiling and not (
                _evict(heaviest, self, idle=True, why=why)
                or _evict(heaviest, self, idle=False, why=why)):
            quiet.info("connections", "refused a connection from %s: %d connections are open "
                       "(--max-connections)", self._peer(), len(self.connections) - 1)
            self._refuse(503, "Service Unavailable: too many connections; retry shortly",
                         b"retry-after: 1\r\n")
            return
        # uvicorn arms no timer before the first request; its keep-alive handler closes a
        # connection that sends nothing, now and between requests.
        self.timeout_keep_alive_task = self.loop.call_later(
            self.guard.idle_timeout, self.timeout_keep_alive_handler)
        _sweep_later(self.loop, self.server_state)

    def shutdown(self):
        """The server stops: notification streams (which never end by themselves) are ended
        gracefully first, through the app's hook in the lifespan state, then uvicorn's own."""
        stop = self.app_state.get("kbcite.stop_streams") if isinstance(self.app_state,
                                                                        dict) else None
        if stop is not None:
            stop()
        super().shutdown()

    def connection_lost(self, exc):
        """Stop the request deadline with the connection; it leaves its address's share."""
        self._disarm()
        self._trust()
        super().connection_lost(exc)

    def on_response_complete(self):
        """A response went out: a connection whose request was authenticated leaves its
        address's share (and its probation); one on probation whose request was not is
        closed."""
        scope = self._answered_scope()
        if scope and scope.get(AUTHENTICATED):
            self._trust()
        elif self._probation is not None:
            self._probation = None
            self._trust()
            super().on_response_complete()
            self.transport.close()
            return
        super().on_response_complete()

    def _answered_scope(self):
        """The scope of the request whose response just went out (h11 reads a request only
        once the one before it is answered: the protocol's own)."""
        return getattr(self, "scope", None)

    def _trust(self):
        self._probation = None
        untrusted = getattr(self, "_untrusted", None)
        if untrusted is not None:
            untrusted.pop(self, None)
            if not untrusted:
                _untrusted(self.server_state).pop(self._peer(), None)
            self._untrusted = None

    def idle(self, now=None):
        """Whether no request is under way on this connection, and it has had ``GRACE_S`` to
        send one (with ``now``)."""
        if now is not None and now - self._opened < GRACE_S:
            return False
        return self._started is None and (self.cycle is None or self.cycle.response_complete)

    def _head_arrives(self, data):
        """Bytes while a head is being read: the request's deadline starts with its first,
        and the head is measured (``_head_too_big``); whether it was refused."""
        if self._started is None:
            self._started = self.loop.time()
            self._share_requests()
        return self._head_too_big(data)

    def _head_too_big(self, data):
        """Whether the head now passes the cap, counted across reads up to its blank line,
        before the parser buffers it; a refusal is answered here."""
        window = self._head_tail + data
        crlf = window.find(b"\n\r\n")
        bare = window.find(b"\n\n", 0, crlf if crlf >= 0 else len(window))  # h11 takes LF too
        ends = [i for i in (crlf, bare) if i >= 0]
        size = self._head_seen + (min(ends) - len(self._head_tail) if ends else len(data))
        if size > self.guard.head_max:
            self._refusal = (431, "the request head passed %d bytes" % self.guard.head_max)
            self.send_400_response("")
            return True
        if ends:
            self._head_seen, self._head_tail = 0, b""
        else:
            self._head_seen, self._head_tail = size, window[-2:]
        return False

    def _share_requests(self):
        """A request starts: past its address's share of requests in progress (none yet
        authenticated), it is on probation: served only if its token is valid, and the first
        to be cut off (408) when the process needs room."""
        untrusted = getattr(self, "_untrusted", None)
        if untrusted is None or self._probation is not None:
            return
        if self._started is not None and \
                sum(1 for p in untrusted if p._started is not None) > self.guard.per_address:
            self._probation = self._started + self.guard.request_timeout

    def _disarm(self):
        self._started = None

    def overdue(self, now):
        """Whether the request under way has passed its deadline."""
        return self._started is not None and now - self._started > self.guard.request_timeout

    def idle_on_probation(self, now):
        """Whether this connection, on probation, let its deadline pass without a request."""
        return self._probation is not None and now > self._probation and self.idle()

    def _too_slow(self):
        """The request deadline passed: 408, unless an answer is already under way."""
        self._started = None
        if self.transport.is_closing():
            return
        quiet.info("slow", "closed a connection from %s: no whole request within %g s "
                   "(--request-timeout)", self._peer(), self.guard.request_timeout)
        self._refuse(408, "Request Timeout: the request did not arrive whole within %g s"
                     % self.guard.request_timeout)

    def _peer(self):
        return self.client[0] if self.client else "?"

    # -- refusals -----------------------------------------------------------------------------

    def send_400_response(self, msg):
        """What uvicorn calls when its parser refuses a request: answer the refusal's status
        (431 for a head too large, 501 for a transfer coding not served, else 400), say why,
        and close."""
        status, why = self._refusal or (400, msg or "an invalid HTTP request")
        if status not in PHRASES:
            status = 400
        quiet.info("refused", "refused a request from %s: %d, %s", self._peer(), status, why)
        self._refuse(status, "%s: %s" % (PHRASES[status].decode(), why))

    def _refuse(self, status, message, extra=b""):
        """Answer ``status`` with a JSON-RPC error body and close, lingering."""
        self._disarm()
        if self.cycle is not None and self.cycle.response_started and \
                not self.cycle.response_complete:
            self.transport.close()  # an answer is under way: nothing else can be said
            return
        body = json.dumps({"jsonrpc": "2.0", "id": None,
                           "error": {"code": -32600, "message": message}}).encode("utf-8")
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\nconnection: close\r\n%s\r\n%s"
                             % (status, PHRASES[status], len(body), extra, body))
        if self.cycle is not None:
            # The app's receive() now says http.disconnect: the request it reads is gone.
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self._linger()

    def _linger(self):
        """Half-close, drop what still arrives, close within LINGER_S; the refused head the
        parser buffered is let go at once."""
        self._refused = True
        self._forget_buffered()
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()

    def _forget_buffered(self):
        """Let go of what the parser holds of a refused request (a parser of its own)."""


def _untrusted(server_state):
    """``{address: {protocol: None}}`` of a server's connections not yet authenticated, each
    address's oldest first."""
    found = getattr(server_state, "kb_untrusted", None)
    if found is None:
        found = server_state.kb_untrusted = {}
    return found


def _heaviest(server_state):
    """The not-yet-authenticated connections of the address that holds the most."""
    shares = _untrusted(server_state)
    return max(shares.values(), key=len) if shares else {}


def _evict(share, newcomer, idle, why):
    """Close the oldest connection of ``share`` other than ``newcomer`` that is idle past its
    grace (or, with ``idle`` False, has a request in progress on probation); whether there
    was one."""
    now = newcomer.loop.time()
    for protocol in share:
        if protocol is newcomer or protocol._refused:
            continue
        if (idle and not protocol.idle(now)) or (
                not idle and (protocol._started is None or protocol._probation is None)):
            continue
        quiet.info("share", "closed a connection from %s: %s, not yet authenticated",
                   protocol._peer(), why)
        protocol._trust()
        if idle:
            protocol.transport.close()
        else:
            protocol._refuse(408, "Request Timeout: the server is full and this address "
                             "holds more than its share; authenticated requests go first")
        return True
    return False


def _sweep_later(loop, server_state):
    """Make sure the connections of a server (uvicorn's ServerState) are swept for overdue
    requests every SWEEP_S, while it has any."""
    if not getattr(server_state, "kb_sweeping", False):
        server_state.kb_sweeping = True
        loop.call_later(SWEEP_S, _sweep, loop, server_state)


def _sweep(loop, server_state):
    now = loop.time()
    # Probations ended a share at a time: a flood that came at once is not closed (and
    # reopened) at once, which would hold the loop for everyone else.
    ending = None
    for protocol in list(server_state.connections):
        if not isinstance(protocol, Guarded):
            continue
        if ending is None:
            ending = protocol.guard.per_address
        if protocol.overdue(now):
            protocol._too_slow()
        elif ending > 0 and protocol.idle_on_probation(now):
            ending -= 1
            quiet.info("share", "closed a connection from %s: on probation (its address past "
                       "its share, or the process past --max-connections), it sent no request "
                       "within %g s", protocol._peer(), PROBATION_S)
            protocol._trust()
            protocol.transport.close()
    if server_state.connections:
        loop.call_later(SWEEP_S, _sweep, loop, server_state)
    else:
        server_state.kb_sweeping = False
