"""The web pages as an ASGI handler the MCP app hands its non-``/mcp`` paths to.

It owns the pages' HTTP: the route, the form body (URL-encoded, bounded), the session cookie,
the CSRF token of every POST, ``Origin`` and ``Host`` as on ``/mcp``, the security headers
(a Content-Security-Policy with no inline script), the one 404 page, and the live event
stream. The views themselves (``views/*``) run on the MCP app's worker threads with a store
connection from its pools, so a page never blocks the event loop.
"""

import asyncio
import logging
import mimetypes
import os
from urllib.parse import parse_qs, quote

from ...errors import ToolError
from ..http.threads import Threads
from . import auth, routes
from .process import PageProcess, PageProcessLost
from .render import Renderer
from .responses import Refused, Response, redirect
from .views import live

STATIC = os.path.join(os.path.dirname(__file__), "static")

# Pages rendered at once per process, on threads of their own: more wait their turn, so that
# however many browsers load pages, an agent's /mcp call is never queued behind them and
# shares the interpreter with at most this many (bench/web_mcp_load.py, performance.md 10).
PAGE_THREADS = 2

# A form carries at most a 1 MiB article with its title: URL-encoding triples a byte at worst.
MAX_FORM = 4 * 1024 * 1024

# Every page: scripts and styles from this server only (no inline script), no framing, forms
# posting back here only; images of articles may come from https sites.
SECURITY_HEADERS = [
    (b"Content-Security-Policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' https: data:; "
     b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"X-Content-Type-Options", b"nosniff"),
    (b"Referrer-Policy", b"same-origin"),
    (b"X-Frame-Options", b"DENY"),
]

# The store failures that mean "nothing here for you": one page for all of them, so that an
# ungranted knowledge base, article or version reads exactly as a missing one.
NOT_FOUND_CODES = ("not_found", "version_not_found", "version_pruned", "invalid_argument")

log = logging.getLogger(__name__)


class Page:
    """One request as a view sees it: the path's parameters, query and form, the person
    signed in, a store to read from, and the renderer."""

    def __init__(self, web, req, params, query, form, person):
        self.web = web
        self.req = req
        self.params = params
        self.query = query
        self.form = form
        self.person = person

    def arg(self, name, default=None):
        """A query parameter's first value."""
        values = self.query.get(name)
        return values[0] if values else default

    def field(self, name, default=None):
        """A form field's first value."""
        values = self.form.get(name)
        return values[0] if values else default

    def reading(self):
        """A store connection for reads."""
        return self.web.mcp.pool.reading()

    def writing(self, kb_id):
        """A store connection for one edit of ``kb_id``, in its turn."""
        return self.web.mcp.pool.writing(kb_id, self.person.grants)

    def render(self, template, status=200, headers=(), **values):
        """The page ``template`` rendered with ``values`` and the person's CSRF token."""
        return Response(status, self.web.renderer.page(template, person=self.person,
                                                       csrf=self.person.csrf if self.person
                                                       else None, **values), headers)

    def not_found(self):
        """The one 404 page."""
        return self.web.not_found()


class WebPages:
    """The pages, on the MCP app ``mcp``: its pools, threads, settings and address checks.
    With ``settings.web_process`` the views run in a page process (``process``) unless
    ``in_process`` (the page process's own)."""

    def __init__(self, mcp, in_process=False):
        self.mcp = mcp
        self.settings = mcp.settings
        self.renderer = Renderer()
        self.sessions = auth.WebSessions(mcp.auth, mcp.settings)
        # "Sign in with ISSUER" beside the token form, when the server is the issuer's client.
        self.issuer_sign_in = None
        if mcp.auth.tokens is not None and self.settings.oauth_client_id \
                and self.settings.oauth_client_secret:
            from .oidc import IssuerSignIn  # the [oauth] extra's, needed only so
            self.issuer_sign_in = IssuerSignIn(self.settings, mcp.auth.tokens)
        self._not_found = self.renderer.page("not_found.html", person=None, csrf=None)
        self._files = {}  # static/'s files, read once
        self.threads = Threads(PAGE_THREADS, "kb-web")
        self.process = None
        if self.settings.web_process and not in_process:
            self.process = PageProcess(self.settings, PAGE_THREADS, WebPages)
            self.process.start()

    def close(self):
        """End the page process, if there is one."""
        if self.process is not None:
            self.process.close()

    def not_found(self):
        """The 404 page, the same bytes for whatever is missing or not granted."""
        return Response(404, self._not_found)

    def error(self, status, message):
        """A small error page (403, 400, 503) saying what to do."""
        return Response(status, self.renderer.page("error.html", person=None, csrf=None,
                                                   status=status, message=message))

    async def __call__(self, req, receive, send):
        try:
            response = await self._serve(req, receive, send)
        except Refused as refused:
            response = refused.response
        if response is not None:
            await self.send(send, response, secure=req.scope.get("scheme") == "https")

    async def send(self, send, response, secure=False):
        """Send a whole response with the security headers."""
        headers = SECURITY_HEADERS + response.headers + [
            (b"Content-Length", b"%d" % len(response.body))]
        if not any(name == b"Cache-Control" for name, _ in response.headers):
            headers.append((b"Cache-Control", b"no-store"))
        if secure:  # served over TLS: browsers keep to https for this site from now on
            headers.append((b"Strict-Transport-Security", b"max-age=31536000"))
        await send({"type": "http.response.start", "status": response.status,
                    "headers": headers})
        await send({"type": "http.response.body", "body": response.body})

    async def _serve(self, req, receive, send):
        self._check_origin_and_host(req)
        if req.path.startswith("/static/"):
            return self._static(req)
        route, params = routes.match(req.path)
        if route is None:
            return self.not_found()
        if req.method not in route.methods:
            return Response(405, b"Method Not Allowed\n", [(b"Allow", ", ".join(
                route.methods).encode("ascii"))], content_type=b"text/plain; charset=utf-8")
        query = parse_qs(req.scope.get("query_string", b"").decode("latin-1"),
                         keep_blank_values=True)
        form = {}
        if req.method == "POST":
            form = await self._form(req, receive)
            if form is None:
                return None  # the client went away
        loop = asyncio.get_running_loop()
        if route.stream:
            person = await self.mcp.threads.run(loop, self._person, req, route, form,
                                                params.get("kb"))
            if isinstance(person, Response):
                return person
            page = Page(self, req, params, query, form, person)
            await live.stream(self, page, receive, send)
            return None
        # At most the app's max_requests at once, pages and /mcp together (503 past it), and
        # the pages on threads of their own (each waiting for the page process, if any).
        view = self._view if self.process is None else self._view_elsewhere
        return await self.mcp.on_thread(req, view, req, route, params, query, form,
                                        threads=self.threads)

    def _view_elsewhere(self, req, route, params, query, form):
        """On a worker thread: ``_view``, run by the page process."""
        try:
            return self.process.view(req, route, params, query, form)
        except PageProcessLost:
            return self.error(503, "The page could not be made (the server is restarting its "
                                   "pages); try again in a moment.")

    def _person(self, req, route, form, kb=None):
        """On a worker thread: who is signed in (at the page's knowledge base ``kb``), and
        whether this request may go on."""
        person = self.sessions.person(req)
        if person is not None:
            person.kb = kb
        if route.signed_in and person is None:
            if req.method == "GET":
                return redirect("/login?next=" + quote(req.path, safe="/@"))
            return self.error(403, "You are not signed in (or your session ended): sign in "
                                   "again, then repeat what you did. Nothing was written.")
        if req.method == "POST" and not self.sessions.csrf_ok(req, person, form):
            return self.error(403, "This form is out of date or did not come from this site "
                                   "(its CSRF token does not match): reload the page and try "
                                   "again. Nothing was written.")
        return person

    def _view(self, req, route, params, query, form):
        """On a worker thread: the person, then the view; store errors become pages."""
        try:
            person = self._person(req, route, form, params.get("kb"))
            if isinstance(person, Response):
                return person
            page = Page(self, req, params, query, form, person)
            if person is not None and "kb" in params and params["kb"] not in person.grants:
                return self.not_found()
            return route.view(page)
        except Refused as refused:
            return refused.response
        except ToolError as exc:
            if exc.code in NOT_FOUND_CODES:
                return self.not_found()
            if exc.code in ("store_busy", "store_failed"):
                return self.error(503, "The store is busy or could not be reached; try again "
                                       "in a moment. Nothing was written.")
            log.exception("a page failed")
            return self.error(500, "The page failed inside the store; nothing was written.")

    async def _form(self, req, receive):
        """The URL-encoded form of a POST, bounded; None when the client went away."""
        kind = (req.header(b"content-type") or "").split(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            raise Refused(self.error(415, "Forms are sent URL-encoded; this one was not."))
        length = req.headers.get(b"content-length", b"")
        if not length.isdigit() or int(length) > MAX_FORM:
            raise Refused(self.error(413, "The form is larger than %d bytes, the limit."
                                     % MAX_FORM))
        chunks, got = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            got += len(chunk)
            if got > MAX_FORM:
                raise Refused(self.error(413, "The form is larger than its Content-Length."))
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        try:
            text = b"".join(chunks).decode("utf-8")
        except UnicodeDecodeError:
            raise Refused(self.error(400, "The form is not UTF-8.")) from None
        return parse_qs(text, keep_blank_values=True, max_num_fields=100)

    def _check_origin_and_host(self, req):
        """DNS rebinding and cross-site forms: the same Host and Origin checks as ``/mcp``.
        A POST must name its Origin (every browser does for a form)."""
        hosts, origins = self.mcp.guards.own(req)
        origin = req.header(b"origin")
        if origin is not None and origin not in origins:
            raise Refused(self.error(403, "This request came from another site (Origin %s); "
                                          "nothing was done." % origin[:100]))
        if req.method == "POST" and origin is None:
            raise Refused(self.error(403, "A form must be sent by a browser naming its Origin; "
                                          "nothing was done."))
        if hosts is not None and req.header(b"host") not in hosts:
            raise Refused(Response(421, b"Misdirected Request: Host is not this server's "
                                        b"address\n", content_type=b"text/plain; charset=utf-8"))

    def _static(self, req):
        """A file of ``static/`` (the stylesheet, the live log's script)."""
        name = req.path[len("/static/"):]
        if req.method != "GET" or not name or "/" in name or name.startswith("."):
            return self.not_found()
        body = self._files.get(name)
        if body is None:
            path = os.path.join(STATIC, name)
            if not os.path.isfile(path):
                return self.not_found()
            with open(path, "rb") as handle:
                body = self._files[name] = handle.read()
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind.endswith("javascript"):
            kind += "; charset=utf-8"
        return Response(200, body, [(b"Cache-Control", b"max-age=3600")],
                        content_type=kind.encode("ascii"))
