"""uvicorn's httptools protocol (llhttp, a C parser) with the guards of ``guard``.

llhttp is strict where h11 needed help: ``Transfer-Encoding`` beside ``Content-Length``, two
lengths, a length that is not ASCII digits, bare LF line ends, obsolete line folding and
whitespace before a colon are refused by the parser itself. It keeps no cap on a request's
head, and it reads any transfer coding list that ends in chunked, a ``Host`` header twice or
none, and versions past 1.1; those, and what uvicorn's ``HttpToolsProtocol`` leaves open as it
does for h11 (no deadline before a request or while it trickles in, TCP_NODELAY on an accepted
socket), are guarded here and in ``guard``, with the same answers as ``h11_guard`` gives.

It parses a request and writes its answer in a fraction of h11's time, so ``kb-server`` uses
it wherever httptools is installed (``--http-parser``); run by a plain ``uvicorn --http
kbcite.server.http.httptools_guard:GuardedHttpToolsProtocol`` the defaults of ``Guard`` hold.
It reads uvicorn's own attributes (``parser``, ``cycle``, ``transport``), as ``h11_guard``
does: it is tested on the uvicorn that Python 3.9 gets (0.39) and on the newest.
"""

import collections
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .connection_guard import VERSIONS, Guard, Guarded  # noqa: F401  (Guard: the settings, named here too)


class _Refused(Exception):
    """Raised in a parser callback to stop the parse; its reason is the protocol's refusal."""


class GuardedHttpToolsProtocol(Guarded, HttpToolsProtocol):
    """uvicorn's httptools protocol with a head cap, the framing llhttp lets through refused,
    request and idle deadlines, a connection cap and TCP_NODELAY (see the module docstring)."""

    def __init__(self, config, server_state, app_state, _loop=None):
        super().__init__(config, server_state, app_state, _loop)
        self._in_head = True  # between requests, or reading a head: the cap counts bytes
        self._head_size = 0  # the head parsed so far, as the callbacks give it
        self._hosts = 0
        self._upgraded = False
        self._deferred = False  # a refusal waits for the answers of the requests before it
        # The scopes of the requests under way, oldest first: llhttp reads pipelined requests
        # ahead of their answers, so the protocol's own scope is the newest one's.
        self._scopes: collections.deque[Any] = collections.deque()

    def data_received(self, data):
        """Bytes of a request: the deadline starts with its first, the head is measured before
        the parser buffers it, and what arrives after a refusal is dropped."""
        if self._refused or self._upgraded:
            return
        if self._in_head and self._head_arrives(data):
            return
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
                return
            # The head asked to switch protocols (curl --http2 asks for h2c): answered as
            # HTTP/1.1, and then closed, since what follows it is not HTTP/1.1.
            self._upgraded = True
            if self.cycle is not None:
                self.cycle.keep_alive = False
        except httptools.HttpParserError as exc:
            if self._refusal is None:  # llhttp's own refusal (a callback's is kept already)
                self._refusal = (400, str(exc) or "an invalid HTTP request")
            if self.cycle is not None and not self.cycle.response_complete:
                # Pipelined behind a request not yet answered: that one is answered first,
                # as h11 would (it reads a request only once the one before is answered).
                self._refused, self._deferred = True, True
                self._disarm()
                self.flow.pause_reading()
                return
            self.send_400_response("")

    def on_response_complete(self):
        """A response went out; a refusal waiting for it is answered now."""
        super().on_response_complete()
        if self._deferred and not self.pipeline and not self.transport.is_closing():
            self._deferred = False
            self.send_400_response("")

    # -- the parser's callbacks ---------------------------------------------------------------

    def on_message_begin(self):
        """A request starts: its head is counted from here."""
        self._head_size, self._hosts = 0, 0
        super().on_message_begin()

    def on_url(self, url):
        """A piece of the request target."""
        self._count(len(url) + 12)  # the method, the version, spaces and line end, about
        super().on_url(url)

    def on_header(self, name, value):
        """One header: counted, kept by uvicorn (its name lowered; its value's trailing
        whitespace trimmed by the newest uvicorn only), then its framing judged."""
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)
        name, value = self.headers[-1]
        if name == b"host":
            self._hosts += 1
        elif name == b"transfer-encoding" and value.strip(b" \t").lower() != b"chunked":
            self._refuse_request(501, "the transfer coding %r is not served; send the body "
                                      "chunked or with Content-Length" % value.decode("latin-1"))

    def on_headers_complete(self):
        """The head is whole: a version served, one Host for HTTP/1.1 (RFC 9112 3.2), no body
        behind an Upgrade this server ignores (RFC 9110 7.8)."""
        version = self.parser.get_http_version()
        if version not in VERSIONS:
            self._refuse_request(400, "HTTP/%s is not served; send HTTP/1.1" % version)
        if self._hosts > 1 or (self._hosts == 0 and version == "1.1"):
            self._refuse_request(400, "an HTTP/1.1 request needs exactly one Host header, "
                                      "this one has %d" % self._hosts)
        if self.parser.should_upgrade() and not self._should_upgrade() and any(
                name in (b"content-length", b"transfer-encoding") for name, _ in self.headers):
            # llhttp reads what follows an Upgrade head as the new protocol's: a body would
            # never reach the app. One without a body is answered, then the connection closed.
            self._refuse_request(400, "this server does not switch protocols; send the "
                                      "request without Upgrade")
        self._in_head = False
        super().on_headers_complete()
        self._scopes.append(self.scope)

    def on_message_complete(self):
        """The request is whole: its deadline is done with, and the next head may begin."""
        self._disarm()
        self._in_head = True
        super().on_message_complete()

    def _answered_scope(self):
        return self._scopes.popleft() if self._scopes else None

    # -- refusals -----------------------------------------------------------------------------

    def _count(self, size):
        # A head parsed from the same read as the request before it (pipelined) is measured
        # here; the first of each read is measured before the parser sees it (_head_too_big).
        self._head_size += size
        if self._head_size > self.guard.head_max:
            self._refuse_request(431, "the request head is over %d bytes" % self.guard.head_max)

    def _refuse_request(self, status, why):
        self._refusal = (status, why)
        raise _Refused(why)

    def _forget_buffered(self):
        self.parser = httptools.HttpRequestParser(self)

