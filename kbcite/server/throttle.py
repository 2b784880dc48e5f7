"""Log lines a flood can cause, kept to a few a kind every few seconds."""

import threading
import time


class Throttle:
    """At most ``burst`` log lines of one kind every ``window`` seconds; the rest are counted
    and said in one line, so a flood of refusals cannot fill the log."""

    def __init__(self, logger, burst=10, window=10.0):
        self.logger = logger
        self.burst = burst
        self.window = window
        self._kinds = {}
        self._lock = threading.Lock()

    def info(self, kind, message, *args):
        """Log ``message % args`` at INFO, unless ``kind`` has had its burst this window."""
        now = time.monotonic()
        with self._lock:
            start, shown, dropped = self._kinds.get(kind, (now, 0, 0))
            if now - start >= self.window:
                if dropped:
                    self.logger.info("... and %d more like it in %g s", dropped, now - start)
                start, shown, dropped = now, 0, 0
            emit = shown < self.burst
            self._kinds[kind] = (start, shown + emit, dropped + (not emit))
        if emit:
            self.logger.info(message, *args)
