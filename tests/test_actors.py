"""Who made each change, with the issuer that vouched for them (schema 9), on both engines:
versions, proposals and the versions they become, a deletion's event; what `kb history` and
`kb events` show of it; a schema 8 store upgraded with its sessions kept."""

import json

import pytest

import kbcite
from kbcite import KBStore
from support.cli import run_kb
from support.old_schemas import as_schema_8

KB = "support"
ISSUER = "https://id.example.com/realms/team"


def _edit(store, article_id, version, content, key, **who):
    """An agent's edit through the tool, as the server makes it for ``who``."""
    return store.call_tool("edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": article_id, "content": content,
        "expected_version": version, "idempotency_key": key}, granted={KB}, **who)


def _new(store, title, content, **who):
    """``(article ID, its version)`` of a new article."""
    article_id = store.create_article(KB, title, content, **who)
    return article_id, store.history(KB, article_id)[-1]["updated_at"]


def test_a_persons_edit_is_recorded_with_their_issuer_and_a_tokens_without(kb):
    art, version = _new(kb, "Disk", "Free space.")
    one = _edit(kb, art, version, "Free more space.", "k1",
                actor="alice@example.com", issuer=ISSUER)
    _edit(kb, art, one["updated_at"], "Free all space.", "k2", actor="agent-1")
    rows = kb.history(KB, art)
    assert [(r["action"], r["actor"], r["actor_issuer"]) for r in rows] == [
        ("create", None, None), ("edit", "alice@example.com", ISSUER),
        ("edit", "agent-1", None)]
    events = {e["sequence"]: e for e in kb.events(KB)["events"]}
    assert events[one["event"]["sequence"]]["actor_issuer"] == ISSUER


def test_an_issuer_that_is_not_a_short_string_is_refused_and_writes_nothing(kb):
    art, version = _new(kb, "Disk", "Free space.")
    with pytest.raises(kbcite.InvalidArgument, match="issuer"):
        _edit(kb, art, version, "x", "k1", actor="alice",
              issuer="https://" + "x" * 2000)
    assert len(kb.history(KB, art)) == 1


def test_a_proposal_keeps_its_issuer_into_the_version_it_becomes(kb):
    art, version = _new(kb, "Disk", "Free space.")
    proposed = kb.propose_edit({
        "knowledge_base_id": KB, "article_id": art, "content": "Free more.",
        "expected_version": version, "idempotency_key": "p1"}, granted={KB},
        actor="bob@example.com", issuer=ISSUER)
    done = kb.proposals.approve(KB, proposed["proposal_id"], approver="carol")
    last = kb.history(KB, art)[-1]
    assert (last["updated_at"], last["actor"], last["actor_issuer"], last["approver"]) == (
        done["version"], "bob@example.com", ISSUER, "carol")
    created = [e for e in kb.events(KB)["events"] if e["type"] == "proposal.created"]
    assert [(e["actor"], e["actor_issuer"]) for e in created] == [("bob@example.com", ISSUER)]


def test_a_deletion_event_names_who_deleted_even_after_a_dump_and_restore(kb):
    art, version = _new(kb, "Disk", "Free space.")
    event = kb.delete_article(KB, art, actor="dana", issuer=ISSUER)
    shown = [e for e in kb.events(KB)["events"] if e["type"] == "article.deleted"]
    assert [(e["sequence"], e["actor"], e["actor_issuer"]) for e in shown] == [
        (event["sequence"], "dana", ISSUER)]
    # What agents poll is unchanged: an event, no person's name in it.
    polled = kb.call_tool("poll_resource_events", {
        "resource_type": "knowledge_base", "resource_id": KB, "after_sequence": 0},
        granted={KB})["events"]
    assert "actor" not in polled[-1] and polled[-1]["type"] == "article.deleted"
    kb.restore_knowledge_base(kb.dump_knowledge_base(KB), as_id="copy")
    again = [e for e in kb.events("copy")["events"] if e["type"] == "article.deleted"]
    assert [(e["actor"], e["actor_issuer"]) for e in again] == [("dana", ISSUER)]


def test_kb_history_and_kb_events_show_the_issuer_beside_the_name(tmp_path):
    db = str(tmp_path / "kb.db")
    with KBStore(db, create=True) as store:
        store.create_knowledge_base(KB)
        art, version = _new(store, "Disk", "Free space.")
        _edit(store, art, version, "Free more.", "k1",
              actor="alice@example.com", issuer=ISSUER)
    status, out, err = run_kb(["history", KB, art, "--db", db])
    assert status == 0, err
    assert "alice@example.com (at id.example.com/realms/team)" in out.splitlines()[-1]
    status, out, err = run_kb(["events", KB, "--db", db])
    assert "alice@example.com (at id.example.com/realms/team)" in out.splitlines()[-1]
    status, out, err = run_kb(["delete", KB, art, "--yes", "--actor", "erin",
                               "--db", db])
    assert status == 0, err
    status, out, err = run_kb(["events", KB, "--db", db])
    assert status == 0, err
    lines = out.splitlines()
    assert "article.deleted" in lines[-1] and lines[-1].split()[-1] == "erin"
    status, out, err = run_kb(["events", KB, "--db", db, "--json"])
    assert status == 0, err
    rows = json.loads(out)["events"]
    # The deleted article's history went with it; its deletion keeps its own actor.
    assert [(r["type"], r["actor"], r["actor_issuer"]) for r in rows][-1] == (
        "article.deleted", "erin", None)


def test_a_schema_8_store_is_upgraded_keeping_its_sessions(engine, tmp_path, request):
    address = (str(tmp_path / "old.db") if engine == "sqlite"
               else request.getfixturevalue("pg_url"))
    with KBStore(address, create=True) as store:
        store.create_knowledge_base(KB)
        art, version = _new(store, "Disk", "Free space.", actor="ann")
        store.delete_article(KB, store.create_article(KB, "Gone", "x"))
        store.tokens.create("one", [KB], "allow")
        store.sessions.open("s1", "one", "2025-11-25", {}, idle_s=3600, per_token=4)
    as_schema_8(address, engine)
    with pytest.raises(kbcite.NotAStore, match="kb upgrade"):
        KBStore(address)
    assert KBStore.upgrade(address) == (8, kbcite.SCHEMA_VERSION)
    with KBStore(address) as store:
        assert store.audit() == []
        rows = store.history(KB, art)
        assert [(r["actor"], r["actor_issuer"]) for r in rows] == [("ann", None)]
        assert store.sessions.find("s1", "one", idle_s=3600) is not None
        # A person signed in at the issuer has a session and no token row.
        store.sessions.open("s2", "alice@example.com", "web-oidc", {}, idle_s=3600,
                            per_token=4)
        assert store.sessions.find("s2", "alice@example.com", idle_s=3600) is not None
        deleted = [e for e in store.events(KB)["events"] if e["type"] == "article.deleted"]
        assert [e["actor"] for e in deleted] == [None]
