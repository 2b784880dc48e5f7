"""A bounded pool of store connections: each request borrows one for its store calls.

One slow request (a lock wait, say) holds only its own connection; the bound is how many
store calls run at once.
"""

import contextlib
import queue
import threading

from ..store import KBStore


class StorePool:
    """A bounded set of store connections; each request borrows one for its store calls."""

    def __init__(self, address, size):
        self.address = address
        # Connections are made on first need and kept; the most recently used is lent first.
        self._idle = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)

    @contextlib.contextmanager
    def borrow(self):
        """A store for the caller alone until the block ends."""
        self._slots.acquire()
        try:
            try:
                store = self._idle.get_nowait()
            except queue.Empty:
                store = KBStore(self.address)
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
