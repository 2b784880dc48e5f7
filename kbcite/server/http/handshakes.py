"""Handshake sessions over HTTP (2025-11-25 and earlier), served by any of the processes that
share a store.

What ``initialize`` negotiated lives in the store (``kbcite.sessions``): every process finds a
session there, whichever one the client's request reaches, and its idle time, its token's
cap and the token's revocation end it everywhere. What is in flight lives in the process that
holds it: the ``Session`` of ``session.py`` with its calls and questions, kept here only while
a request of the session is under way. A client's answer to a question, or a cancellation,
that reaches another process is left in the store; this process's poller collects what is
left for the requests it holds, and notices sessions that ended elsewhere.
"""

import json
import logging
import secrets
import threading
import time

from ...errors import ToolError
from ...store import KBStore
from ..calls import Session
from ..jsonrpc import id_key, is_request_id
from ..pool import Connections
from ..subscriptions import TooMany
from ..throttle import Throttle
from .request import Refusal, Reply, refusal, unavailable

# A session ends after this long without a request (2025-11-25 transports.mdx, "Session
# Management" 3: the server may end one at any time; the client's next request hears 404 and
# it initializes anew). Long enough for a person to leave an agent for an afternoon.
SESSION_TIMEOUT_S = 3600.0

# Sessions one token holds at once; a new one ends its least recently used. Clients that never
# DELETE theirs (most do not) cannot fill the store.
SESSIONS_PER_TOKEN = 32

# A session's last use is written at most this often (and at least ten times per timeout), in
# the background: a request never waits for that write behind the store's writers.
TOUCH_EVERY_S = 60.0

# While this process holds a question or a long call of a session, it looks in the store for
# what the client sent to another process this often.
POLL_S = 0.2

# A call in flight this long may be cancelled through another process: the poller looks.
LONG_CALL_S = 1.0

# Connections this module keeps of its own: writes (a new session, initialized, a message, an
# end) and the poller's reads, apart from the tools' and the token checks'.
WRITE_CONNECTIONS = 2

log = logging.getLogger(__name__)
quiet = Throttle(log)


class HttpSessions:
    """The store's sessions as this process serves them: find, open, end, and route what a
    client sends to the process that holds its request."""

    def __init__(self, address, timeout_s=SESSION_TIMEOUT_S, per_token=SESSIONS_PER_TOKEN):
        self.address = address
        self.timeout_s = timeout_s
        self.per_token = per_token
        self.touch_us = int(min(TOUCH_EVERY_S, timeout_s / 10) * 1000000)
        self._writes = Connections(address, WRITE_CONNECTIONS)
        self._local = {}  # session ID -> [Session, requests of it in progress here]
        self._lock = threading.Lock()
        self._touching = set()
        self._poller = None
        self._closed = threading.Event()

    def store(self):
        """A store connection of this module's own, for a session's writes (``with``)."""
        return self._writes.borrow()

    # -- a request's session -----------------------------------------------------------------

    def new(self, principal):
        """A session for an initialize, not yet in the store (``open`` puts it there once the
        handshake succeeds)."""
        return Session(principal, secrets.token_urlsafe(24), self._ask_prefix())

    def open(self, session):
        """Record a session whose initialize succeeded; raises ToolError if the store fails."""
        with self._writes.borrow() as store:
            evicted, expired = store.sessions.open(
                session.id, session.principal.name, session.protocol_version,
                session.client_capabilities, idle_s=self.timeout_s, per_token=self.per_token)
        for old in evicted:
            quiet.info("evicted %s" % session.principal.name,
                       "session %s ended: token %s opened more than %d sessions", old,
                       session.principal.name, self.per_token)
            self._end_here(old)
        if expired:
            log.info("%d session(s) ended after %g s without a request", expired, self.timeout_s)

    def find(self, store, session_id, principal):
        """This process's copy of the caller's live session ``session_id``, refreshed from the
        store (on ``store``, the caller's connection), or None; ``release`` it when done."""
        row = store.sessions.find(session_id, principal.name, idle_s=self.timeout_s)
        if row is None:
            return None
        with self._lock:
            entry = self._local.get(session_id)
            if entry is None:
                entry = self._local[session_id] = [
                    Session(principal, session_id, self._ask_prefix()), 0]
            entry[1] += 1
            session = entry[0]
        session.principal = principal
        session.protocol_version = row["protocol_version"]
        session.client_capabilities = row["capabilities"]
        session.initialized = session.initialized or row["initialized"]
        if row["seen_us"] < time.time() * 1000000 - self.touch_us:
            self._touch_later(session_id)
        if self._poller is None:
            self._start_poller()
        return session

    def release(self, session):
        """A request of the session is done here; its copy goes when the last one is."""
        with self._lock:
            entry = self._local.get(session.id)
            if entry is not None and entry[0] is session:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._local[session.id]

    def answer(self, req, serve, *args):
        """On a worker thread: ``serve(hold, *args)``'s reply, where ``hold(session)`` (which
        returns the session) marks what ``find`` gave the request, released here however the
        request ends; a Refusal raised is the reply, a store that fails a 503."""
        held = []

        def hold(session):
            if session is not None:
                held.append(session)
            return session
        try:
            return serve(hold, *args)
        except Refusal as refused:
            return refused.reply
        except ToolError as exc:
            return unavailable(req, exc).reply
        finally:
            for session in held:
                self.release(session)

    # -- what the client sends to a session ------------------------------------------------------

    def initialized(self, session):
        """notifications/initialized: every process may now ask the client questions."""
        session.initialized = True
        with self._writes.borrow() as store:
            store.sessions.initialized(session.id)

    def deliver(self, session, message):
        """A client's answer to one of our questions: to the question here, or left for the
        process that asked it."""
        if session.deliver(message):
            return
        if isinstance(message.get("id"), str):  # our questions' IDs are strings
            with self._writes.borrow() as store:
                store.sessions.leave(session.id, "response", message["id"], message)

    def cancel(self, session, params):
        """notifications/cancelled: the call here stops, or the process holding it is told."""
        target = params.get("requestId")
        if not is_request_id(target):
            return
        with session.lock:
            here = id_key(target) in session.calls
        if here:
            session.cancel(params)
            return
        with self._writes.borrow() as store:
            store.sessions.leave(session.id, "cancelled", json.dumps(target), params)

    def end(self, session):
        """DELETE: the session ends in the store, and its calls here; other processes' pollers
        end theirs."""
        with self._writes.borrow() as store:
            store.sessions.end(session.id, session.principal.name)
        session.close()

    def close(self):
        """The process stops: every question here ends unanswered, the poller stops."""
        self._closed.set()
        with self._lock:
            sessions = [entry[0] for entry in self._local.values()]
        for session in sessions:
            session.close()
        self._writes.close()

    # -- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _ask_prefix():
        """A prefix for the IDs of this process's questions in a session: each copy of a
        session numbers its own, and two processes must never hand out the same ID."""
        return "approve-%s-" % secrets.token_hex(4)

    def _end_here(self, session_id):
        with self._lock:
            entry = self._local.get(session_id)
        if entry is not None:
            entry[0].close()

    def _touch_later(self, session_id):
        """Note the session's use in the background (at most one write under way each)."""
        with self._lock:
            if session_id in self._touching:
                return
            self._touching.add(session_id)
        threading.Thread(target=self._touch, args=(session_id,), daemon=True,
                         name="kb-session-touch").start()

    def _touch(self, session_id):
        try:
            with self._writes.borrow() as store:
                store.sessions.touch(session_id)
        except ToolError as exc:
            log.info("session %s: its last use was not noted (%s); it may end early",
                     session_id, exc.message)
        finally:
            with self._lock:
                self._touching.discard(session_id)

    # -- the poller ------------------------------------------------------------------------------

    def _start_poller(self):
        with self._lock:
            if self._poller is not None or self._closed.is_set():
                return
            self._poller = threading.Thread(target=self._poll, daemon=True,
                                            name="kb-session-poller")
        self._poller.start()

    def _waiting(self):
        """The sessions here with a question open or a long call in flight."""
        now = time.monotonic()
        with self._lock:
            sessions = [entry[0] for entry in self._local.values()]
        waiting = {}
        for session in sessions:
            with session.lock:
                if session.asks or any(now - c.started > LONG_CALL_S
                                       for c in session.calls.values()):
                    waiting[session.id] = session
        return waiting

    def _poll(self):
        """Bring this process what clients left for its requests in other processes, and end
        here the sessions that ended elsewhere (revoked, expired, deleted)."""
        store = None
        try:
            while not self._closed.wait(POLL_S):
                waiting = self._waiting()
                if not waiting:
                    continue
                try:
                    if store is None:
                        store = KBStore(self.address)
                    messages, live = store.sessions.collect(list(waiting))
                    taken = [m["id"] for m in messages if self._take(waiting[m["session_id"]], m)]
                    store.sessions.forget(taken)
                except ToolError as exc:
                    log.info("could not collect messages for sessions from the store (%s); "
                             "trying again", exc.message)
                    continue
                for session_id, session in waiting.items():
                    if session_id not in live:
                        log.info("session %s ended elsewhere (revoked, expired or deleted); "
                                 "its calls here end", session_id)
                        session.close()
        finally:
            if store is not None:
                store.close()

    @staticmethod
    def _take(session, message):
        """Hand a collected message to its request here; whether it was ours to take."""
        if message["kind"] == "response":
            return session.deliver(message["body"])
        target = json.loads(message["target"])
        with session.lock:
            here = id_key(target) in session.calls
        if here:
            session.cancel(message["body"])
        return here


class SessionSubscriptions:
    """A handshake session's resources/subscribe URIs, kept in the store with the session, so
    that whichever process holds its GET stream notifies them."""

    def __init__(self, sessions, session, per_token):
        self.sessions = sessions
        self.session = session
        self.per_token = per_token

    def add(self, uri):
        """Subscribe the session to ``uri``; TooMany past its token's bound."""
        with self.sessions.store() as store:
            done = store.sessions.subscribe(self.session.id, self.session.principal.name, uri,
                                            per_token=self.per_token)
        if done is False:
            raise TooMany("the sessions of token %s subscribe to %d URIs, the bound; "
                          "unsubscribe some first" % (self.session.principal.name,
                                                      self.per_token))

    def remove(self, uri):
        """Forget the session's subscription to ``uri``."""
        with self.sessions.store() as store:
            store.sessions.unsubscribe(self.session.id, uri)


def delete(app, req):
    """On a worker thread: DELETE ends the caller's session named by Mcp-Session-Id; 204."""
    return app.sessions.answer(req, _delete, app, req)


def _delete(hold, app, req):
    session_id = req.header(b"mcp-session-id")
    with app.auth.borrow() as store:
        principal = app.auth.authenticate(req, store)
        if session_id is None:
            raise Refusal(405, refusal("Method not allowed: DELETE ends a session; this "
                                       "request names none"),
                          [(b"Allow", b"POST, DELETE, OPTIONS")])
        session = hold(app.sessions.find(store, session_id, principal))
    if session is None:
        raise Refusal(404, refusal("Session not found: it ended, or never was"))
    app.sessions.end(session)
    log.info("session %s ended by its client", session_id)
    return Reply(204)
