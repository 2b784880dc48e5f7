"""The people's web pages over HTTP, without a browser: sign-in, the pages, and their safety
(CSRF, Origin, the one 404, escaped articles, compare-and-swap writes)."""

import http.client
import json
import re
import subprocess
import sys
from html import unescape

import pytest

import kbcite
from support.commands import ROOT, child_env
from support.http_server import TIMEOUT, Server
from support.web import WebClient, hidden_fields, make_store

pytest.importorskip("jinja2")
pytest.importorskip("markdown_it")

KB = "pages"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """One server on one store for the module: ``(server, tokens, article IDs, path)``."""
    path = tmp_path_factory.mktemp("web") / "web.sqlite3"
    tokens, ids = make_store(path)
    server = Server(path)
    yield server, tokens, ids, path
    server.stop()


def client(site, name="alice"):
    server, tokens, _, _ = site
    web = WebClient(server.host, server.port)
    assert web.sign_in(tokens[name]) == 303
    return web


def versions(path, kb, article_id):
    with kbcite.KBStore(str(path)) as store:
        return [row["updated_at"] for row in store.history(kb, article_id)]


def test_pages_ask_for_sign_in_and_a_wrong_token_is_refused(site):
    server, tokens, ids, _ = site
    web = WebClient(server.host, server.port)
    status, headers, _ = web.get("/kb/support")
    assert status == 303 and headers["location"].startswith("/login?next=/kb/support")
    assert web.sign_in("kbt_" + "x" * 43) == 401
    assert "kb_session" not in web.cookies
    assert web.sign_in(tokens["alice"]) == 303
    cookie = [v for k, v in web.cookies.items() if k == "kb_session"]
    assert cookie and tokens["alice"] not in cookie[0]
    status, _, page = web.get("/")
    assert status == 200 and "/kb/support" in page and "/kb/internal" not in page


def test_the_session_cookie_is_http_only_and_same_site_lax(site):
    server, tokens, _, _ = site
    web = WebClient(server.host, server.port)
    _, _, page = web.get("/login")
    _, headers, _ = web.post("/login", {"csrf": hidden_fields(page)["csrf"], "next": "/",
                                        "token": tokens["alice"]})
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie


def test_ungranted_and_missing_pages_are_the_same_404_byte_for_byte(site):
    _, _, ids, _ = site
    web = client(site)
    bodies = set()
    for path in ("/kb/internal", "/kb/nope", "/kb/internal/search?q=salaries",
                 "/kb/internal/articles/%s" % ids["secret"], "/kb/support/articles/art-999999",
                 "/kb/internal/articles/%s/history" % ids["secret"],
                 "/kb/support/articles/art-999999/history",
                 "/kb/support/articles/%s@2001-01-01T00:00:00Z" % ids["first"],
                 "/kb/support/articles/%s@not-a-version" % ids["first"],
                 "/kb/internal/events", "/kb/nope/events", "/nothing/here/kb",
                 "/kb/internal/articles/%s/edit" % ids["secret"],
                 "/kb/support/articles/art-999999/edit",
                 "/kb/internal/articles/%s/diff?from=a&to=b" % ids["secret"],
                 "/kb/support/articles/%s/diff?from=2001-01-01T00:00:00Z&to=b" % ids["first"]):
        status, _, body = web.get(path)
        if path == "/nothing/here/kb":
            continue  # not a page's path: /mcp's own 404
        assert status == 404, path
        bodies.add(body)
    assert len(bodies) == 1


def test_an_article_renders_markdown_and_its_citation_and_history(site):
    _, _, ids, path = site
    web = client(site)
    status, _, page = web.get("/kb/support/articles/%s" % ids["first"])
    current = versions(path, "support", ids["first"])[-1]
    assert status == 200 and "<h1>Reset a password</h1>" in page
    assert "kb://support/articles/%s@%s" % (ids["first"], current) in page
    status, _, page = web.get("/kb/support/articles/%s/history" % ids["first"])
    assert status == 200 and page.count('name="from"') == 3
    assert "bob" in page and "carol" in page and "name the tab" in page


def test_a_pinned_version_says_a_newer_one_exists_and_links_the_diff(site):
    _, _, ids, path = site
    old, _, new = versions(path, "support", ids["first"])
    web = client(site)
    status, _, page = web.get("/kb/support/articles/%s@%s" % (ids["first"], old))
    assert status == 200 and "A newer version exists" in page
    assert "open Settings." in page and "then Security" not in page
    assert "diff?from=%s&amp;to=%s" % (old, new) in page
    status, _, page = web.get("/kb/support/articles/%s@%s" % (ids["first"], new))
    assert "A newer version exists" not in page


def test_the_diff_marks_words_side_by_side_and_inline(site):
    _, _, ids, path = site
    old, _, new = versions(path, "support", ids["first"])
    web = client(site)
    base = "/kb/support/articles/%s/diff?from=%s&to=%s" % (ids["first"], old, new)
    status, _, page = web.get(base)
    assert status == 200 and '<table class="side">' in page
    assert "<ins> then Security</ins>" in page and "<ins>, and confirm by mail</ins>" in page
    status, _, page = web.get(base + "&view=inline")
    assert status == 200 and '<p class="inline-diff">' in page and "<ins>" in page
    assert '<table class="side">' not in page


def test_search_shows_the_search_tools_hits_in_its_order(site):
    _, _, _, path = site
    with kbcite.KBStore(str(path)) as store:
        tool = store.call_tool("search_knowledge_base", {"knowledge_base_id": "support",
                                                         "query": "password reset",
                                                         "limit": 20}, granted=["support"])
    web = client(site)
    status, _, page = web.get("/kb/support/search?q=password+reset")
    assert status == 200
    shown = re.findall(r'<li><a href="/kb/support/articles/([^@"]+)@([^"]+)">', page)
    assert shown == [(hit["article_id"], hit["updated_at"]) for hit in tool["results"]]
    assert shown
    status, _, page = web.get("/kb/support/search?q=" + "x" * 5000)
    assert status == 200 and 'role="alert"' in page


def test_hostile_markdown_reaches_the_page_as_text_only(site):
    _, _, ids, _ = site
    web = client(site)
    status, headers, page = web.get("/kb/support/articles/%s" % ids["hostile"])
    assert status == 200
    body = page.split('<div class="body">', 1)[1].split("</article>", 1)[0]
    assert "<script" not in body and "<img" not in body and "<div onclick" not in body
    assert "javascript:" not in body.lower().replace("](javascript:", "")
    assert not re.search(r'href="\s*javascript', body, re.I)
    assert 'href="https://example.com/ok"' in body
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "unsafe-inline" not in headers["content-security-policy"]
    assert "<script>" not in page  # no inline script anywhere on the page


def test_edit_writes_once_for_a_double_click_and_a_conflict_overwrites_nothing(site):
    _, _, ids, path = site
    web = client(site)
    url = "/kb/support/articles/%s/edit" % ids["other"]
    _, _, page = web.get(url)
    form = hidden_fields(page)
    form.update(title="Billing", content="Invoices are sent on the first of the month.")
    before = len(versions(path, "support", ids["other"]))
    first = web.post(url, form)
    second = web.post(url, form)  # the same form again: a double click
    assert first[0] == 303 and second[0] == 303
    assert len(versions(path, "support", ids["other"])) == before + 1
    # A second person still holding the old page saves: refused, shown what changed.
    stale = dict(form, content="Invoices go out weekly.", idempotency_key="web-another-key")
    status, _, page = web.post(url, stale)
    assert status == 409 and "changed this article while you edited it" in page
    assert "first of the month" in unescape(page) and "Invoices go out weekly." in page
    with kbcite.KBStore(str(path)) as store:
        assert store.get_article("support", ids["other"])["content"] == \
            "Invoices are sent on the first of the month."


def test_revert_makes_a_new_version_with_the_old_text_once(site):
    _, _, ids, path = site
    with kbcite.KBStore(str(path)) as store:
        target = store.create_article("support", "Shipping", "Ships in two days.")
        store.save_article("support", target, content="Ships in a week.")
    old, new = versions(path, "support", target)
    web = client(site)
    _, _, page = web.get("/kb/support/articles/%s@%s" % (target, old))
    form = hidden_fields(page)
    assert form["to"] == old and form["expected_version"] == new
    url = "/kb/support/articles/%s/revert" % target
    assert web.post(url, form)[0] == 303
    assert web.post(url, form)[0] == 303  # a double click writes once
    with kbcite.KBStore(str(path)) as store:
        assert store.get_article("support", target)["content"] == "Ships in two days."
        rows = store.history("support", target)
    assert len(rows) == 3 and rows[-1]["actor"] == "alice"
    # Recorded as what it is: a revert (kb revert's action), naming the version it restored.
    assert (rows[-1]["action"], rows[-1]["summary"]) == ("revert", "revert to %s" % old)
    _, _, page = web.get("/kb/support/articles/%s/history" % target)
    assert '<td data-label="Action">revert</td>' in page
    status, _, page = web.post(url, dict(form, idempotency_key="web-other"))
    assert status == 409 and "Nothing was written" in page
    assert len(versions(path, "support", target)) == 3


def test_posts_without_csrf_from_another_origin_or_signed_out_write_nothing(site):
    _, _, ids, path = site
    web = client(site)
    url = "/kb/support/articles/%s/edit" % ids["first"]
    _, _, page = web.get(url)
    form = dict(hidden_fields(page), title="Reset a password", content="Vandalised.")
    before = versions(path, "support", ids["first"])
    assert web.post(url, dict(form, csrf=""))[0] == 403
    assert web.post(url, dict(form, csrf="0" * 64))[0] == 403
    assert web.post(url, form, origin="http://evil.example")[0] == 403
    assert web.post(url, form, origin=False)[0] == 403
    logout = web.post("/logout", {"csrf": form["csrf"]})
    assert logout[0] == 303 and "kb_session" not in web.cookies
    assert web.post(url, form)[0] == 403
    assert versions(path, "support", ids["first"]) == before


def test_a_stolen_cookie_stops_working_at_sign_out_and_at_revocation(site):
    server, _, _, path = site
    web = client(site)
    stolen = WebClient(server.host, server.port)
    stolen.cookies = dict(web.cookies)
    assert stolen.get("/")[0] == 200
    _, _, page = web.get("/")
    web.post("/logout", {"csrf": hidden_fields(page)["csrf"]})
    assert stolen.get("/")[0] == 303
    with kbcite.KBStore(str(path)) as store:
        store.tokens.create("mallory", ["support"], "allow")
    with kbcite.KBStore(str(path)) as store:
        token = store.tokens.create("eve", ["support"])
    eve = WebClient(server.host, server.port)
    assert eve.sign_in(token) == 303 and eve.get("/")[0] == 200
    with kbcite.KBStore(str(path)) as store:
        store.tokens.revoke("eve")
    assert eve.get("/")[0] == 303


def test_a_token_that_must_ask_may_read_but_not_edit(site):
    _, _, ids, path = site
    alice = client(site)
    _, _, page = alice.get("/kb/support/articles/%s/edit" % ids["first"])
    form = dict(hidden_fields(page), title="x", content="Overwritten by a reader.")
    reader = client(site, "reader")
    status, _, page = reader.get("/kb/support/articles/%s" % ids["first"])
    assert status == 200 and "/edit\">Edit</a>" not in page
    assert reader.get("/kb/support/articles/%s/edit" % ids["first"])[0] == 403
    _, _, page = reader.get("/")
    form["csrf"] = hidden_fields(page)["csrf"]
    before = versions(path, "support", ids["first"])
    assert reader.post("/kb/support/articles/%s/edit" % ids["first"], form)[0] == 403
    assert versions(path, "support", ids["first"]) == before


def test_a_one_time_link_signs_in_once(site):
    server, _, _, path = site
    result = subprocess.run([sys.executable, "-m", "kbcite", "token", "link", "--db", str(path),
                             "alice", "--url", "http://%s:%d" % (server.host, server.port)],
                            capture_output=True, text=True, cwd=str(ROOT), env=child_env())
    assert result.returncode == 0, result.stderr
    link = result.stdout.strip()
    assert link.startswith("http://%s:%d/login/link?code=" % (server.host, server.port))
    path_part = link.split(str(server.port), 1)[1]
    first, second = (WebClient(server.host, server.port) for _ in range(2))
    for web in (first, second):
        web.get(path_part)
    _, _, page = first.get(path_part)
    status, _, _ = first.post("/login/link", hidden_fields(page))
    assert status == 303 and first.get("/")[0] == 200
    _, _, page = second.get(path_part)
    status, _, page = second.post("/login/link", hidden_fields(page))
    assert status == 401 and "used already" in page and second.get("/")[0] == 303


def test_the_event_log_page_lists_events_and_the_stream_sends_them(site):
    server, _, ids, path = site
    web = client(site)
    status, _, page = web.get("/kb/support/events")
    assert status == 200 and "article.updated" in page and "by carol" in page
    assert '<script src="/static/live.js" defer></script>' in page
    status, headers, script = web.get("/static/live.js")
    assert status == 200 and "EventSource" in script
    head = int(re.search(r"stream\?after=(\d+)", page).group(1))
    conn = http.client.HTTPConnection(server.host, server.port, timeout=TIMEOUT)
    conn.request("GET", "/kb/support/events/stream?after=%d" % head,
                 headers={"Cookie": "; ".join("%s=%s" % c for c in web.cookies.items())})
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type").startswith("text/event-stream")
    with kbcite.KBStore(str(path)) as store:
        updated = store.save_article("support", ids["other"], content="Live.", actor="dave")
    lines = []
    while not any(line.startswith(b"data:") for line in lines):
        lines.append(response.fp.readline())
    event = json.loads([l for l in lines if l.startswith(b"data:")][0][5:])
    assert event["sequence"] == head + 1 and event["updated_at"] == updated
    assert event["actor"] == "dave" and b"id: %d\n" % (head + 1) in lines
    conn.close()


def test_without_the_extra_the_pages_answer_one_line_and_mcp_still_works():
    code = ("import sys; sys.modules['jinja2'] = None\n"
            "from kbcite.server import web\n"
            "pages = web.pages_for(None)\n"
            "print(type(pages).__name__, web.MISSING_EXTRA.strip())\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=str(ROOT), env=child_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Missing ") and "pip install 'kbcite[http]'" in result.stdout


def test_the_list_pages_published_articles_newest_change_first(kb):
    ids = kb.create_articles(KB, [("Article %d" % i, "Text %d." % i) for i in range(7)])
    kb.create_article(KB, "A draft", "Not listed.", published=False)
    kb.save_article(KB, ids[2], content="Changed last.")
    rows, total = kb.list_recent(KB, granted=[KB], offset=0, limit=3)
    assert total == 7 and [row["article_id"] for row in rows] == [ids[2], ids[6], ids[5]]
    rows, _ = kb.list_recent(KB, granted=[KB], offset=6, limit=3)
    assert [row["article_id"] for row in rows] == [ids[0]]
    with pytest.raises(kbcite.ToolError) as raised:
        kb.list_recent(KB, granted=["other"], offset=0, limit=3)
    assert raised.value.code == "not_found"


def test_the_knowledge_base_page_is_paged(site):
    _, _, _, path = site
    with kbcite.KBStore(str(path)) as store:
        store.create_knowledge_base("big")
        ids = store.create_articles("big", [("Page %d" % i, "Text.") for i in range(55)])
        token = store.tokens.create("big-reader", ["big"], "ask")
    web = WebClient(site[0].host, site[0].port)
    assert web.sign_in(token) == 303
    status, _, first = web.get("/kb/big")
    listed = re.findall(r'href="/kb/big/articles/(art-\d+)"', first)
    assert status == 200 and len(listed) == 50 and listed[0] == ids[-1]
    assert "Page 1 of 2" in first and "?page=2" in first
    _, _, second = web.get("/kb/big?page=2")
    assert re.findall(r'href="/kb/big/articles/(art-\d+)"', second) == ids[:5][::-1]
    _, _, beyond = web.get("/kb/big?page=99")
    assert "Page 2 of 2" in beyond
