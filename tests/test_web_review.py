"""The review queue's pages: an agent's proposals with their diffs, approved, rebased and
rejected by a person whose token may review, never by the token that proposed them."""

import re

import pytest

import kbcite
from support.http_server import Server
from support.web import WebClient, hidden_fields

pytest.importorskip("jinja2")
pytest.importorskip("markdown_it")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A server on a store with proposals: ``(server, tokens, path, article ID)``."""
    path = tmp_path_factory.mktemp("review") / "review.sqlite3"
    with kbcite.KBStore(str(path), create=True) as store:
        store.create_knowledge_base("support")
        article = store.create_article("support", "Refunds", "Refunds take five days.\n\n"
                                       "Ask support for one.")
        tokens = {"agent": store.tokens.create("agent", ["support"], "review", review=True),
                  "boss": store.tokens.create("boss", ["support"], "allow", review=True),
                  "reader": store.tokens.create("reader", ["support"], "allow")}
    server = Server(path)
    yield server, tokens, path, article
    server.stop()


def propose(path, article, content, key):
    with kbcite.KBStore(str(path)) as store:
        current = store.get_article("support", article)["updated_at"]
        result = store.propose_edit({"knowledge_base_id": "support", "article_id": article,
                                     "content": content, "expected_version": current,
                                     "idempotency_key": key}, granted=["support"],
                                    actor="agent")
    return result["proposal_id"]


def signed_in(site, name):
    server, tokens, _, _ = site
    web = WebClient(server.host, server.port)
    assert web.sign_in(tokens[name]) == 303
    return web


def state(path, number):
    with kbcite.KBStore(str(path)) as store:
        return store.proposals.show("support", number)


def test_the_queue_shows_each_proposal_with_its_diff(site):
    _, _, path, article = site
    number = propose(path, article, "Refunds take three days.\n\nAsk support for one.", "q1")
    boss = signed_in(site, "boss")
    status, _, page = boss.get("/kb/support/review")
    assert status == 200 and "Proposal %d" % number in page
    assert "<del>five</del>" in page and "<ins>three</ins>" in page
    status, _, page = boss.get("/kb/support/review/%d" % number)
    assert status == 200 and 'value="approve"' in page


def test_approve_writes_the_proposal_with_its_approver(site):
    _, _, path, article = site
    number = propose(path, article, "Refunds take two days.\n\nAsk support for one.", "a1")
    boss = signed_in(site, "boss")
    _, _, page = boss.get("/kb/support/review/%d" % number)
    status, _, _ = boss.post("/kb/support/review/%d/decide" % number,
                             {"csrf": hidden_fields(page)["csrf"], "action": "approve"})
    assert status == 303 and state(path, number)["state"] == "approved"
    with kbcite.KBStore(str(path)) as store:
        assert "two days" in store.get_article("support", article)["content"]
        last = store.history("support", article)[-1]
    assert last["actor"] == "agent" and last["approver"] == "boss"
    _, _, page = boss.get("/kb/support/articles/%s/history" % article)
    assert "<td data-label=\"Approver\">boss</td>" in page


def test_a_stale_proposal_is_rebased_or_refused_never_written_over(site):
    _, _, path, article = site
    number = propose(path, article, "Refunds take four days.\n\nAsk support for one.", "s1")
    with kbcite.KBStore(str(path)) as store:  # a person changes another paragraph meanwhile
        content = store.get_article("support", article)["content"]
        store.save_article("support", article, content=content.replace(
            "Ask support for one.", "Ask billing for one."))
    boss = signed_in(site, "boss")
    _, _, page = boss.get("/kb/support/review/%d" % number)
    assert "Against the current version" in page and 'value="rebase"' in page
    csrf = hidden_fields(page)["csrf"]
    status, _, page = boss.post("/kb/support/review/%d/decide" % number,
                                {"csrf": csrf, "action": "approve"})
    assert status == 409 and state(path, number)["state"] == "pending"
    status, _, _ = boss.post("/kb/support/review/%d/decide" % number,
                             {"csrf": csrf, "action": "rebase"})
    assert status == 303
    with kbcite.KBStore(str(path)) as store:
        content = store.get_article("support", article)["content"]
    assert "four days" in content and "Ask billing" in content


def test_reject_needs_a_reason_and_the_review_right_and_another_token(site):
    _, _, path, article = site
    number = propose(path, article, "Refunds never happen.", "r1")
    boss, reader, agent = (signed_in(site, name) for name in ("boss", "reader", "agent"))
    for web, expected in ((reader, 403), (agent, 403)):
        _, _, page = web.get("/kb/support/review/%d" % number)
        assert 'value="approve"' not in page
        status, _, _ = web.post("/kb/support/review/%d/decide" % number,
                                {"csrf": hidden_fields(page)["csrf"], "action": "approve"})
        assert status == expected and state(path, number)["state"] == "pending"
    _, _, page = boss.get("/kb/support/review/%d" % number)
    csrf = hidden_fields(page)["csrf"]
    status, _, _ = boss.post("/kb/support/review/%d/decide" % number,
                             {"csrf": csrf, "action": "reject", "reason": " "})
    assert status == 400 and state(path, number)["state"] == "pending"
    status, _, _ = boss.post("/kb/support/review/%d/decide" % number,
                             {"csrf": csrf, "action": "reject", "reason": "Not true."})
    assert status == 303
    found = state(path, number)
    assert found["state"] == "rejected" and found["reason"] == "Not true."
    status, _, page = boss.post("/kb/support/review/%d/decide" % number,
                                {"csrf": csrf, "action": "approve"})
    assert status == 409 and state(path, number)["state"] == "rejected"


def test_edit_then_approve_writes_the_persons_text_in_the_agents_name(site):
    _, _, path, article = site
    number = propose(path, article, "Refunds take one day.\n\nAsk support for one.", "e1")
    reader, agent, boss = (signed_in(site, name) for name in ("reader", "agent", "boss"))
    for web in (reader, agent):  # no review right; the proposing token itself
        status, _, page = web.get("/kb/support/review/%d/edit" % number)
        assert status == 403 and "textarea" not in page
    _, _, page = boss.get("/kb/support/review/%d" % number)
    assert 'href="/kb/support/review/%d/edit"' % number in page
    status, _, page = boss.get("/kb/support/review/%d/edit" % number)
    assert status == 200 and "Refunds take one day." in page
    fields = hidden_fields(page)
    form = {"csrf": fields["csrf"], "expected_version": fields["expected_version"],
            "title": "Refunds", "content": "Refunds take one working day.\n\nAsk support."}
    status, _, page = boss.post("/kb/support/review/%d/edit" % number, dict(form, content=""))
    assert status == 400 and state(path, number)["state"] == "pending"
    status, headers, _ = boss.post("/kb/support/review/%d/edit" % number, form)
    assert status == 303 and headers["location"] == "/kb/support/review/%d" % number
    with kbcite.KBStore(str(path)) as store:
        assert store.get_article("support", article)["content"] == form["content"]
        last = store.history("support", article)[-1]
    assert (last["actor"], last["approver"]) == ("agent", "boss")
    assert last["summary"] == "edited by boss before approval"
    _, _, page = boss.get("/kb/support/review/%d" % number)
    changed = page.split("What boss changed before approving")[1]
    assert "working" in changed and "Against the current version" not in page
    status, _, _ = boss.post("/kb/support/review/%d/edit" % number, form)  # a second click
    assert status == 409
    with kbcite.KBStore(str(path)) as store:
        assert store.history("support", article)[-1]["updated_at"] == last["updated_at"]


def test_edit_then_approve_into_a_conflict_keeps_the_text_and_writes_nothing(site):
    _, _, path, article = site
    number = propose(path, article, "Refunds are quick.", "e2")
    boss = signed_in(site, "boss")
    _, _, page = boss.get("/kb/support/review/%d/edit" % number)
    fields = hidden_fields(page)
    with kbcite.KBStore(str(path)) as store:
        store.save_article("support", article, content="Someone else's text.", actor="bob")
    status, _, page = boss.post("/kb/support/review/%d/edit" % number, {
        "csrf": fields["csrf"], "expected_version": fields["expected_version"],
        "title": "Refunds", "content": "My careful text."})
    assert status == 409 and "My careful text." in page and "Nothing was written" in page
    assert state(path, number)["state"] == "pending"
    with kbcite.KBStore(str(path)) as store:
        assert store.get_article("support", article)["content"] == "Someone else's text."


def test_a_missing_proposal_is_the_one_404(site):
    boss = signed_in(site, "boss")
    bodies = {boss.get(path)[2] for path in ("/kb/support/review/999", "/kb/support/review/x",
                                             "/kb/nope/review", "/kb/support/articles/nope")}
    assert len(bodies) == 1
    assert re.search(r"<h1>Not found</h1>", bodies.pop())
