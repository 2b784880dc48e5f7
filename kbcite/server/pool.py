"""Bounded pools of store connections: reads and edits on connections of their own, and the
edits of one knowledge base taking turns.

A call borrows a connection for its store work. Reads (searches, reads, polls, an edit's
preview) and edits come from separate pools, so edits waiting for a lock never hold the
connections reads need. Inside a process the edits of one knowledge base take turns before
borrowing (a locked knowledge base ties up one edit connection, not all of them), and at most
``queued_edits`` wait for their turn: one more is ``store_busy`` at once, retryable, rather
than a wait that ends the same way many seconds later.

A call served where it stands (``in_place``: on the HTTP server's event loop, which waits for
nothing) uses its thread's own connection instead, for its token check, its reads and its
edit alike: a connection's page cache starts over once another connection commits, so reads
on one connection and edits on another read their pages again after every edit.
"""

import contextlib
import queue
import threading
import time
from typing import Any

from ..errors import StoreBusy, WouldWait
from ..limits import BUSY_TIMEOUT_S
from ..search.semantic import Semantic
from .calls import Cancelled

# Connections per process (--threads): reads at once, and edits at once (an edit holds its
# connection while it waits for a lock; reads never wait for one).
READERS = 8
WRITERS = 4

# Edits of one knowledge base waiting for their turn in one process. Enough for a team's
# agents editing at once (16 clients measured in bench/http_load.py never reached it); a
# knowledge base whose lock is held elsewhere fills it, and the next edit hears store_busy.
QUEUED_EDITS = 16

# A wait for a turn or a connection looks at its call's cancellation this often.
WAIT_SLICE_S = 0.05

# The turn of edits naming a knowledge base the caller was not granted: the store answers
# them not_found, and they share one turn so that none of them waits in a real knowledge
# base's queue (whose fullness would tell that it exists).
UNGRANTED = ""


class Connections:
    """Up to ``size`` store connections, made on first need and kept; the most recent is lent
    first."""

    def __init__(self, address, size, timeout=BUSY_TIMEOUT_S):
        self.address = address
        self.timeout = timeout
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)

    @contextlib.contextmanager
    def borrow(self, cancelled=None, wait=True):
        """A store for the caller alone until the block ends; with ``wait`` False,
        WouldWait at once where every connection is lent."""
        if not wait:
            if not self._slots.acquire(blocking=False):
                raise WouldWait("every connection is lent")
        else:
            _wait(self._slots, cancelled)
        try:
            try:
                store = self._idle.get_nowait()
            except queue.Empty:
                store = _store(self.address, self.timeout)
            store.clear_interrupt()  # an earlier call's cancellation is not this one's
            try:
                yield store
            finally:
                self._idle.put(store)
        finally:
            self._slots.release()

    def close(self):
        """Close every idle connection."""
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


class _Turn:
    """One knowledge base's edits in this process: who holds the turn, how many wait."""

    def __init__(self):
        self.lock = threading.Lock()
        self.count = 0


def _store(address, timeout):
    """A new store connection. (The store's module is imported here, at the first, not with
    this one: ``kb --help`` and ``kb-server --help`` read this module's defaults only.)"""
    from ..store import KBStore
    return KBStore(address, timeout=timeout)


def _wait(lock, cancelled):
    """Acquire ``lock`` (a Lock or a semaphore), giving up if ``cancelled`` is set."""
    if cancelled is None:
        lock.acquire()
        return
    while not lock.acquire(timeout=WAIT_SLICE_S):
        if cancelled.is_set():
            raise Cancelled()


class StorePool:
    """Store connections for reads and for edits, and the per-knowledge-base turns of edits."""

    def __init__(self, address, readers=READERS, writers=WRITERS, queued_edits=QUEUED_EDITS,
                 timeout=BUSY_TIMEOUT_S):
        self.address = address
        self.timeout = timeout
        # Whether this process's stores search hybrid (the [semantic] extra's model files are
        # there, and KBCITE_SEMANTIC is not off): decided, and said in the log, once at start;
        # the model itself loads at the first search or write that needs it.
        self.hybrid = Semantic.opened(None, address).expected
        self.queued_edits = queued_edits
        # Edits one knowledge base can have in flight in a process before store_busy.
        self.edit_slots = writers + queued_edits
        self._reads = Connections(address, readers, timeout)
        self._writes = Connections(address, writers, timeout)
        self._turns = {}
        self._turns_lock = threading.Lock()
        # Per thread: whether its calls are served in place, its own connection for them and
        # whether that is lent; and every such connection, to close.
        self._local = threading.local()
        self._own = []
        self._own_lock = threading.Lock()

    @contextlib.contextmanager
    def in_place(self):
        """Within it, this thread's calls borrow its own connection (where it is not lent
        already), not the pools': a call served where it stands, on a thread that waits for
        nothing else."""
        local = self._local
        local.in_place = True
        try:
            yield
        finally:
            local.in_place = False

    @contextlib.contextmanager
    def borrow(self, connections, cancelled=None, wait=True):
        """A store from ``connections`` (a Connections), or within ``in_place`` this thread's
        own."""
        local = self._local
        if not getattr(local, "in_place", False) or getattr(local, "lent", False):
            with connections.borrow(cancelled, wait) as store:
                yield store
            return
        store = getattr(local, "store", None)
        if store is None:
            store = local.store = _store(self.address, self.timeout)
            with self._own_lock:
                self._own.append(store)
        local.lent = True
        store.clear_interrupt()
        try:
            yield store
        finally:
            local.lent = False

    def reading(self, cancelled=None):
        """A store for reads: a search, a read, a poll, an edit's preview."""
        return self.borrow(self._reads, cancelled)

    @contextlib.contextmanager
    def writing(self, kb_id, granted, cancelled=None, wait=True):
        """A store for one edit of ``kb_id``, once its knowledge base's turn has come;
        StoreBusy at once when too many of its edits already wait. With ``wait`` False
        (an edit tried on the event loop), WouldWait at once where the turn, a connection or
        the store's write lock is not free, before anything is written."""
        key = kb_id if isinstance(kb_id, str) and kb_id in granted else UNGRANTED
        with self._turns_lock:
            turn = self._turns.get(key)
            if turn is None:
                turn = self._turns[key] = _Turn()
            if not wait and turn.count:
                raise WouldWait("another edit of the knowledge base has its turn")
            if turn.count > self.queued_edits:  # one has the turn, queued_edits wait
                raise self._busy(kb_id, turn.count - 1)
            turn.count += 1
        try:
            started = time.monotonic()
            while not turn.lock.acquire(timeout=WAIT_SLICE_S):
                if cancelled is not None and cancelled.is_set():
                    raise Cancelled()
                if time.monotonic() - started > self.timeout:
                    raise self._busy(kb_id, None)
            try:
                with self.borrow(self._writes, cancelled, wait) as store:
                    if wait:
                        yield store
                    else:
                        with store.without_waiting():
                            yield store
            finally:
                turn.lock.release()
        finally:
            with self._turns_lock:
                turn.count -= 1
                if turn.count == 0:
                    del self._turns[key]

    def _busy(self, kb_id, waiting):
        """store_busy for an edit that found its knowledge base's queue full (or waited past
        the store's timeout for its turn); the same words for a granted knowledge base and
        for one that is not, so the refusal tells nothing of which it is."""
        why = ("%d edits of it are already waiting on this server" % waiting
               if waiting is not None else "its earlier edits held it past the wait")
        return StoreBusy(
            "knowledge base %s is busy: %s. Nothing was written; retry the same call shortly "
            "(an edit resent with the same idempotency_key is applied at most once)."
            % (_shown(kb_id), why), retryable=True)

    def close(self):
        """Close every idle connection, and the threads' own."""
        self._reads.close()
        self._writes.close()
        with self._own_lock:
            own, self._own = self._own, []
        for store in own:
            store.close()


def _shown(kb_id):
    return repr(kb_id) if isinstance(kb_id, str) else "(no valid ID)"
