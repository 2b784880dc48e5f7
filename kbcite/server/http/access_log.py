"""The access log: one record a request (``--log-format json``): when it came, its method and
path, the status answered, how long it took, the bytes of body sent, the client's address and
the name of the token (or signed-in person) it came with.

Never the token, a cookie, a header or the query string (a one-time sign-in link carries its
code there): only the name ``auth`` and the web pages' sessions put in the scope. A stream
(an event stream held open) is logged when it ends, its duration the stream's.
"""

import logging
import time
from typing import Any

from ..calls import CALLER
from ..logs import ACCESS, ACCESS_LOGGER, utc_time

# A path is logged up to this many characters (the guarded protocol bounds the head anyway).
PATH_MAX = 2048

log = logging.getLogger(ACCESS_LOGGER)


class AccessLog:
    """An ASGI application that logs each HTTP request ``app`` answers; any other scope (the
    lifespan) passes through untouched."""

    def __init__(self, app, clock=time.time, timer=time.perf_counter):
        self.app = app
        self.clock = clock
        self.timer = timer

    def __getattr__(self, name):
        # The wrapped app's own attributes (close, stop_streams, settings) stay reachable.
        return getattr(self.app, name)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        when, started = self.clock(), self.timer()
        answered: dict[str, Any] = {"status": None, "bytes": 0}

        async def sending(message):
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
            elif message["type"] == "http.response.body":
                answered["bytes"] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except BaseException:
            if answered["status"] is None:  # the server answers 500 for an app that raised
                answered["status"] = 500
            raise
        finally:
            self.record(scope, when, self.timer() - started, answered)

    def record(self, scope, when, seconds, answered):
        """Log the request's line."""
        client = scope.get("client")
        fields = {"event": "access", "time": utc_time(when), "method": scope.get("method"),
                  "path": scope.get("path", "")[:PATH_MAX], "status": answered["status"],
                  "duration_ms": round(seconds * 1000, 3), "bytes": answered["bytes"],
                  "client": client[0] if client else None, "token": scope.get(CALLER)}
        log.info("%s %s %s %.1f ms", fields["method"], fields["path"], fields["status"],
                 fields["duration_ms"], extra={ACCESS: fields})
