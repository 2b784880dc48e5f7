"""The pages rendered in a process of their own, so that they never hold the ``/mcp``
process's interpreter lock.

A page's work is Python from end to end (the session's lookup, the store's rows, the search,
the Markdown, the template), and while a page thread runs it the agents' calls in the same
process wait for the lock at every step: sixteen browsers a second raised ``/mcp``'s p99 by
half with the pages on threads of their own (performance.md section 10). With
``Settings.web_process`` (``kb-server --http`` sets it) the server's process keeps what is
cheap and what holds a connection (routing, the form, ``Origin`` and ``Host``, static files,
the live log's stream) and hands each page's view to one page process it starts itself: the
request's scope, route and form go down a pipe, the response and the view's log records come
back. The page process opens the store as another server worker does (``--workers``), so
sessions, grants, CSRF tokens, idempotency keys and the turn of writes are the store's, the
same in either process.

One pipe a page thread (``PAGE_THREADS`` on each side): a page waits only for its own answer,
and at most that many render at once, as in the server's process. A page process that dies
is started again at the next page; a form that was under way then answers 503 (it may have
written), a GET is asked again.
"""

import logging
import multiprocessing
import queue
import signal
import threading

from ..http.auth import Auth
from ..http.request import Request
from ..pool import StorePool
from ..calls import CALLER
from . import routes
from .responses import Response

# What of a request's ASGI scope a view reads (the rest holds the server's own objects).
SCOPE_KEYS = ("type", "http_version", "scheme", "method", "root_path", "path", "raw_path",
              "query_string", "headers", "client", "server")

# At shutdown, how long the page process has to end by itself (its pipes closed), and then
# after SIGTERM (the server's own graceful wait for pages under way has passed already).
CLOSE_S = 2.0

log = logging.getLogger(__name__)


class PageProcessLost(Exception):
    """The page process ended while a page was under way."""


class Backing:
    """What the views need of the MCP app, in the page process: store connections for pages
    and for sessions, and the settings."""

    def __init__(self, settings):
        self.settings = settings
        self.pool = StorePool(settings.db, readers=settings.threads,
                              writers=max(1, settings.threads // 2),
                              queued_edits=settings.queued_edits)
        self.auth = Auth(settings)

    def close(self):
        """Close the store connections."""
        self.pool.close()
        self.auth.close()


class _Forward(logging.Handler):
    """In the page process: every record, kept for the next answer (the server's process
    logs it with its own handlers, in its own format): a page's own records with its answer,
    the others (the store's at startup, say) with whichever answer comes next."""

    def __init__(self):
        super().__init__()
        self.local = threading.local()
        self.pending_lock = threading.Lock()  # not self.lock: that is Handler's own
        self.pending = []

    def emit(self, record):
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.msg, record.args, record.exc_info = record.getMessage(), None, None
        kept = getattr(self.local, "records", None)
        if kept is not None:
            kept.append(record)
            return
        with self.pending_lock:
            self.pending.append(record)

    def taken(self):
        """This thread's records, and the others logged since the last answer."""
        with self.pending_lock:
            others, self.pending = self.pending, []
        mine, self.local.records = self.local.records, None
        return others + mine


def request_of(req):
    """What the page process needs of ``req``: the picklable part of its scope."""
    return {key: req.scope[key] for key in SCOPE_KEYS if key in req.scope}


def _answer(web, conn, forward):
    """One pipe's pages, in turn, until the server's process closes it."""
    while True:
        try:
            scope, index, params, query, form = conn.recv()
        except (EOFError, OSError):
            return
        forward.local.records = []
        req = Request(scope)
        try:
            response = web._view(req, routes.ROUTES[index], params, query, form)
        except Exception:  # a view's own failure: logged, and the page says so
            log.exception("a page failed")
            response = web.error(500, "The page failed; nothing was written.")
        try:
            conn.send((response.status, response.body, response.headers,
                       req.scope.get(CALLER), forward.taken()))
        except (EOFError, OSError):
            return


def serve(settings, conns, pages):
    """The page process: the pages (``pages(backing, in_process=True)``, the ``WebPages``
    class) answering each pipe on a thread of its own until the server's process closes
    them."""
    # Ctrl-C reaches the whole process group: the server's process decides when this ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    forward = _Forward()
    root = logging.getLogger()
    root.handlers[:] = [forward]
    root.setLevel(logging.INFO)
    backing = Backing(settings)
    try:
        web = pages(backing, in_process=True)
        web.renderer.compile_all()
        threads = [threading.Thread(target=_answer, args=(web, conn, forward), daemon=True)
                   for conn in conns]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        backing.close()


class PageProcess:
    """The server's side: the page process serving ``pages`` (the ``WebPages`` class),
    started when first needed (again if it died), and one pipe to it a page thread."""

    def __init__(self, settings, size, pages):
        self.settings = settings
        self.size = size
        self.pages = pages
        self._lock = threading.Lock()
        self._proc = None
        self._generation = 0
        self._free = queue.SimpleQueue()  # (pipe, generation) not in use
        self._closed = False

    def start(self):
        """Start the page process unless it is running."""
        with self._lock:
            if self._proc is None and not self._closed:
                self._spawn()

    def _spawn(self):
        context = multiprocessing.get_context("spawn")
        pairs = [context.Pipe() for _ in range(self.size)]
        proc = context.Process(target=serve, name="kb-web-pages", daemon=True,
                               args=(self.settings, [c for _, c in pairs], self.pages))
        proc.start()
        for _, child in pairs:
            child.close()
        self._proc = proc
        self._generation += 1
        for mine, _ in pairs:
            self._free.put((mine, self._generation))

    def _pipe(self):
        while True:
            self.start()
            if self._closed:
                raise PageProcessLost()
            conn, generation = self._free.get()
            if generation != self._generation:
                conn.close()  # of a page process that has ended
            elif not self._proc.is_alive():  # ended since: this page waits for the next
                conn.close()
                self._lost(generation)
            else:
                return conn, generation

    def _lost(self, generation):
        """The page process of ``generation`` ended: start another, whose pipes take the
        lost ones' places."""
        with self._lock:
            if generation != self._generation or self._closed:
                return
            self._proc.join(0)
            log.error("the page process ended (exit code %s); starting another",
                      self._proc.exitcode)
            self._proc.kill()
            self._proc.join(CLOSE_S)
            self._spawn()

    def view(self, req, route, params, query, form):
        """On a page thread: the page process's ``Response`` to the view of ``route``, the
        view's log records logged here, the request's caller set for the access log. A GET
        the page process ended under is asked once more of the next one (a GET writes
        nothing); a POST is not, since it may have written."""
        request = (request_of(req), routes.ROUTES.index(route), params, query, form)
        for attempt in (1, 2):
            conn, generation = self._pipe()
            try:
                conn.send(request)
                status, body, headers, caller, records = conn.recv()
                break
            except (EOFError, OSError):
                conn.close()
                self._lost(generation)
                if req.method != "GET" or attempt == 2:
                    raise PageProcessLost() from None
        self._free.put((conn, generation))
        if caller is not None:
            req.scope[CALLER] = caller
        for record in records:
            logger = logging.getLogger(record.name)
            if logger.isEnabledFor(record.levelno):
                logger.handle(record)
        return Response(status, body, headers, content_type=None)

    def close(self):
        """End the page process (closing its pipes ends its threads)."""
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
        while True:
            try:
                conn, _ = self._free.get_nowait()
            except queue.Empty:
                break
            conn.close()
        if proc is not None:  # its threads end with their pipes; one under way is cut short
            proc.join(CLOSE_S)
            if proc.is_alive():
                proc.terminate()
                proc.join(CLOSE_S)
