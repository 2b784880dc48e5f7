"""Bearer tokens in the store, on each engine: a connection keeps the live tokens it found
while nothing is committed to the store, and sees a revocation made anywhere at once.
"""

import pytest

from kbcite.store import KBStore

KB = "support"


@pytest.fixture
def path(address, tmp_path):
    """An address two connections can share: a file where the engine's is in memory."""
    return str(tmp_path / "kb.sqlite3") if address == ":memory:" else address


def lookups(store, monkeypatch):
    """The tokens the store's engine looks up by hash, in order."""
    looked = []
    table = type(store._db.tokens)
    real = table.by_hash

    def by_hash(tokens, token_hash):
        looked.append(token_hash)
        return real(tokens, token_hash)
    monkeypatch.setattr(table, "by_hash", by_hash)
    return looked


def test_a_revocation_from_another_connection_or_this_one_is_seen_at_once(path, monkeypatch):
    with KBStore(path, create=True) as store:
        store.create_knowledge_base(KB)
        agent = store.tokens.create("agent", [KB], "allow")
        other = store.tokens.create("other", [KB])
        looked = lookups(store, monkeypatch)
        found = store.tokens.principal(agent)
        assert found == {"name": "agent", "grants": [KB], "writes": "allow", "review": False}
        found["grants"].append("elsewhere")  # the caller's copy
        assert store.tokens.principal(agent)["grants"] == [KB]
        kept = "data_version" in store._db.capabilities
        assert len(looked) == (1 if kept else 2)  # nothing was committed in between
        with KBStore(path) as cli:  # kb token revoke, another process's connection
            cli.tokens.revoke("agent")
        assert store.tokens.principal(agent) is None
        assert store.tokens.principal(other)["name"] == "other"
        store.tokens.revoke("other")  # this connection's own commit
        assert store.tokens.principal(other) is None
        assert store.tokens.principal("kbt_nobody") is None


def test_any_commit_makes_the_next_check_look_again(tmp_path, monkeypatch):
    """Whatever was committed (an edit, say): the token is looked up again, not trusted."""
    path = str(tmp_path / "kb.sqlite3")
    with KBStore(path, create=True) as store:
        store.create_knowledge_base(KB)
        article_id = store.create_article(KB, "Refunds", "Five days.")
        token = store.tokens.create("agent", [KB], "allow")
        looked = lookups(store, monkeypatch)
        store.tokens.principal(token)
        store.tokens.principal(token)
        with KBStore(path) as other:
            other.save_article(KB, article_id, content="Six days.")
        store.tokens.principal(token)
        store.save_article(KB, article_id, content="Seven days.")
        store.tokens.principal(token)
        assert len(looked) == 3
