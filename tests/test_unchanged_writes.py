"""A write that changes nothing makes no version and no event, from every entry point: the edit
tool (in every writes mode, both eras), a replay of it, the command line's save, edit and
revert, a proposal approved onto a text that already holds it, and a web Edit saved untouched
(a browser sends CRLF). The compare-and-swap is judged first: a stale version is still a
conflict."""

import json

import pytest

from kbcite import KBStore, VersionConflict
from kbcite.server import inbound
from kbcite.server.dispatch import Dispatch
from kbcite.server.pool import StorePool
from kbcite.server.calls import Principal, Session
from support.cli import run_kb

KB = "kb-same"
GRANTED = frozenset({KB})
TEXT = "Refunds take five days.\n\nTen in December."


@pytest.fixture
def article(kb):
    """An article of ``KB`` and its version."""
    aid = kb.create_article(KB, "Refunds", TEXT)
    return aid, kb.get_article(KB, aid)["updated_at"]


def edit(store, aid, content, version, key, **extra):
    return store.call_tool("edit_knowledge_article", dict({
        "knowledge_base_id": KB, "article_id": aid, "content": content,
        "expected_version": version, "idempotency_key": key}, **extra), granted=GRANTED)


def unchanged_since(store, aid, versions, head):
    return len(store.history(KB, aid)) == versions and store.head_sequence(KB) == head


def test_an_edit_with_the_same_text_writes_nothing_and_says_so(kb, article, clock):
    aid, version = article
    head = kb.head_sequence(KB)
    clock.advance(minutes=1)
    for key, content in (("same", TEXT), ("crlf", TEXT.replace("\n", "\r\n") + "\r\n"),
                         ("titled", TEXT)):
        extra = {"title": "Refunds"} if key == "titled" else {}
        done = edit(kb, aid, content, version, key, **extra)
        assert done["changed"] is False and done["event"] is None, done
        assert done["updated_at"] == done["previous_version"] == version
        assert done["citation"]["updated_at"] == version and done["replayed"] is False
    assert unchanged_since(kb, aid, 1, head)
    # Its key keeps the answer: sent again, the same one, marked a replay.
    again = edit(kb, aid, TEXT, version, "same")
    assert again["replayed"] is True and again["changed"] is False
    # The compare-and-swap comes first: from a stale version, the same text is a conflict.
    retitled = edit(kb, aid, TEXT, version, "retitle", title="Refund policy")
    assert retitled["changed"] is True and retitled["event"]["type"] == "article.updated"
    with pytest.raises(VersionConflict):
        edit(kb, aid, TEXT, version, "stale", title="Refund policy")
    assert len(kb.history(KB, aid)) == 2


def test_a_persons_save_publish_and_revert_to_the_same_make_no_version(kb, article, clock):
    aid, version = article
    head = kb.head_sequence(KB)
    clock.advance(minutes=1)
    assert kb.save(KB, aid, content=TEXT + "\n\n", title="Refunds") == {
        "updated_at": version, "event": None, "changed": False}
    assert kb.save_article(KB, aid, content=TEXT) == version
    assert kb.publish(KB, aid) == version
    done = kb.revert(KB, aid, version, expected_version=version, idempotency_key="r")
    assert (done["changed"], done["event"], done["updated_at"]) == (False, None, version)
    assert kb.revert(KB, aid, version, expected_version=version, idempotency_key="r")[
        "replayed"] is True
    assert unchanged_since(kb, aid, 1, head)
    # A draft saved as it stands: no version either (a draft's saves have no event anyway).
    kb.unpublish(KB, aid)
    draft = kb.get_article(KB, aid)["updated_at"]
    assert kb.save(KB, aid, content=TEXT)["changed"] is False
    assert kb.get_article(KB, aid)["updated_at"] == draft and len(kb.history(KB, aid)) == 2


def test_a_proposal_of_the_same_text_is_no_proposal(kb, article, clock):
    aid, version = article
    head = kb.head_sequence(KB)
    done = kb.propose_edit({"knowledge_base_id": KB, "article_id": aid, "content": TEXT,
                            "expected_version": version, "idempotency_key": "p"},
                           granted=GRANTED, actor="bot")
    assert done["changed"] is False and "proposal_id" not in done and done["event"] is None
    assert kb.proposals.list(KB) == [] and unchanged_since(kb, aid, 1, head)
    assert kb.propose_edit({"knowledge_base_id": KB, "article_id": aid, "content": TEXT,
                            "expected_version": version, "idempotency_key": "p"},
                           granted=GRANTED, actor="bot")["replayed"] is True


def test_approving_a_proposal_the_article_already_holds_makes_no_version(kb, article, clock):
    aid, version = article
    new = TEXT + "\n\nRefunds go back to the card."
    proposed = kb.propose_edit({"knowledge_base_id": KB, "article_id": aid, "content": new,
                                "expected_version": version, "idempotency_key": "p"},
                               granted=GRANTED, actor="bot")
    clock.advance(minutes=1)
    made = kb.save_article(KB, aid, content=new, actor="alice")  # the same change, by hand
    versions = len(kb.history(KB, aid))
    done = kb.proposals.approve(KB, proposed["proposal_id"], approver="carol", rebase=True)
    assert done["changed"] is False and done["version"] == made
    assert [e["type"] for e in done["events"]] == ["proposal.approved"]
    assert len(kb.history(KB, aid)) == versions
    assert kb.proposals.show(KB, proposed["proposal_id"])["state"] == "approved"


def kb_cli(path, *argv):
    return run_kb(["--db", path] + [str(a) for a in argv])


def test_the_command_line_says_unchanged_and_exits_0(tmp_path):
    path = str(tmp_path / "kb.db")
    with KBStore(path, create=True) as store:
        store.create_knowledge_base(KB)
        aid = store.create_article(KB, "Refunds", TEXT)
        version = store.get_article(KB, aid)["updated_at"]
    status, out, err = kb_cli(path, "save", KB, aid, "--content", TEXT)
    assert (status, out.strip()) == (0, version) and "unchanged" in err
    status, out, err = kb_cli(path, "edit", KB, aid, "--expected-version", version,
                              "--content", TEXT.replace("\n", "\r\n"))
    assert status == 0 and "unchanged" in out, (out, err)
    status, out, err = kb_cli(path, "--json", "edit", KB, aid, "--expected-version", version,
                              "--content", TEXT)
    assert status == 0 and json.loads(out)["changed"] is False
    status, out, err = kb_cli(path, "revert", KB, aid, "--to", version, "--expected-version",
                              version)
    assert status == 0 and out.startswith("unchanged"), (out, err)
    with KBStore(path) as store:
        assert len(store.history(KB, aid)) == 1 and store.head_sequence(KB) == 1


def test_an_unchanged_edit_is_not_asked_about_nor_kept_for_review(tmp_path):
    path = str(tmp_path / "kb.db")
    with KBStore(path, create=True) as store:
        store.create_knowledge_base(KB)
        aid = store.create_article(KB, "Refunds", TEXT)
        version = store.get_article(KB, aid)["updated_at"]
    pool = StorePool(path, readers=1, writers=1)
    dispatch = Dispatch(pool, b"s" * 32, 600)
    asked = []
    try:
        for n, (writes, modern) in enumerate([("ask", False), ("ask", True), ("review", False),
                                              ("review", True)]):
            principal = Principal("bot", GRANTED, writes)
            session = None
            if not modern:
                session = Session(principal)
                session.protocol_version, session.initialized = "2025-11-25", True
                session.client_capabilities = {"elicitation": {"form": {}}}
            params = {"name": "edit_knowledge_article", "arguments": {
                "knowledge_base_id": KB, "article_id": aid, "content": TEXT,
                "expected_version": version, "idempotency_key": "k%d" % n}}
            if modern:
                params["_meta"] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                   "io.modelcontextprotocol/clientCapabilities": {
                                       "elicitation": {"form": {}}}}
            message = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
            call, _ = dispatch.begin(message, session)
            outcome = dispatch.serve(call, message, inbound.route(message), principal, session,
                                     ask=lambda call, question: asked.append(question))
            result = outcome.response["result"]
            assert result.get("resultType", "complete") == "complete", result
            assert result["structuredContent"]["changed"] is False, result
    finally:
        pool.close()
    assert asked == []
    with KBStore(path) as store:
        assert store.proposals.list(KB) == [] and len(store.history(KB, aid)) == 1


def test_a_web_edit_saved_untouched_says_nothing_changed(tmp_path):
    pytest.importorskip("jinja2")
    from kbcite.server.http.app import McpApp
    from kbcite.server.http.settings import Settings
    from support.asgi import AsgiClient, hidden_fields
    path = str(tmp_path / "kb.db")
    with KBStore(path, create=True) as store:
        store.create_knowledge_base(KB)
        aid = store.create_article(KB, "Refunds", TEXT)
        token = store.tokens.create("alice", [KB], "allow")
    app = McpApp(Settings(db=path, signing_secret=b"w" * 32))
    try:
        browser = AsgiClient(app)
        assert browser.sign_in(token) == 303
        _, _, page = browser.get("/kb/%s/articles/%s/edit" % (KB, aid))
        fields = hidden_fields(page)
        status, _, page = browser.post("/kb/%s/articles/%s/edit" % (KB, aid), dict(
            fields, title="Refunds", content=TEXT.replace("\n", "\r\n") + "\r\n", summary=""))
        assert status == 200 and "Nothing changed" in page
        status, _, page = browser.post("/kb/%s/articles/%s/revert" % (KB, aid), {
            "csrf": fields["csrf"], "to": fields["expected_version"],
            "expected_version": fields["expected_version"], "idempotency_key": "r"})
        assert status == 200 and "Nothing changed" in page
    finally:
        app.close()
    with KBStore(path) as store:
        assert len(store.history(KB, aid)) == 1 and store.head_sequence(KB) == 1
