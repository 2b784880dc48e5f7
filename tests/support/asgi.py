"""An HTTP client of kb-server's ASGI app spoken to in this process, as a browser would: its
cookies, its forms (URL-encoded, with the page's Origin) and the pages' hidden fields; no socket,
no server, each request one ``asyncio.run``."""

import asyncio
import re
from html import unescape
from urllib.parse import urlencode, urlsplit

_FIELD = re.compile(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">')

# Where the app believes it listens: a loopback address, so its Host and Origin checks apply.
HOST, PORT = "127.0.0.1", 8000


def hidden_fields(html):
    """The hidden fields of a page's forms, last value of each name."""
    return {name: unescape(value) for name, value in _FIELD.findall(html)}


class AsgiClient:
    """One browser's worth of cookies against an ASGI app in this process."""

    def __init__(self, app):
        self.app = app
        self.origin = "http://%s:%d" % (HOST, PORT)
        self.cookies = {}

    def request(self, method, target, form=None):
        """``(status, headers dict with lower-case names, body text)``; cookies set are kept."""
        return asyncio.run(self._request(method, target, form))

    async def _request(self, method, target, form):
        parts = urlsplit(target)
        headers = [(b"host", ("%s:%d" % (HOST, PORT)).encode())]
        if self.cookies:
            headers.append((b"cookie", "; ".join("%s=%s" % item for item in
                                                 self.cookies.items()).encode()))
        body = b""
        if form is not None:
            body = urlencode(form).encode("utf-8")
            headers += [(b"content-type", b"application/x-www-form-urlencoded"),
                        (b"origin", self.origin.encode()),
                        (b"content-length", b"%d" % len(body))]
        scope = {"type": "http", "http_version": "1.1", "method": method, "scheme": "http",
                 "path": parts.path, "raw_path": parts.path.encode(), "root_path": "",
                 "query_string": parts.query.encode(), "headers": headers,
                 "client": ("127.0.0.1", 50000), "server": (HOST, PORT)}
        inbox = [{"type": "http.request", "body": body, "more_body": False}]
        sent = []

        async def receive():
            if inbox:
                return inbox.pop()
            await asyncio.Event().wait()  # the browser stays connected

        async def send(message):
            sent.append(message)

        await self.app(scope, receive, send)
        start = next(m for m in sent if m["type"] == "http.response.start")
        found = {}
        for name, value in start["headers"]:
            name, value = name.decode("latin-1").lower(), value.decode("latin-1")
            if name == "set-cookie":
                key, _, rest = value.partition("=")
                if "Max-Age=0" in value:
                    self.cookies.pop(key, None)
                else:
                    self.cookies[key] = rest.split(";")[0]
            found[name] = value
        data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return start["status"], found, data.decode("utf-8")

    def get(self, target):
        """GET ``target``."""
        return self.request("GET", target)

    def post(self, target, form):
        """POST a form to ``target``."""
        return self.request("POST", target, form)

    def sign_in(self, token):
        """Sign in with ``token`` through the form; returns the POST's status."""
        self.cookies.clear()
        _, _, page = self.get("/login")
        status, _, _ = self.post("/login", {"csrf": hidden_fields(page)["csrf"], "next": "/",
                                            "token": token})
        return status
