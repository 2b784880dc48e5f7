"""The web pages in a real browser (headless Chromium through Selenium): a person signs in,
searches, reads, compares, reverts, edits into a conflict, watches the live log and signs out;
hostile articles run nothing; refused forms write nothing; axe-core finds no serious or
critical violation; and every page is photographed at desktop and phone width.

Without Chromium and chromedriver the tests are skipped locally, saying so; in CI (``CI``
set) they fail, since ``.ci/run`` installs them.
"""

import os
import time
from pathlib import Path

import pytest

import kbcite
from support.browser import AXE_VERSION, DESKTOP, PHONE, all_css, axe_or_skip, axe_violations, \
    by_css, chromium_paths, start_chromium, wait_for
from support.http_server import Server
from support.web import make_store

pytestmark = pytest.mark.slow

pytest.importorskip("jinja2")


def _need_browser():
    missing = []
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (the test extra)")
    if chromium_paths() is None:
        missing.append("chromium and chromedriver (apt-get install chromium chromium-driver)")
    if missing:
        if os.environ.get("CI"):
            pytest.fail("the browser tests need %s" % ", ".join(missing))
        pytest.skip("the browser tests need %s" % ", ".join(missing))


# A hook installed before any page script: every alert, confirm and prompt is recorded.
ALERT_HOOK = ("window.__alerts = [];"
              "['alert', 'confirm', 'prompt'].forEach(function (name) {"
              "  window[name] = function (m) { window.__alerts.push([name, String(m)]); };"
              "});")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A server on its own store: ``(server, tokens, article IDs, store path)``."""
    _need_browser()
    path = tmp_path_factory.mktemp("browser") / "web.sqlite3"
    tokens, ids = make_store(path)
    server = Server(path)
    yield server, tokens, ids, path
    server.stop()


@pytest.fixture
def chrome(tmp_path):
    """A fresh headless Chromium at desktop size, its alert hook installed for every page."""
    driver = start_chromium(tmp_path / "profile")
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": ALERT_HOOK})
    yield driver
    driver.quit()


def url(site, path):
    server = site[0]
    return "http://%s:%d%s" % (server.host, server.port, path)


def sign_in(chrome, site, name="alice"):
    chrome.get(url(site, "/"))
    assert "/login" in chrome.current_url
    by_css(chrome, "#token").send_keys(site[1][name])
    by_css(chrome, "form.login button").click()
    wait_for(chrome, lambda c: c.title.startswith("Your knowledge bases"), "signing in")


def history_of(site, article_id):
    with kbcite.KBStore(str(site[3])) as store:
        return store.history("support", article_id)


def test_a_person_reads_searches_compares_reverts_and_signs_out(site, chrome):
    _, _, ids, _ = site
    sign_in(chrome, site)
    assert "kbt_" not in chrome.current_url
    by_css(chrome, "a[href='/kb/support']").click()
    box = by_css(chrome, "#q")
    box.send_keys("password")
    box.submit()
    wait_for(chrome, lambda c: "/search?q=password" in c.current_url, "the search")
    hits = all_css(chrome, "ol.hits li a")
    assert hits and hits[0].text == "Reset a password"
    hits[0].click()
    wait_for(chrome, lambda c: all_css(c, "#cite-uri"), "the article")
    assert by_css(chrome, "h1").text == "Reset a password"
    assert "kb://support/articles/%s@" % ids["first"] in \
        by_css(chrome, "#cite-uri").get_attribute("value")
    by_css(chrome, "nav.actions a[href$='/history']").click()
    wait_for(chrome, lambda c: all_css(c, "table.history"), "the history")
    rows = all_css(chrome, "table.history tbody tr")
    assert len(rows) == 3
    # Compare the oldest with the newest.
    all_css(chrome, "input[name=from]")[2].click()
    all_css(chrome, "input[name=to]")[0].click()
    by_css(chrome, "form button[type=submit]:not(.link)").click()
    wait_for(chrome, lambda c: "/diff?" in c.current_url, "the diff page")
    inserted = " ".join(e.text for e in all_css(chrome, "table.side ins"))
    assert "then Security" in inserted and "confirm by mail" in inserted
    by_css(chrome, ".tabs a[href*='view=inline']").click()
    wait_for(chrome, lambda c: "view=inline" in c.current_url, "the inline diff")
    assert all_css(chrome, "p.inline-diff del, p.inline-diff ins")
    # Open the oldest version pinned, and revert to it.
    oldest = history_of(site, ids["first"])[0]["updated_at"]
    chrome.get(url(site, "/kb/support/articles/%s@%s" % (ids["first"], oldest)))
    assert "A newer version exists" in by_css(chrome, "section.banner").text
    assert by_css(chrome, "section.banner a[href*='/diff?']")
    by_css(chrome, "section.banner button").click()
    wait_for(chrome, lambda c: "@" not in c.current_url, "the revert")
    assert "open Settings." in by_css(chrome, "article .body").text
    rows = history_of(site, ids["first"])
    assert len(rows) == 4 and rows[-1]["actor"] == "alice"
    # Sign out; the pages ask for sign-in again.
    by_css(chrome, "header form button.link").click()
    wait_for(chrome, lambda c: "/login" in c.current_url, "signing out")
    chrome.get(url(site, "/kb/support"))
    assert "/login" in chrome.current_url
    assert chrome.execute_script("return window.__alerts") == []


def test_an_edit_into_a_conflict_shows_what_changed_and_overwrites_nothing(site, chrome):
    _, _, ids, path = site
    sign_in(chrome, site)
    chrome.get(url(site, "/kb/support/articles/%s/edit" % ids["other"]))
    text = by_css(chrome, "#content")
    text.clear()
    text.send_keys("My version of billing.")
    with kbcite.KBStore(str(path)) as store:  # someone else saves meanwhile
        store.save_article("support", ids["other"], content="Invoices are sent weekly.",
                           actor="bob")
    by_css(chrome, "form.edit button").click()
    wait_for(chrome, lambda c: all_css(c, "section.conflict"), "the conflict page")
    banner = by_css(chrome, "section.conflict")
    assert "changed this article while you edited it" in banner.text
    assert "weekly" in banner.text
    assert by_css(chrome, "#content").get_attribute("value") == "My version of billing."
    with kbcite.KBStore(str(path)) as store:
        assert store.get_article("support", ids["other"])["content"] == \
            "Invoices are sent weekly."
    # Saving again, now knowingly, goes through.
    by_css(chrome, "form.edit button").click()
    wait_for(chrome, lambda c: c.current_url.endswith("/articles/%s" % ids["other"]), "saving")
    assert "My version of billing." in by_css(chrome, "article .body").text


def test_the_live_log_receives_an_event_without_reload(site, chrome):
    _, _, ids, path = site
    sign_in(chrome, site)
    chrome.get(url(site, "/kb/support/events"))
    wait_for(chrome, lambda c: by_css(c, "#live-status").text.startswith("Live"),
             "the live stream opening")
    chrome.execute_script("window.__marker = 1")
    with kbcite.KBStore(str(path)) as store:
        updated = store.save_article("support", ids["first"], content="Live edit.",
                                     actor="dave")
    wait_for(chrome, lambda c: all_css(c, "#events li.new"), "the event arriving")
    item = all_css(chrome, "#events li.new")[0].text
    assert ids["first"] in item and updated in item and "by dave" in item
    assert chrome.execute_script("return window.__marker") == 1  # the same page: no reload


def test_hostile_articles_run_nothing(site, chrome):
    _, _, ids, _ = site
    sign_in(chrome, site)
    chrome.get(url(site, "/kb/support/articles/%s" % ids["hostile"]))
    body = by_css(chrome, "article .body")
    assert "<script>alert('script')</script>" in body.text
    for link in all_css(chrome, "article .body a"):
        assert link.get_attribute("href").startswith("https://")
    assert not all_css(chrome, "article .body img, article .body script, "
                               "article .body [onclick], article .body [onerror]")
    time.sleep(0.5)  # an image's onerror would have fired by now
    assert chrome.execute_script("return window.__alerts") == []
    assert chrome.execute_script("return window.alert.toString()").find("__alerts") >= 0


def test_a_form_after_sign_out_is_refused_and_writes_nothing(site, chrome):
    _, _, ids, _ = site
    sign_in(chrome, site)
    chrome.get(url(site, "/kb/support/articles/%s/edit" % ids["first"]))
    editing = chrome.current_window_handle
    chrome.switch_to.new_window("tab")
    chrome.get(url(site, "/"))
    by_css(chrome, "header form button.link").click()
    wait_for(chrome, lambda c: "/login" in c.current_url, "signing out")
    chrome.switch_to.window(editing)
    before = history_of(site, ids["first"])
    text = by_css(chrome, "#content")
    text.clear()
    text.send_keys("Written after sign-out.")
    by_css(chrome, "form.edit button").click()
    wait_for(chrome, lambda c: "not signed in" in by_css(c, "main").text, "the refusal")
    assert history_of(site, ids["first"]) == before


def test_ungranted_pages_are_byte_identical_to_missing_ones(site, chrome):
    _, _, ids, _ = site
    sign_in(chrome, site)
    seen = set()
    for path in ("/kb/internal", "/kb/nope", "/kb/internal/articles/%s" % ids["secret"],
                 "/kb/support/articles/art-999999"):
        chrome.get(url(site, path))
        seen.add(chrome.execute_script("return document.documentElement.outerHTML"))
    assert len(seen) == 1


PAGES = [("home", "/"), ("knowledge-base", "/kb/support"),
         ("search", "/kb/support/search?q=password"), ("article", "/kb/support/articles/{first}"),
         ("pinned", "/kb/support/articles/{first}@{oldest}"),
         ("history", "/kb/support/articles/{first}/history"),
         ("diff", "/kb/support/articles/{first}/diff?from={oldest}&to={newest}"),
         ("diff-inline", "/kb/support/articles/{first}/diff?from={oldest}&to={newest}"
                         "&view=inline"),
         ("edit", "/kb/support/articles/{first}/edit"), ("events", "/kb/support/events"),
         ("review", "/kb/support/review"),
         ("not-found", "/kb/internal")]


def _page_paths(site):
    _, _, ids, _ = site
    rows = history_of(site, ids["first"])
    values = dict(ids, oldest=rows[0]["updated_at"], newest=rows[-1]["updated_at"])
    return [(name, path.format(**values)) for name, path in PAGES]


def test_no_serious_or_critical_accessibility_violation(site, chrome):
    source = axe_or_skip()
    chrome.get(url(site, "/login"))
    found = {"login": axe_violations(chrome, source)}
    sign_in(chrome, site)
    for name, path in _page_paths(site):
        chrome.get(url(site, path))
        found[name] = axe_violations(chrome, source)
    print("axe-core %s violations by page: %r" % (AXE_VERSION, found))
    bad = {name: [v for v in found[name] if v[1] in ("serious", "critical")] for name in found}
    assert not any(bad.values()), bad


def test_screenshots_of_every_page_at_desktop_and_phone_width(site, chrome, tmp_path):
    folder = Path(os.environ.get("KB_SCREENSHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    sign_in(chrome, site)
    for width, height, label in (DESKTOP + ("desktop",), PHONE + ("phone",)):
        chrome.set_window_size(width, height)
        for name, path in _page_paths(site):
            chrome.get(url(site, path))
            # The whole page, not only the window: as tall as the document.
            full = chrome.execute_script("return document.documentElement.scrollHeight")
            chrome.set_window_size(width, min(max(height, full + 120), 4000))
            target = folder / ("%s-%s.png" % (name, label))
            assert chrome.save_screenshot(str(target)) and target.stat().st_size > 1000
            chrome.set_window_size(width, height)


def test_a_person_approves_an_agents_proposal_from_the_queue(site, chrome):
    _, _, ids, path = site
    sign_in(chrome, site)
    chrome.get(url(site, "/kb/support/review"))
    card = by_css(chrome, "section.proposal")
    assert "support-bot" in card.text and "by mail and on the web" in card.text
    by_css(chrome, "section.proposal button[value=approve]").click()
    wait_for(chrome, lambda c: "approved" in by_css(c, "main").text, "the approval")
    with kbcite.KBStore(str(path)) as store:
        content = store.get_article("support", ids["proposed"])["content"]
        last = store.history("support", ids["proposed"])[-1]
    assert "by mail and on the web" in content
    assert last["actor"] == "support-bot" and last["approver"] == "alice"
