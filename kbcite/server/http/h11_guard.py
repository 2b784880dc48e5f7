"""uvicorn's h11 protocol with the guards an endpoint facing hostile clients needs.

uvicorn's ``H11Protocol`` leaves open what a server on a network must close:

- no timer before a connection's first request, and none while a head or body trickles in
  (every byte cancels its keep-alive timer): sockets that never finish a request are held
  for ever (slowloris);
- a cap on the request head only while it is incomplete (h11 checks its buffer only when it
  needs more data; a whole head in one read of up to 256 KiB passes), answered 400, not 431;
- ``Transfer-Encoding`` together with ``Content-Length`` framed by the former, the connection
  kept: RFC 9112 6.3 asks for an error and a closed connection, since a gateway framing by
  the other header sees a different request;
- TCP_NODELAY only on sockets asyncio made itself: on an accepted socket of a listener bound
  beforehand (ours, and every ``--workers`` deployment's), each response's body waits for
  the client's delayed acknowledgement of its headers, 40 ms a request.

``GuardedH11Protocol`` closes them, answering each refusal with a JSON-RPC error body and a
lingering close. Its settings (``Guard``) ride on the uvicorn ``Config`` as ``kb_guard``,
which uvicorn pickles whole to every worker; run by a plain ``uvicorn --http
kbcite.server.h11_guard:GuardedH11Protocol`` (a re-export of this) the defaults below hold. It
reads uvicorn's own attributes (``conn``, ``cycle``, ``transport``, ``timeout_keep_alive_task``):
it is tested on the uvicorn that Python 3.9 gets (0.39) and on the newest.
"""

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .connection_guard import (  # noqa: F401  (the names deployments and tests import from here)
    ADDRESS_SHARE,
    GRACE_S,
    HEAD_MAX,
    IDLE_TIMEOUT_S,
    LINGER_S,
    MAX_CONNECTIONS,
    PHRASES,
    PROBATION_S,
    REQUEST_TIMEOUT_S,
    SWEEP_S,
    VERSIONS,
    Guard,
    Guarded,
)


class _Judged(h11.Connection):
    """h11's connection, remembering why it refused a request, and refusing a head h11 lets
    through: too large, or framed by both Transfer-Encoding and Content-Length."""

    head_max = HEAD_MAX
    refusal = None

    def next_event(self):
        """The next event, as h11 would give it, or RemoteProtocolError."""
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refusal = exc
            raise
        if type(event) is h11.Request:
            status, why = self._judge(event)
            if status is not None:
                self.refusal = h11.RemoteProtocolError(why, error_status_hint=status)
                raise self.refusal
        return event

    def _judge(self, event):
        # A pipelined head parsed from a buffer is measured here; the first of each read is
        # measured before h11 buffers it (GuardedH11Protocol._head_too_big).
        size = len(event.method) + len(event.target) + 12 + sum(
            len(name) + len(value) + 4 for name, value in event.headers.raw_items()) + 2
        if size > self.head_max:
            return 431, "the request head is %d bytes, over %d" % (size, self.head_max)
        version = event.http_version.decode("ascii")
        if version not in VERSIONS:
            return 400, "HTTP/%s is not served; send HTTP/1.1" % version
        names = [name for name, _ in event.headers]
        if b"transfer-encoding" in names and b"content-length" in names:
            return 400, ("both Transfer-Encoding and Content-Length frame this request "
                         "(RFC 9112 6.3); send one")
        return None, None


class GuardedH11Protocol(Guarded, H11Protocol):
    """uvicorn's h11 protocol with a head cap, strict framing, request and idle deadlines,
    a connection cap and TCP_NODELAY (see the module docstring)."""

    def __init__(self, config, server_state, app_state, _loop=None):
        super().__init__(config, server_state, app_state, _loop)
        self.conn = self._new_conn()

    def _new_conn(self):
        conn = _Judged(h11.SERVER, max_incomplete_event_size=self.guard.head_max)
        conn.head_max = self.guard.head_max
        return conn

    def data_received(self, data):
        """Bytes of a request: the deadline starts with its first, the head is measured before
        h11 buffers it, and what arrives after a refusal is dropped."""
        if self._refused:
            return
        if self.conn.their_state is h11.IDLE and self._head_arrives(data):
            return
        super().data_received(data)
        if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
            self._disarm()  # the request is whole (or the connection is done with)

    # -- refusals -----------------------------------------------------------------------------

    def send_400_response(self, msg):
        """What uvicorn calls when h11 refuses a request: h11's own status hint (501 for a
        transfer coding it does not know) and reason, answered as every refusal is."""
        exc = getattr(self.conn, "refusal", None)  # _Judged's
        if exc is not None:
            self._refusal = (getattr(exc, "error_status_hint", 400), str(exc))
        super().send_400_response(msg)

    def _forget_buffered(self):
        self.conn = self._new_conn()
