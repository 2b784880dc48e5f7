"""Subscriptions fed by the event log: who is listening for which articles, and one watcher a
process that reads the log and tells them.

The event log is the truth and a notification only a hint to read it: the watcher keeps each
knowledge base's head, and when one moves it reads the events after the head it saw, so a
change made by any process on the store (another server worker, the ``kb`` command line, an
import) reaches every listener here, and a wake-up that comes late loses nothing. The watcher
looks at the heads every ``WATCH_INTERVAL_S`` (one read of one small table), or on PostgreSQL
when a commit's NOTIFY wakes it (LISTEN, and the heads every ``LISTEN_POLL_S`` besides); it never
writes to a client itself, it hands each subscriber its messages through the subscriber's own
``deliver``, which must not block (HTTP queues them for the stream's task; stdio writes a line).

A subscriber is a stdio client, a 2025-11-25 session's GET stream (whose subscriptions the
store keeps, so that any server worker may take ``resources/subscribe``), or a 2026-07-28
listen stream. It hears only of articles in knowledge bases its caller is granted, so a
subscription to an ungranted article is taken like any other and never fires. A token's
revocation, and a session's end, end its subscribers.
"""

import logging
import threading
import time
from typing import Optional

from ..errors import ToolError
from ..store import KBStore
from . import resources

# Subscribed URIs one client holds at once (a stdio client, a handshake session, a listen
# stream): a client cannot make the watcher's work grow without bound.
SUBSCRIPTIONS_MAX = 1000

# How often the watcher looks at the log's heads: the "within a second" with room.
WATCH_INTERVAL_S = 0.2

# On PostgreSQL a commit's NOTIFY wakes the watcher; it still reads the heads this often, for
# a notification lost with its connection or a writer that went round the store.
LISTEN_POLL_S = 1.0

# A watcher that could not LISTEN (a hot standby, a lost connection) polls, and tries again
# after this long.
LISTEN_RETRY_S = 30.0

# How often it looks for ended sessions among its subscribers.
LIVENESS_S = 5.0

# How often, at most, it looks for revoked tokens (one read of the tokens): before every look
# at the log, so a revoked token's streams hear nothing more and end within this and a look.
REVOCATION_S = 0.2

# Events read from one knowledge base's log at a time while catching up.
EVENTS_PAGE = 100

# Subscribers (streams) one token holds in one process at once: each holds a connection open.
STREAMS_PER_TOKEN = 16

# What the subscribers of one token, and all of a process's, may hold in subscribed URIs: a
# URI counts twice its UTF-8 length (the URI and its decoded parts) plus URI_OVERHEAD (its
# entry, its tuple). 16 streams of 1,000 real URIs (about 40 characters) hold under 6 MiB;
# URIs built long (up to resources.URI_MAX) reach the token's budget first, so one token
# makes a process hold at most 8 MiB of them, and all tokens together 64 MiB.
URI_OVERHEAD = 256
SUBSCRIPTION_BYTES_PER_TOKEN = 8 * 1024 * 1024
SUBSCRIPTION_BYTES_PER_PROCESS = 64 * 1024 * 1024

# The events that change what a list shows: an article appears, goes, or is gone for good.
LIST_EVENTS = ("article.published", "article.unpublished", "article.deleted")

log = logging.getLogger(__name__)


def _weight(uri):
    """What one subscribed URI counts against the budgets."""
    return 2 * len(uri.encode("utf-8", "surrogatepass")) + URI_OVERHEAD


class TooMany(Exception):
    """A subscriber over its token's bound: the client hears why, and nothing opens."""


class Subscriber:
    """One client's notifications: the URIs it subscribed to (or where to find them), whether
    it wants the list's changes, and how to hand it a message."""

    def __init__(self, principal, deliver, *, list_changed=False, tag=None, token=False,
                 source=None, limit=SUBSCRIPTIONS_MAX):
        self.principal = principal
        # deliver(message) -> False once the client cannot be reached (the watcher drops it).
        self.deliver = deliver
        self.list_changed = list_changed
        # 2026-07-28: the listen request's ID, which every notification carries in _meta.
        self.tag = tag
        # Whether the principal is a token's (its revocation ends this subscriber).
        self.token = token
        # source(store) -> the URIs subscribed to now, or None once the session ended: a
        # 2025-11-25 HTTP session's subscriptions live in the store, any worker adds to them.
        self.source = source
        self.limit = limit
        self.closed = threading.Event()
        # Called once when the subscriber is closed (a stream's task wakes up to end).
        self.on_close = None
        # The handshake session whose GET stream it is, where it is one (HTTP).
        self.session_id = None
        self._uris = {}  # URI as the client spelled it -> (kb, article, version) or None
        self.bytes = 0  # what its URIs count against the budgets (URI_OVERHEAD)
        self._lock = threading.Lock()

    def add(self, uri):
        """Subscribe to a URI; TooMany beyond the limit."""
        with self._lock:
            if uri not in self._uris and len(self._uris) >= self.limit:
                raise TooMany("at most %d subscribed URIs a client; unsubscribe some first"
                              % self.limit)
            if uri not in self._uris:
                self.bytes += _weight(uri)
            self._uris[uri] = resources.parse_uri(uri)

    def remove(self, uri):
        """Forget a URI (one never subscribed to is fine)."""
        with self._lock:
            if self._uris.pop(uri, False) is not False:
                self.bytes -= _weight(uri)

    def uris(self, store):
        """``{URI: parsed}`` subscribed to now; None when the subscriber's session is gone."""
        if self.source is None:
            with self._lock:
                return dict(self._uris)
        found = self.source(store)
        return None if found is None else {uri: resources.parse_uri(uri) for uri in found}

    def message(self, method, params=None):
        """A notification for this subscriber, tagged with its listen stream where it has one."""
        params = dict(params or {})
        if self.tag is not None:
            params["_meta"] = {"io.modelcontextprotocol/subscriptionId": self.tag}
        message = {"jsonrpc": "2.0", "method": method}
        if params:
            message["params"] = params
        return message

    def close(self):
        """Nothing more is delivered, its URIs are let go; ``on_close`` is told, once."""
        if self.closed.is_set():
            return
        self.closed.set()
        with self._lock:
            self._uris, self.bytes = {}, 0
        if self.on_close is not None:
            try:
                self.on_close()
            except RuntimeError:  # the stream's event loop has closed
                pass


def changes(events, uris, list_changed):
    """``(URIs updated, whether the list changed)`` by a knowledge base's new events, for a
    subscriber's ``{URI: (kb, article, version)}`` of that knowledge base.

    A current-version URI changes with every change of its article; a version's text never
    changes, only whether it can be read (its publish, unpublish, delete) and what became of
    the proposals made from it: a proposal's events notify the version-pinned URIs of its
    article, whose subscriber (the agent that proposed) learns the outcome, and never the
    current one (a proposal changes nothing until approved, whose ``article.updated`` says so)."""
    by_article: dict[str, list[tuple[str, Optional[str]]]] = {}
    for uri, parsed in uris.items():
        by_article.setdefault(parsed[1], []).append((uri, parsed[2]))
    updated = []
    listed = False
    for event in events:
        listed = listed or (list_changed and event["type"] in LIST_EVENTS)
        proposal = event["type"].startswith("proposal.")
        for uri, version in by_article.get(event["article_id"], ()):
            if proposal and version is None:
                continue
            if (version is None or event["type"] != "article.updated") and uri not in updated:
                updated.append(uri)
    return updated, listed


class Hub:
    """This process's subscribers and the one watcher thread that reads the log for them."""

    def __init__(self, address, interval=WATCH_INTERVAL_S, streams_per_token=STREAMS_PER_TOKEN,
                 bytes_per_token=SUBSCRIPTION_BYTES_PER_TOKEN,
                 bytes_per_process=SUBSCRIPTION_BYTES_PER_PROCESS):
        self.address = address
        self.interval = interval
        self.streams_per_token = streams_per_token
        self.bytes_per_token = bytes_per_token
        self.bytes_per_process = bytes_per_process
        self._subscribers = []
        self._lock = threading.Lock()
        self._thread = None
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._heads = {}

    # -- subscribers -----------------------------------------------------------------------

    def add(self, subscriber):
        """Start notifying ``subscriber``; TooMany when its token holds its bound of streams.
        Returns once the watcher knows the heads, so no change after this is missed."""
        with self._lock:
            if subscriber.token:
                mine = [s for s in self._subscribers
                        if s.token and s.principal.name == subscriber.principal.name]
                if len(mine) >= self.streams_per_token:
                    raise TooMany("token %s holds %d notification streams in this server "
                                  "process, its bound; close one first"
                                  % (subscriber.principal.name, len(mine)))
                held = sum(s.bytes for s in mine)
                if held + subscriber.bytes > self.bytes_per_token:
                    raise TooMany("the streams of token %s would hold %d bytes of subscribed "
                                  "URIs in this server process, over its %d; subscribe to "
                                  "fewer (or shorter) URIs" % (
                                      subscriber.principal.name, held + subscriber.bytes,
                                      self.bytes_per_token))
            held = sum(s.bytes for s in self._subscribers)
            if held + subscriber.bytes > self.bytes_per_process:
                raise TooMany("this server process holds %d bytes of subscribed URIs, near its "
                              "%d; retry later" % (held, self.bytes_per_process))
            self._subscribers.append(subscriber)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._watch, daemon=True,
                                                name="kb-watcher")
                self._thread.start()
        self._ready.wait(10)

    def remove(self, subscriber):
        """Stop notifying ``subscriber``."""
        subscriber.close()
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    def subscribers(self):
        """The subscribers now (a copy)."""
        with self._lock:
            return list(self._subscribers)

    def close(self):
        """Stop the watcher; every subscriber is closed."""
        self._stop.set()
        for subscriber in self.subscribers():
            self.remove(subscriber)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    # -- the watcher -----------------------------------------------------------------------

    def _watch(self):
        store = waiter = None
        since_liveness = 0.0
        listen_after = 0.0
        try:
            while not self._stop.is_set():
                try:
                    if store is None:
                        store = KBStore(self.address)
                    heads = {kb["knowledge_base_id"]: kb["head_sequence"]
                             for kb in store.list_knowledge_bases()}
                    if not self._ready.is_set():
                        self._heads = heads
                        self._ready.set()
                    else:
                        # Revocations first: no event reaches a token revoked before it.
                        self._end_revoked(store)
                        self._catch_up(store, heads)
                    if since_liveness >= LIVENESS_S:
                        since_liveness = 0.0
                        self._check_liveness(store)
                    if waiter is None and store is not None and time.monotonic() >= listen_after:
                        listen_after = time.monotonic() + LISTEN_RETRY_S
                        waiter = self._listen(store)
                except ToolError as exc:
                    # The log stays where it was: the next look reads what this one missed.
                    log.info("the watcher could not read the event log (%s); trying again",
                             exc.message)
                    if store is not None:
                        store.close()
                        store = None
                waited = self.interval
                if waiter is not None:
                    started = time.monotonic()
                    try:
                        # A revocation sends no NOTIFY: with token streams open, look often.
                        waiter.wait(REVOCATION_S if self._token_streams() else LISTEN_POLL_S)
                    except ToolError as exc:
                        log.info("%s; polling every %g s", exc.message, self.interval)
                        waiter.close()
                        waiter = None
                    waited = time.monotonic() - started
                else:
                    self._stop.wait(self.interval)
                since_liveness += waited
        except Exception:  # a bug: subscribers stop hearing, the log says why
            log.exception("the event-log watcher failed; notifications stop")
        finally:
            self._ready.set()
            if waiter is not None:
                waiter.close()
            if store is not None:
                store.close()

    @staticmethod
    def _listen(store):
        """The store's change waiter, or None: SQLite has none, a standby cannot LISTEN."""
        try:
            return store.change_waiter()
        except ToolError as exc:
            log.info("%s", exc.message)
            return None

    def _catch_up(self, store, heads):
        for kb_id, head in sorted(heads.items()):
            seen = self._heads.get(kb_id, 0)
            if head <= seen:
                continue
            events = []
            while seen < head:
                page = store.events(kb_id, seen, EVENTS_PAGE)
                if not page["events"]:
                    break
                events.extend(page["events"])
                seen = page["events"][-1]["sequence"]
            self._heads[kb_id] = max(seen, head)
            if events:
                self._dispatch(store, kb_id, events)

    def _dispatch(self, store, kb_id, events):
        for subscriber in self.subscribers():
            if kb_id not in subscriber.principal.grants:
                continue
            uris = subscriber.uris(store)
            if uris is None:
                log.info("a subscriber's session ended; its notifications stop")
                self.remove(subscriber)
                continue
            mine = {u: p for u, p in uris.items() if p is not None and p[0] == kb_id}
            updated, listed = changes(events, mine, subscriber.list_changed)
            messages = [subscriber.message("notifications/resources/updated", {"uri": uri})
                        for uri in updated]
            if listed:
                messages.append(subscriber.message("notifications/resources/list_changed"))
            for message in messages:
                if not subscriber.deliver(message):
                    self.remove(subscriber)
                    break

    def _token_streams(self):
        """Whether a token's subscriber is open here."""
        return any(s.token for s in self.subscribers())

    def _end_revoked(self, store):
        """End the subscribers of revoked tokens."""
        if not self._token_streams():
            return
        revoked = {t["name"] for t in store.tokens.list() if t.get("revoked_at")}
        for subscriber in self.subscribers():
            if subscriber.token and subscriber.principal.name in revoked:
                log.info("token %s was revoked; its notification stream ends",
                         subscriber.principal.name)
                self.remove(subscriber)

    def _check_liveness(self, store):
        """End the subscribers of sessions that ended (and of revoked tokens)."""
        self._end_revoked(store)
        for subscriber in self.subscribers():
            if subscriber.source is not None and subscriber.uris(store) is None:
                self.remove(subscriber)

