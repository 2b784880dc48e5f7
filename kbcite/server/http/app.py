"""kb-server's Streamable HTTP endpoint as an ASGI application (``settings.create_app`` makes
one to mount in a team's own Starlette or FastAPI application): the ASGI entry, the lifespan,
and each request's path and method to the room that serves it.

It owns HTTP's concerns and none of the protocol's: framing the server in front let through,
``Origin`` and ``Host``, CORS (``guards``), the bearer token (``auth``), bodies and the
2026-07-28 routing headers (``exchange``), ``Mcp-Session-Id`` (``sessions``), event streams
(``streams``). Everything that touches the store runs on a worker thread (``threads``), one
hop a request, so the event loop never waits for the database. The app needs no particular
server: ``serve`` runs it on uvicorn with the guarded h11 protocol, which closes what the app
cannot see (slow heads, huge heads). One exception: a quick read (``serves_in_place``) while
nothing else is in progress, on a store whose reads wait for nothing, is served where it
stands.
"""

import asyncio
import contextlib
import logging

from ...store import KBStore
from .. import web
from ..dispatch import Dispatch
from ..jsonrpc import encode
from ..pool import StorePool
from ..subscriptions import Hub
from ..throttle import Throttle
from .auth import Auth
from .exchange import Exchange
from .handshakes import HttpSessions, delete
from .request import MCP_PATH, METADATA_PATH, RETRY_AFTER_S, Refusal, Reply, Request, refusal
from .request_checks import Guards, check_framing
from .streams import NotificationStreams, event
from .threads import Threads

# Where the lifespan state holds ``McpApp.stop_streams`` for the server's shutdown to call.
STOP_STREAMS = "kbcite.stop_streams"

log = logging.getLogger(__name__)

quiet = Throttle(log)


class McpApp:
    """The MCP endpoint (``/mcp``) as an ASGI 3 application: both eras, tokens, the HTTP
    safeguards. Mount it anywhere; ``lifespan`` closes it with the host application."""

    def __init__(self, settings):
        self.settings = settings
        # Fail at startup, not at the first request, when the store is not there.
        with KBStore(settings.db) as store:
            local_reads = "local_reads" in store.capabilities
        self.pool = StorePool(settings.db, readers=settings.threads,
                              writers=max(1, settings.threads // 2),
                              queued_edits=settings.queued_edits)
        # Whether a quick request (``MessageRoute.quick``) is served on the event loop: its store's
        # reads wait for no lock and no network, and no model runs for a search (the semantic
        # half's query embedding stays on a thread).
        self.local_reads = local_reads and not self.pool.hybrid
        self.auth = Auth(settings)
        self.guards = Guards(settings)
        self.dispatch = Dispatch(self.pool, settings.signing_secret, settings.approval_ttl,
                                 settings.public_url)
        self.sessions = HttpSessions(settings.db, settings.session_timeout,
                                     settings.sessions_per_token)
        self.threads = Threads(settings.max_requests, "kb-http")
        self.hub = Hub(settings.db)
        self.streams = NotificationStreams(self)
        self._in_progress = 0
        # POSTs begun and not yet answered (a stream held open is answered): 1 is one alone.
        self.begun = 0
        self._closed = False
        self._web = None  # the people's pages, made on the first asked for

    # -- ASGI --------------------------------------------------------------------------------

    async def __call__(self, scope, receive, send):
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(scope, receive, send)
        else:  # a websocket: this endpoint speaks none
            await send({"type": "websocket.close", "code": 1008})

    async def _lifespan(self, scope, receive, send):
        state = scope.get("state")
        if isinstance(state, dict):
            # The server's graceful shutdown comes before the lifespan's, and waits for
            # responses under way: a notification stream never ends by itself, so the guarded
            # protocol calls this first (h11_guard), and each stream ends with its result.
            state[STOP_STREAMS] = self.stop_streams
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    @contextlib.asynccontextmanager
    async def lifespan(self, app=None):
        """For a host application's ``lifespan=``: the endpoint closes when it stops (mounted
        apps are not told of the host's lifespan)."""
        try:
            yield
        finally:
            self.close()

    def stop_streams(self):
        """End every notification stream gracefully (a listen's with its result): the
        server is stopping."""
        for subscriber in self.hub.subscribers():
            self.hub.remove(subscriber)

    def close(self):
        """End every open question unanswered, stop the threads, close the connections."""
        if self._closed:
            return
        self._closed = True
        self.hub.close()
        if self._web is not None and hasattr(self._web, "close"):
            self._web.close()
        self.sessions.close()
        self.threads.close()
        self.pool.close()
        self.auth.close()

    # -- one request -------------------------------------------------------------------------

    async def _http(self, scope, receive, send):
        req = Request(scope)
        try:
            reply = await self._route(req, receive, send)
        except Refusal as refused:
            reply = refused.reply
        if reply is not None:
            await self.send(send, req, reply)

    async def _route(self, req, receive, send):
        """The request's checks in order (framing, endpoint, Origin and Host), then its
        method's own."""
        if req.framing is not None:
            check_framing(req)
        method = req.method
        if method == "GET" and req.path == METADATA_PATH and (
                self.settings.authorization_server or self.settings.oauth_issuer):
            self.guards.check_origin_and_host(req)
            return Reply(200, self.auth.metadata(req))
        if req.path != MCP_PATH and web.serves(req.path):
            if self._web is None:
                self._web = web.pages_for(self)
            await self._web(req, receive, send)
            return None
        if req.path != MCP_PATH:
            raise Refusal(404, refusal("Not found: the MCP endpoint is %s" % MCP_PATH))
        self.guards.check_origin_and_host(req)
        if method == "POST":
            return await Exchange(self, req, receive, send).run()
        if method == "OPTIONS":
            return self.guards.preflight(req)
        if method == "DELETE":
            return await self.on_thread(req, delete, self, req)
        if method == "GET":
            reply = await self.on_thread(req, self.streams.open_get, req)
            if reply.stream is not None:
                await self.streams.hold(req, receive, send, reply)
                return None
            return reply
        raise Refusal(405, refusal("Method not allowed"), [(b"Allow", b"POST, DELETE, OPTIONS")],
                      close=True)

    async def send(self, send, req, reply):
        """Send a whole reply (or a stream's last event), with CORS headers where an allowed
        Origin asked."""
        if reply.streamed:  # the stream's last event: the answer (none if it was cancelled)
            await send({"type": "http.response.body", "more_body": False,
                        "body": event(reply.body) if reply.body is not None else b""})
            return
        data = encode(reply.body) if reply.body is not None else b""
        headers = reply.headers + (self.guards.cors(req) if reply.cors else [])
        if reply.body is not None:
            headers.append((b"Content-Type", b"application/json"))
        if reply.status != 204:
            headers.append((b"Content-Length", b"%d" % len(data)))
        if reply.close:
            headers.append((b"Connection", b"close"))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    def serves_in_place(self, routed):
        """Whether a request routed ``routed`` is served on the event loop, not a thread: a
        quick one (it writes nothing, waits for nothing, opens nothing; its work is bounded by
        the tool's limits) on a store whose reads wait for no lock and no network.

        Under load too: a thread's result comes back across processors, and the threads
        contend with the loop for the interpreter lock at every statement, which cost more
        than the reads themselves (at 16 clients of bench/http_load.py, 249 calls/s on
        threads, 458 in place, each call's CPU 4.45 against 2.22 ms). The loop holds a read
        while it runs, as the interpreter lock held it on a thread; edits and streams still
        go to the threads, so a wait for a lock never holds the loop."""
        return routed.quick and self.local_reads

    def tries_in_place(self, routed):
        """Whether a request routed ``routed`` is tried on the event loop first, without
        waiting: a 2026-07-28 edit on such a store while no other request is in progress.
        Whatever would wait (another writer's lock or turn, a person's approval) raises
        WouldWait before it writes, and the edit goes to a thread as before. At one client
        that spares an edit the thread's wake-ups across processors: 0.7 ms of CPU an edit
        (bench/http_load.py's edits and the reads before them, in a scratch run). While other
        requests are in progress it goes to a thread, so that its commit (a checkpoint's, now
        and then) holds none of them."""
        return (routed.may_wait and routed.modern and routed.kind == "request"
                and self.local_reads and self.begun == 1 and not self._in_progress)

    async def on_thread(self, req, fn, *args, threads=None):
        """What ``fn(*args)`` returns, run on a worker thread (of ``threads``, or the app's),
        at most ``max_requests`` at once (503 when full); a Refusal it raises is raised
        here."""
        if self._in_progress >= self.settings.max_requests:
            quiet.info("full", "refused a request from %s: %d requests are in progress",
                       req.client, self._in_progress)
            raise Refusal(503, refusal("Service Unavailable: the server is busy; retry "
                                       "shortly"), [(b"Retry-After", b"%d" % RETRY_AFTER_S)])
        self._in_progress += 1
        try:
            return await (threads or self.threads).run(asyncio.get_running_loop(), fn, *args)
        finally:
            self._in_progress -= 1
