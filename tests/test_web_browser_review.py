"""The review pages in a real browser (headless Chromium through Selenium): a person rejects a
proposal with a reason, edits one then approves it, and approves one that an agent made
through the official MCP SDK client over HTTP, opening the link its question carried.

One browser serves the module (its cookies cleared before each test); the agent's server
shares the pages' store and names their address as its ``--public-url``.
"""

import pytest

import kbcite
from support.browser import AXE_VERSION, all_css, axe_or_skip, axe_violations, by_css, \
    start_chromium, wait_for
from support.http_server import Server
from support.sdk_session import HttpSession
from support.web import make_store
from test_web_browser import ALERT_HOOK, _need_browser, sign_in, url

pytestmark = pytest.mark.slow

pytest.importorskip("jinja2")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The pages' server on its own store: ``(server, tokens, article IDs, store path)``,
    with an agent's token (``agent``, writes ask) besides ``make_store``'s."""
    _need_browser()
    path = tmp_path_factory.mktemp("browser-review") / "web.sqlite3"
    tokens, ids = make_store(path)
    with kbcite.KBStore(str(path)) as store:
        tokens["agent"] = store.tokens.create("agent", ["support"], "ask")
    server = Server(path)
    yield server, tokens, ids, path
    server.stop()


@pytest.fixture(scope="module")
def browser(site, tmp_path_factory):
    driver = start_chromium(tmp_path_factory.mktemp("review-profile"))
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": ALERT_HOOK})
    yield driver
    driver.quit()


@pytest.fixture
def chrome(browser, site):
    """The module's browser, signed out (no cookies of an earlier test)."""
    browser.get(url(site, "/login"))
    browser.delete_all_cookies()
    return browser


def propose(site, content, key):
    """A proposal of ``support-bot`` on the Billing article; returns its number."""
    with kbcite.KBStore(str(site[3])) as store:
        article = site[2]["other"]
        current = store.get_article("support", article)["updated_at"]
        return store.propose_edit({"knowledge_base_id": "support", "article_id": article,
                                   "content": content, "expected_version": current,
                                   "idempotency_key": key}, granted=["support"],
                                  actor="support-bot")["proposal_id"]


def shown(site, number):
    with kbcite.KBStore(str(site[3])) as store:
        return store.proposals.show("support", number)


def test_a_person_rejects_a_proposal_with_a_reason(site, chrome):
    number = propose(site, "Invoices are never sent.", "reject-1")
    sign_in(chrome, site)
    chrome.get(url(site, "/kb/support/review/%d" % number))
    reason = by_css(chrome, "#reason%d" % number)
    by_css(chrome, "form.reject button[value=reject]").click()  # no reason: the browser asks
    assert chrome.execute_script("return arguments[0].validity.valueMissing", reason)
    assert shown(site, number)["state"] == "pending"
    reason.send_keys("They are sent monthly.")
    by_css(chrome, "form.reject button[value=reject]").click()
    wait_for(chrome, lambda c: "rejected" in by_css(c, "dl.facts").text, "the rejection")
    assert "They are sent monthly." in by_css(chrome, "dl.facts").text
    assert not all_css(chrome, "button[value=approve]")
    found = shown(site, number)
    assert (found["state"], found["decided_by"], found["reason"]) == (
        "rejected", "alice", "They are sent monthly.")
    assert chrome.execute_script("return window.__alerts") == []


def test_a_person_edits_a_proposal_then_approves_it(site, chrome):
    number = propose(site, "Invoices are sent monthly, by fax.", "edit-1")
    sign_in(chrome, site)
    chrome.get(url(site, "/kb/support/review/%d" % number))
    by_css(chrome, "a[href$='/review/%d/edit']" % number).click()
    wait_for(chrome, lambda c: all_css(c, "textarea#content"), "the edit form")
    box = by_css(chrome, "textarea#content")
    assert box.get_attribute("value") == "Invoices are sent monthly, by fax."
    box.clear()
    box.send_keys("Invoices are sent monthly, by mail.")
    by_css(chrome, "form.edit button[type=submit]").click()
    wait_for(chrome, lambda c: "approved" in by_css(c, "dl.facts").text, "the approval")
    assert "What alice changed before approving" in by_css(chrome, "main").text
    with kbcite.KBStore(str(site[3])) as store:
        assert store.get_article("support", site[2]["other"])["content"] == \
            "Invoices are sent monthly, by mail."
        last = store.history("support", site[2]["other"])[-1]
    assert (last["actor"], last["approver"], last["summary"]) == (
        "support-bot", "alice", "edited by alice before approval")
    assert shown(site, number)["content"] == "Invoices are sent monthly, by fax."


def test_the_review_pages_have_no_serious_or_critical_accessibility_violation_and_ordered_headings(site, chrome):
    source = axe_or_skip()
    pending = propose(site, "Invoices are sent monthly, or weekly.", "axe-1")
    edited = propose(site, "Invoices are sent weekly.", "axe-2")
    with kbcite.KBStore(str(site[3])) as store:
        store.proposals.approve("support", edited, approver="carol", edited={
            "content": "Invoices are sent weekly, on Mondays.", "title": "Billing",
            "expected_version": store.get_article("support", site[2]["other"])["updated_at"]})
    sign_in(chrome, site)
    found = {}
    for name, path in (("edit then approve", "/kb/support/review/%d/edit" % pending),
                       ("approved with changes", "/kb/support/review/%d" % edited)):
        chrome.get(url(site, path))
        found[name] = axe_violations(chrome, source)
    print("axe-core %s violations by page: %r" % (AXE_VERSION, found))
    bad = {name: [v for v in found[name] if v[1] in ("serious", "critical")] for name in found}
    assert not any(bad.values()), bad
    # Two diffs on a page: headings in order under the card's, each change's region named apart.
    order = {name: [v for v in found[name] if v[0] in ("heading-order", "landmark-unique")]
             for name in found}
    assert not any(order.values()), order


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_person_approves_at_the_link_an_sdk_agents_question_carried(site, chrome, mode):
    mcp = pytest.importorskip("mcp", reason="the official MCP SDK (Python >= 3.10)")
    anyio = pytest.importorskip("anyio")
    httpx2 = pytest.importorskip("httpx2")
    import mcp.types as types
    from mcp.client.streamable_http import streamable_http_client

    pages, tokens, ids, path = site
    public = "http://%s:%d" % (pages.host, pages.port)
    agents = Server(path, "--public-url", public)  # another server on the same store
    asked = []

    async def on_elicit(ctx, params):
        asked.append(params)
        return types.ElicitResult(action="accept")

    async def agent():
        http = httpx2.AsyncClient(headers={"Authorization": "Bearer " + tokens["agent"]})
        client = mcp.Client(streamable_http_client(
            "http://%s:%d/mcp" % (agents.host, agents.port), http_client=http), mode=mode,
            elicitation_callback=on_elicit)
        async with HttpSession(http, client) as session:
            read = await session.call_tool("read_knowledge_article", {
                "knowledge_base_id": "support", "article_id": ids["first"]})
            return await session.call_tool("edit_knowledge_article", {
                "knowledge_base_id": "support", "article_id": ids["first"],
                "content": read.structured_content["content"] + "\n\nAsk in chat (%s)." % mode,
                "expected_version": read.structured_content["updated_at"],
                "idempotency_key": "sdk-" + mode})
    try:
        edited = anyio.run(agent)
    finally:
        agents.stop()
    found = edited.structured_content
    assert not edited.is_error and found["status"] == "proposed"
    link = "%s/kb/support/review/%d" % (public, found["proposal_id"])
    assert found["review_url"] == link
    [question] = asked
    assert question.mode == "url" and question.url == link
    # The person opens the link: sign-in first, then back to the proposal.
    chrome.get(link)
    wait_for(chrome, lambda c: "/login" in c.current_url, "the sign-in page")
    by_css(chrome, "#token").send_keys(tokens["alice"])
    by_css(chrome, "form.login button").click()
    wait_for(chrome, lambda c: c.current_url == link, "the way back to the proposal")
    assert "Ask in chat (%s)." % mode in by_css(chrome, "section.proposal").text
    by_css(chrome, "button[value=approve]").click()
    wait_for(chrome, lambda c: "approved" in by_css(c, "dl.facts").text, "the approval")
    with kbcite.KBStore(str(path)) as store:
        article = store.get_article("support", ids["first"])
        last = store.history("support", ids["first"])[-1]
    assert article["content"].endswith("Ask in chat (%s)." % mode)
    assert (last["actor"], last["approver"]) == ("agent", "alice")
