"""A browser-less client of kb-server's web pages (cookies, forms, CSRF tokens), and the store
the web tests and benchmark serve."""

import http.client
import re
from html import unescape
from urllib.parse import urlencode

import kbcite

from .http_server import TIMEOUT

# Markup that would run script if an article's text reached the page as HTML.
HOSTILE = ("# Hostile\n\n<script>alert('script')</script>\n\n"
           "<img src=x onerror=\"alert('img')\">\n\n"
           "[click me](javascript:alert('link')) and [again](JaVaScRiPt:alert('case'))\n\n"
           "<div onclick=\"alert('div')\">raw html</div>\n\n"
           "![pic](javascript:alert('image'))\n\n[fine](https://example.com/ok)")

_FIELD = re.compile(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">')


def make_store(path):
    """A store with knowledge bases ``support`` (a few articles, one edited twice, one
    hostile, a proposal by ``support-bot`` pending) and ``internal`` (one article), tokens
    ``alice`` (support, writes allow, may review),
    ``reader`` (support, writes ask) and ``root`` (both); returns ``(tokens, article IDs)``."""
    with kbcite.KBStore(str(path), create=True) as store:
        store.create_knowledge_base("support")
        store.create_knowledge_base("internal")
        first = store.create_article("support", "Reset a password",
                                     "To reset a password, open Settings.\n\nThen click Reset.")
        store.save_article("support", first, content="To reset a password, open Settings "
                           "then Security.\n\nThen click Reset.", actor="bob",
                           summary="name the tab")
        store.save_article("support", first, content="To reset a password, open Settings "
                           "then Security.\n\nThen click Reset, and confirm by mail.",
                           actor="carol")
        hostile = store.create_article("support", "Hostile", HOSTILE)
        other = store.create_article("support", "Billing", "Invoices are sent monthly.")
        secret = store.create_article("internal", "Salaries", "Confidential.")
        proposed = store.create_article("support", "Invoices", "Invoices are sent monthly.")
        current = store.get_article("support", proposed)["updated_at"]
        store.propose_edit({"knowledge_base_id": "support", "article_id": proposed,
                            "content": "Invoices are sent monthly, by mail and on the web.",
                            "expected_version": current, "idempotency_key": "proposal-1",
                            "summary": "say where invoices go"},
                           granted=["support"], actor="support-bot")
        tokens = {"alice": store.tokens.create("alice", ["support"], "allow", review=True),
                  "reader": store.tokens.create("reader", ["support"], "ask"),
                  "root": store.tokens.create("root", ["support", "internal"], "allow")}
    return tokens, {"first": first, "hostile": hostile, "other": other, "secret": secret,
                    "proposed": proposed}


def hidden_fields(html):
    """The hidden fields of a page's forms, last value of each name."""
    return {name: unescape(value) for name, value in _FIELD.findall(html)}


class WebClient:
    """One browser's worth of cookies against a server at ``host:port``."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.origin = "http://%s:%d" % (host, port)
        self.cookies = {}

    def request(self, method, path, form=None, headers=None, origin=True):
        """``(status, headers dict, body text)``; cookies set are kept."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=TIMEOUT)
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join("%s=%s" % item for item in self.cookies.items())
        body = None
        if form is not None:
            body = urlencode(form)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
            if origin is True:
                sent["Origin"] = self.origin
            elif origin:
                sent["Origin"] = origin
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        data = response.read().decode("utf-8")
        for name, value in response.getheaders():
            if name.lower() == "set-cookie":
                key, _, rest = value.partition("=")
                cookie_value = rest.split(";")[0]
                if "Max-Age=0" in value:
                    self.cookies.pop(key, None)
                else:
                    self.cookies[key] = cookie_value
        conn.close()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data

    def get(self, path):
        """GET ``path``."""
        return self.request("GET", path)

    def post(self, path, form, **kwargs):
        """POST a form to ``path``."""
        return self.request("POST", path, form=form, **kwargs)

    def sign_in(self, token):
        """Sign in with ``token`` through the form; returns the POST's status."""
        _, _, page = self.get("/login")
        status, _, _ = self.post("/login", {"csrf": hidden_fields(page)["csrf"], "next": "/",
                                            "token": token})
        return status
