"""What a team issuer's people and groups may do, kept in the store (``kb grant``), on both
engines: a subject's own grant wins over its groups', the broadest group's otherwise."""

import pytest

from kbcite.errors import InvalidArgument, NotFound

KB = "support"


def test_grants_are_kept_listed_changed_and_removed(kb):
    kb.create_knowledge_base("docs")
    kb.grants.add("subject", "alice@example.com", KB, "allow")
    kb.grants.add("group", "editors", "docs", "ask")
    kb.grants.add("group", "editors", "docs", "deny")        # a new mode replaces the old
    rows = [(r["kind"], r["name"], r["knowledge_base_id"], r["writes"]) for r in kb.grants.list()]
    assert rows == [("group", "editors", "docs", "deny"),
                    ("subject", "alice@example.com", KB, "allow")]
    kb.grants.remove("group", "editors", "docs")
    assert [r["name"] for r in kb.grants.list()] == ["alice@example.com"]
    with pytest.raises(NotFound, match="has no grant"):
        kb.grants.remove("group", "editors", "docs")


def test_a_person_gets_their_own_and_their_groups_grants(kb):
    kb.create_knowledge_base("docs")
    kb.create_knowledge_base("hr")
    kb.grants.add("group", "readers", KB, "deny")
    kb.grants.add("group", "editors", KB, "allow")
    kb.grants.add("group", "readers", "docs", "deny")
    kb.grants.add("subject", "alice", "docs", "ask")
    kb.grants.add("group", "editors", "docs", "allow")
    assert kb.grants.of("alice", {"readers", "editors"}) == {KB: "allow", "docs": "ask"}
    assert kb.grants.of("bob", {"readers"}) == {KB: "deny", "docs": "deny"}
    assert kb.grants.of("carol", ()) == {}
    assert kb.grants.of("carol", {"editors", "nobody"}) == {KB: "allow", "docs": "allow"}


@pytest.mark.parametrize("call, words", [
    (lambda kb: kb.grants.add("team", "x", KB), "kind must be one of subject, group"),
    (lambda kb: kb.grants.add("subject", "", KB), "subject must not be empty"),
    (lambda kb: kb.grants.add("subject", "x" * 257, KB), "256"),
    (lambda kb: kb.grants.add("subject", "x", KB, "sometimes"), "writes must be one of"),
])
def test_bad_grants_are_refused_and_write_nothing(kb, call, words):
    with pytest.raises(InvalidArgument, match=words):
        call(kb)
    assert kb.grants.list() == []


def test_a_grant_of_a_missing_knowledge_base_is_not_found(kb):
    with pytest.raises(NotFound):
        kb.grants.add("subject", "alice", "nowhere")
    assert kb.grants.list() == []


def test_a_schema_6_store_is_upgraded_with_grants(engine, tmp_path, request):
    import kbcite
    from kbcite import KBStore
    from support.old_schemas import as_schema_6
    address = (str(tmp_path / "old.db") if engine == "sqlite"
               else request.getfixturevalue("pg_url"))
    with KBStore(address, create=True) as store:
        store.create_knowledge_base(KB)
    as_schema_6(address, engine)
    with pytest.raises(kbcite.NotAStore, match="kb upgrade"):
        KBStore(address)
    assert KBStore.upgrade(address) == (6, kbcite.SCHEMA_VERSION)
    with KBStore(address) as store:
        store.grants.add("group", "editors", KB, "allow")
        assert store.grants.of("x", {"editors"}) == {KB: "allow"}
        assert store.audit() == []
