"""Who calls, and a client's requests in flight, once for both transports: their IDs,
cancellation, and the questions put to the client.

A ``Session`` is what a handshake (2025-11-25 and earlier) negotiated: one per process on
stdio; over HTTP the store keeps what was negotiated and each process holds a copy for the
requests of the session it serves (``http.handshakes``). A 2026-07-28 request has no session;
its ``Call`` lives as long as the request.
"""

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from ..writes import mode
from .jsonrpc import INVALID_REQUEST, RpcError, id_key, is_request_id, to_json

# How long a handshake session's question waits for its person: long enough to read an edit,
# short enough that a forgotten one lapses (as long as an approval handle stays good).
ASK_TIMEOUT_S = 600

# Where an HTTP request's scope holds the name of who sent it once known (the token's name,
# the signed-in person's): the access log's, never the token itself.
CALLER = "kbcite.caller"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Principal:
    """Who is calling and what they may do: a token's (HTTP) or the command line's (stdio)."""

    name: str
    grants: frozenset
    writes: str
    # A team issuer's caller has a write mode a knowledge base (its scopes say which it may
    # write): ``(knowledge_base_id, mode)`` pairs, each overriding ``writes`` for that one.
    kb_writes: frozenset = frozenset()
    # The issuer that vouched for ``name`` (None: a kb token, or the stdio server's --actor).
    issuer: Optional[str] = None

    def writes_for(self, kb_id):
        """The write mode of this caller's edits of knowledge base ``kb_id``."""
        for kb, name in self.kb_writes:
            if kb == kb_id:
                return name
        return self.writes

    @property
    def may_write(self):
        """Whether some knowledge base's edits are not denied to this caller."""
        return mode(self.writes).edits or any(mode(name).edits for _, name in self.kb_writes)


class Cancelled(Exception):
    """The client cancelled the request: no response is sent for it."""


@dataclass
class Call:
    """One request in flight: its ID, whether the client has cancelled it, and how to stop
    the store call it is in (if any)."""

    request_id: Any
    cancelled: threading.Event = field(default_factory=threading.Event)
    interrupt: Any = None
    started: float = field(default_factory=time.monotonic)
    # Served where it stands (the event loop): whatever would wait raises WouldWait instead,
    # before it writes, and the transport serves the call again on a thread.
    no_wait: bool = False

    def cancel(self):
        """Mark it cancelled and stop its store call: a wait for a lock ends, nothing written."""
        self.cancelled.set()
        interrupt = self.interrupt
        if interrupt is not None:
            interrupt()


@dataclass
class Ask:
    """A question a handshake session put to the client, waiting for its answer."""

    call: Call
    answered: threading.Event = field(default_factory=threading.Event)
    reply: Optional[dict] = None


class Session:
    """A handshake (2025-11-25 and earlier) session: what initialize negotiated, per process
    (stdio) or per ``Mcp-Session-Id`` (HTTP), and the calls and questions in flight."""

    def __init__(self, principal, session_id=None, ask_prefix="approve-"):
        self.principal = principal
        self.id = session_id
        # Our questions' IDs: unique in the session, across every process serving it (HTTP
        # gives each process's copy of a session a prefix of its own).
        self.ask_prefix = ask_prefix
        self.protocol_version = None
        self.client_capabilities = {}
        self.initialized = False
        self.lock = threading.Lock()
        self.calls = {}  # request key -> Call
        self.asks = {}  # our elicitation request ID -> Ask
        self._asked = 0
        self.closed = False
        # logging/setLevel's level: no notifications/message until the client asks for some.
        self.log_level = None

    def begin(self, message):
        """The Call for a request now in flight; RpcError if its ID is already in flight."""
        key = id_key(message["id"])
        with self.lock:
            if key not in self.calls:
                call = self.calls[key] = Call(message["id"])
                return call
        # A stdio session is the whole process and has no ID; an HTTP session is named. Each
        # words the refusal as it always has.
        where = "by a request in flight" if self.id is None else "in this session"
        raise RpcError(INVALID_REQUEST, "Invalid Request: request id %s is already in use %s; "
                       "use a new id" % (to_json(message["id"]), where))

    def end(self, call):
        """The call is answered (or cancelled): its ID is free again."""
        with self.lock:
            self.calls.pop(id_key(call.request_id), None)

    def cancel(self, params):
        """Mark a request cancelled (notifications/cancelled); a question it waits on ends."""
        target = params.get("requestId")
        if not is_request_id(target):
            return
        with self.lock:
            call = self.calls.get(id_key(target))
            asks = [a for a in self.asks.values() if a.call is call]
        if call is None:
            # Everything else has finished: nothing left to stop.
            log.debug("ignored cancellation of %.80r: not in progress", target)
            return
        call.cancel()
        log.info("request %r cancelled by the client (%s); no response will be sent", target,
                 params.get("reason", "no reason given"))
        for ask in asks:
            ask.answered.set()

    def abandon(self, call):
        """The client went away from ``call`` (its stream closed): the questions it waits on
        end unanswered; the call itself goes on, since a disconnection is not a cancellation
        (2025-11-25 transports.mdx)."""
        with self.lock:
            asks = [a for a in self.asks.values() if a.call is call]
        for ask in asks:
            ask.answered.set()
        return len(asks)

    def close(self):
        """The session ends: its calls are cancelled, its questions end unanswered."""
        self.closed = True
        with self.lock:
            for call in self.calls.values():
                call.cancel()
            for ask in self.asks.values():
                ask.answered.set()

    def next_ask_id(self):
        """A fresh ID for a request of ours (never reused within the session)."""
        with self.lock:
            self._asked += 1
            return "%s%d" % (self.ask_prefix, self._asked)

    def ask(self, call, params, send):
        """Put elicitation/create to the client through ``send`` for ``call``, and wait for
        the answer; returns ``(our request ID, the reply or None on timeout)``."""
        ask_id = self.next_ask_id()
        ask = Ask(call)
        with self.lock:
            self.asks[ask_id] = ask
        try:
            send({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
                  "params": params})
            if not call.cancelled.is_set():  # a question that could not be sent has no answer
                ask.answered.wait(ASK_TIMEOUT_S)
        finally:
            with self.lock:
                self.asks.pop(ask_id, None)
        return ask_id, ask.reply

    def deliver(self, message):
        """The client's answer to one of our questions; False when it answers none."""
        with self.lock:
            ask = self.asks.get(message["id"]) if is_request_id(message["id"]) else None
        if ask is None:
            return False
        ask.reply = message
        ask.answered.set()
        return True
