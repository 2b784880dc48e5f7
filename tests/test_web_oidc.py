"""The web pages sign people in at the team's issuer with OpenID Connect, for real.

The npm oidc-provider package is the issuer; ``kb-server`` (two workers) is its client
``kb-web``. In headless Chromium a person clicks "Sign in with ...", signs in as alice at the
provider's own form, sees only the knowledge bases her scopes and the store's grants give,
edits (the history names her with her issuer) and signs out. Over plain HTTP: a forged state,
a replayed answer, a missing cookie and a code for another browser each sign nobody in; the
store's grants are read at every page; and the sign-in transcript of docs/server.md is what
the server says now.
"""

import os
import re
import sqlite3
import urllib.parse

import pytest

pytest.importorskip("joserfc")
pytest.importorskip("jinja2")
from kbcite.store import KBStore  # noqa: E402
from support.browser import all_css, by_css, chromium_paths, start_chromium, wait_for  # noqa: E402
from support.cli import run_kb  # noqa: E402
from support.commands import ROOT  # noqa: E402
from support.http_server import Server  # noqa: E402
from support.oidc_provider import Browser, OidcProvider, node_ready  # noqa: E402
from support.web import WebClient  # noqa: E402

pytestmark = pytest.mark.slow

# Any port of this machine: the provider takes the server's callback wherever it listens.
REDIRECT = "http://127.0.0.1/login/oidc/callback"
SERVER_OPTIONS = ("--oauth-client-id", "kb-web", "--oauth-subject-claim", "email",
                  "--oauth-writes", "allow", "--oauth-scope", "kb:support:read",
                  "--oauth-scope", "kb:support:write")
DOCS = ROOT / "docs" / "server.md"
BEGIN, END = "<!-- sign-in transcript: begin -->", "<!-- sign-in transcript: end -->"


def _need(what):
    if os.environ.get("CI"):
        pytest.fail("the sign-in tests need %s" % what)
    pytest.skip("the sign-in tests need %s" % what)


@pytest.fixture(scope="module")
def provider():
    why = node_ready()
    if why:
        _need(why)
    started = OidcProvider("loopback", REDIRECT)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def site(provider, tmp_path_factory):
    """A store with knowledge bases support (an article), docs and hr, served by two workers
    as the issuer's web client: ``(server, store path, article ID)``."""
    path = tmp_path_factory.mktemp("oidc-web") / "kb.sqlite3"
    with KBStore(str(path), create=True) as store:
        for kb in ("support", "docs", "hr"):
            store.create_knowledge_base(kb)
        article = store.create_article("support", "Refund policy", "Refunds take five days.",
                                       actor="setup")
        store.create_article("hr", "Salaries", "Confidential.", actor="setup")
    server = Server(path, "--workers", "2", "--oauth-issuer", provider.issuer, *SERVER_OPTIONS,
                    env={"KB_OAUTH_CLIENT_SECRET": "kb-web-secret"})
    yield server, path, article
    server.stop()


def callback(server):
    """The server's redirect URI, where the issuer sends the browser back."""
    return "http://127.0.0.1:%d/login/oidc/callback" % server.port


def person_sessions(path, name):
    """How many web sessions the store keeps for a person signed in at the issuer."""
    with sqlite3.connect(str(path)) as db:
        return db.execute("SELECT count(*) FROM sessions WHERE token_name = ? AND "
                          "protocol_version = 'web-oidc'", (name,)).fetchone()[0]


def listed(page):
    """The knowledge bases a home page links to."""
    return sorted(set(re.findall(r'href="/kb/([^"/?]+)"', page)))


def test_alice_signs_in_in_a_browser_sees_her_knowledge_bases_edits_and_signs_out(
        site, provider):
    if chromium_paths() is None:
        _need("chromium and chromedriver (apt-get install chromium chromium-driver)")
    pytest.importorskip("selenium")
    server, path, article = site
    base = "http://127.0.0.1:%d" % server.port
    chrome = start_chromium(path.parent / "profile")
    try:
        chrome.get(base + "/kb/support")
        wait_for(chrome, lambda c: "/login" in c.current_url, "the sign-in page")
        button = by_css(chrome, "section.issuer a.button")
        assert button.text == "Sign in with " + provider.issuer.split("://")[1]
        button.click()
        # The provider's own pages: its login form, then its consent.
        wait_for(chrome, lambda c: all_css(c, "input[name=login]"), "the issuer's login form")
        assert chrome.current_url.startswith(provider.issuer + "/")
        by_css(chrome, "input[name=login]").send_keys("alice")
        by_css(chrome, "input[name=password]").send_keys("any")
        by_css(chrome, "button[type=submit]").click()
        wait_for(chrome, lambda c: c.current_url.startswith(base) or "consent" in
                 c.page_source.lower() or "authorize" in c.page_source.lower(),
                 "the consent page")
        if not chrome.current_url.startswith(base):
            by_css(chrome, "button[type=submit]").click()
        wait_for(chrome, lambda c: c.current_url == base + "/kb/support",
                 "coming back signed in")
        assert by_css(chrome, ".who strong").text == "alice@example.com"
        chrome.get(base + "/")
        assert listed(chrome.page_source) == ["support"]
        chrome.get(base + "/kb/hr")  # not granted: the one not-found page
        assert "Salaries" not in chrome.page_source
        # Her write scope lets her edit: the history names her, with her issuer.
        chrome.get(base + "/kb/support/articles/%s/edit" % article)
        text = by_css(chrome, "#content")
        text.clear()
        text.send_keys("Refunds take five days, ten at most.")
        by_css(chrome, "form.edit button").click()
        wait_for(chrome, lambda c: c.current_url.endswith("/articles/%s" % article), "saving")
        assert "ten at most" in by_css(chrome, "article .body").text
        with KBStore(str(path)) as store:
            last = store.history("support", article)[-1]
        assert (last["action"], last["actor"], last["actor_issuer"]) == (
            "edit", "alice@example.com", provider.issuer)
        assert person_sessions(path, "alice@example.com") == 1
        # Sign out: the page's session ends, in the store too.
        by_css(chrome, "header form button.link").click()
        wait_for(chrome, lambda c: "/login" in c.current_url, "signing out")
        chrome.get(base + "/kb/support")
        assert "/login" in chrome.current_url
        assert person_sessions(path, "alice@example.com") == 0
    finally:
        chrome.quit()


def start(server):
    """A browser-less client that pressed "Sign in with ...": ``(client, the issuer's
    authorization URL)``."""
    web = WebClient("127.0.0.1", server.port)
    status, headers, _ = web.get("/login/oidc?next=/kb/support")
    assert status == 303 and "kb_oidc" in web.cookies
    return web, headers["location"]


def test_forged_replayed_and_foreign_answers_sign_nobody_in(site):
    server, path, _ = site
    web, url = start(server)
    answer = Browser("bob").authorize(url, callback(server))
    forged = dict(answer, state="forged")
    status, _, page = web.get("/login/oidc/callback?" + urllib.parse.urlencode(forged))
    assert status == 400 and "state does not match" in page
    assert signed_in_page(web)[0] is None
    # The pending sign-in was used up by that try: the real answer now finds none.
    status, _, page = web.get("/login/oidc/callback?" + urllib.parse.urlencode(answer))
    assert status == 400 and "did not start the sign-in here" in page
    # An answer meant for another browser (its cookie elsewhere) signs this one in nowhere.
    other, url2 = start(server)
    stolen = Browser("bob").authorize(url2, callback(server))
    thief, _ = start(server)
    status, _, page = thief.get("/login/oidc/callback?" + urllib.parse.urlencode(stolen))
    assert status == 400 and "state does not match" in page
    assert signed_in_page(thief)[0] is None
    # The issuer's own refusal (the person cancelled) is said, not a traceback.
    status, _, page = other.get("/login/oidc/callback?" + urllib.parse.urlencode(
        {"error": "access_denied", "error_description": "End-User aborted interaction",
         "state": stolen["state"]}))
    assert status == 400 and "access_denied" in page
    assert person_sessions(path, "bob@example.com") == 0


def test_the_stores_grants_are_read_at_every_page(site):
    server, path, _ = site
    web, url = start(server)
    answer = Browser("bob").authorize(url, callback(server))
    status, headers, _ = web.get("/login/oidc/callback?" + urllib.parse.urlencode(answer))
    assert status == 303 and headers["location"] == "/kb/support"
    assert signed_in_page(web) == ("bob@example.com", ["support"])
    with KBStore(str(path)) as store:
        store.grants.add("group", "readers", "docs", "deny")  # bob is in readers
    assert signed_in_page(web) == ("bob@example.com", ["docs", "support"])
    status, _, page = web.get("/kb/docs/articles/art-000001/edit")
    assert status in (403, 404)
    with KBStore(str(path)) as store:
        store.grants.remove("group", "readers", "docs")
    assert signed_in_page(web) == ("bob@example.com", ["support"])


def signed_in_page(web):
    """``(who the header names, the knowledge bases the home page lists)``; ``(None, where
    it redirects)`` when nobody is signed in."""
    status, headers, page = web.get("/")
    if status != 200:
        return None, headers.get("location")
    who = re.search(r"Signed in as <strong>([^<]*)</strong>", page)
    return who.group(1) if who else None, listed(page)


# -- the sign-in transcript of docs/server.md ---------------------------------------------------

# What differs from run to run: random values (shown as …), and the ports (as PORT).
_RANDOM = ("state", "nonce", "code_challenge", "code")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z")


def _shown_url(url, issuer, server):
    """A URL as the transcript shows it: decoded, its random values elided."""
    parts = urllib.parse.urlsplit(url)
    query = [(k, "…" if k in _RANDOM else v) for k, v in urllib.parse.parse_qsl(parts.query)]
    text = urllib.parse.urlunsplit(parts._replace(query="")).rstrip("?")
    if query:
        text += "?" + "&".join("%s=%s" % pair for pair in query)
    return text.replace(issuer, "ISSUER").replace("http://127.0.0.1:%d" % server.port,
                                                  "SERVER")


def _shown_cookies(headers_list):
    out = []
    for name, value in headers_list:
        if name.lower() == "set-cookie":
            key, _, rest = value.partition("=")
            secret, _, flags = rest.partition(";")
            out.append("Set-Cookie: %s=%s;%s" % (key, "…" if secret else "", flags))
    return out


def _exchange(web, method, path, form=None):
    """One request as a transcript shows it: the request line, then status, Location and
    cookies set (and its headers list, for the caller)."""
    import http.client
    conn = http.client.HTTPConnection(web.host, web.port, timeout=30)
    sent = {"Cookie": "; ".join("%s=%s" % item for item in web.cookies.items())} \
        if web.cookies else {}
    body = None
    if form is not None:
        body = urllib.parse.urlencode(form)
        sent.update({"Content-Type": "application/x-www-form-urlencoded",
                     "Origin": web.origin})
    conn.request(method, path, body=body, headers=sent)
    response = conn.getresponse()
    page = response.read().decode("utf-8")
    got = response.getheaders()
    conn.close()
    for name, value in got:
        if name.lower() == "set-cookie":
            key, _, rest = value.partition("=")
            if "Max-Age=0" in value:
                web.cookies.pop(key, None)
            else:
                web.cookies[key] = rest.split(";")[0]
    return response.status, dict((k.lower(), v) for k, v in got), got, page


def sign_in_transcript(provider, server, path, article):
    """The sign-in of docs/server.md, run now: its lines."""
    web = WebClient("127.0.0.1", server.port)
    lines = ["# The sign-in page offers the issuer beside the kb token form."]
    status, _, _, page = _exchange(web, "GET", "/login?next=/kb/support")
    button = re.search(r'<a class="button" href="([^"]*)">([^<]*)</a>', page)
    lines += ["GET /login?next=/kb/support", "%d: <a href=\"%s\">%s</a>" % (
        status, button.group(1).replace("&amp;", "&"),
        button.group(2).replace(provider.issuer.split("://")[1], "ISSUER-HOST"))]
    lines.append("# Off to the issuer: PKCE, state, nonce, and this server's /mcp as the "
                 "resource.")
    status, headers, got, _ = _exchange(web, "GET", "/login/oidc?next=/kb/support")
    lines += ["GET /login/oidc?next=/kb/support",
              "%d Location: %s" % (status, _shown_url(headers["location"], provider.issuer,
                                                      server))] + _shown_cookies(got)
    lines.append("# alice signs in at the issuer's own page, which sends the browser back.")
    answer = Browser("alice").authorize(headers["location"], callback(server))
    back = "/login/oidc/callback?" + urllib.parse.urlencode(answer)
    status, headers, got, _ = _exchange(web, "GET", back)
    lines += ["GET " + _shown_url(back, provider.issuer, server),
              "%d Location: %s" % (status, headers["location"])] + _shown_cookies(got)
    lines.append("# Her scopes give support (read, write); hr is not hers to see.")
    status, _, _, page = _exchange(web, "GET", "/")
    who = re.search(r"Signed in as <strong>([^<]*)</strong>", page).group(1)
    lines += ["GET /", "%d: Signed in as %s; knowledge bases: %s" % (
        status, who, ", ".join(listed(page)))]
    lines.append("# The same answer again (a replayed code) signs nobody in.")
    status, _, _, page = _exchange(web, "GET", back)
    problem = re.search(r'<p role="alert" class="problem">([^<]*)</p>', page).group(1)
    lines += ["GET " + _shown_url(back, provider.issuer, server), "%d: %s" % (
        status, problem.replace(provider.issuer.split("://")[1], "ISSUER-HOST"))]
    lines.append("# She edits the article; the history names her, at her issuer.")
    status, _, _, page = _exchange(web, "GET", "/kb/support/articles/%s/edit" % article)
    fields = dict(re.findall(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">', page))
    status, headers, _, _ = _exchange(web, "POST", "/kb/support/articles/%s/edit" % article, {
        "csrf": fields["csrf"], "expected_version": fields["expected_version"],
        "idempotency_key": fields["idempotency_key"], "title": "Refund policy",
        "content": "Refunds take five days.\n\nTen at most.", "summary": "a bound"})
    lines += ["POST /kb/support/articles/%s/edit" % article,
              "%d Location: %s" % (status, headers["location"])]
    _, out, _ = run_kb(["history", "support", article, "--db", str(path)])
    host = provider.issuer.split("://")[1]  # its port, in a table kept aligned
    lines += ["$ kb history support %s" % article] + out.replace(
        host + ")", "ISSUER-HOST)" + " " * max(0, len(host) - 11)).rstrip("\n").split("\n")
    lines.append("# Signing out ends the page's session (in the store: every worker "
                 "forgets it).")
    status, headers, got, _ = _exchange(web, "POST", "/logout", {"csrf": fields["csrf"]})
    lines += ["POST /logout", "%d Location: %s" % (status, headers["location"])] + \
        _shown_cookies(got)
    status, headers, _, _ = _exchange(web, "GET", "/kb/support")
    lines += ["GET /kb/support", "%d Location: %s" % (status, headers["location"])]
    return lines


def _comparable(lines):
    """Lines without what changes between runs: times, and table spacing around them."""
    return [re.sub(r"\s+", " ", _TIME.sub("TIME", line)).strip() for line in lines]


def docs_block(text):
    """The transcript's lines in docs/server.md (inside its text fence)."""
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip().split("\n")
    assert block[0] == "```text" and block[-1] == "```", "the transcript is not a text block"
    return block[1:-1]


def test_the_sign_in_transcript_in_the_docs_is_what_the_server_says(provider, tmp_path):
    path = tmp_path / "team.sqlite3"
    with KBStore(str(path), create=True) as store:
        store.create_knowledge_base("support")
        store.create_knowledge_base("hr")
        article = store.create_article("support", "Refund policy", "Refunds take five days.",
                                       actor="setup")
    server = Server(path, "--oauth-issuer", provider.issuer, *SERVER_OPTIONS,
                    env={"KB_OAUTH_CLIENT_SECRET": "kb-web-secret"})
    try:
        fresh = sign_in_transcript(provider, server, path, article)
    finally:
        server.stop()
    text = DOCS.read_text(encoding="utf-8")
    if os.environ.get("KB_WRITE_DOCS"):  # KB_WRITE_DOCS=1 pytest ... -k transcript
        head, rest = text.split(BEGIN, 1)
        DOCS.write_text(head + BEGIN + "\n```text\n" + "\n".join(fresh) + "\n```\n" + END +
                        rest.split(END, 1)[1], encoding="utf-8")
        text = DOCS.read_text(encoding="utf-8")
    assert _comparable(docs_block(text)) == _comparable(fresh), (
        "docs/server.md's sign-in transcript is not what the server says now; a fresh run:\n"
        + "\n".join(fresh))
