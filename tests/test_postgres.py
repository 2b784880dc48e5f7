"""What only the PostgreSQL engine has to prove: its addresses, a database that is not a store,
its locks under real concurrency, and the command line and the server on a postgresql:// URL.

(The store's semantics run on PostgreSQL already: every test that takes the ``store`` fixture
runs on both engines.)
"""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest

import kbcite
from kbcite import KBStore
from support.commands import child_env, module_argv

ROOT = Path(__file__).resolve().parent.parent
KB = "kb-pg"
GRANTED = frozenset({KB})

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed")


def call(store, name, **arguments):
    return store.call_tool(name, arguments, granted=GRANTED)


def server_read(url, *options):
    """Read art-000001 through a kb-server on ``url`` over stdio; its structured result."""
    requests = "\n".join(json.dumps(m) for m in [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "read_knowledge_article",
            "arguments": {"knowledge_base_id": KB, "article_id": "art-000001"}}}]) + "\n"
    done = subprocess.run([sys.executable, "-m", "kbcite.server", "--db", url,
                           "--grant", KB] + list(options), input=requests,
                          capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[1])["result"]["structuredContent"]


def tables(url):
    with psycopg.connect(url, autocommit=True) as conn:
        return sorted(r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema()"))


def test_init_makes_an_empty_schema_a_store_and_only_then(pg_url):
    with pytest.raises(kbcite.NotAStore, match="empty database"):
        KBStore(pg_url)
    assert tables(pg_url) == []
    with KBStore(pg_url, create=True) as store:
        assert store.engine == "postgresql"
        store.create_knowledge_base(KB)
    assert "kb_meta" in tables(pg_url) and "search_docs" in tables(pg_url)
    with KBStore(pg_url) as store:
        assert store.knowledge_base_exists(KB)


def test_a_schema_holding_other_tables_is_refused_untouched(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id int primary key, name text)")
        conn.execute("INSERT INTO users VALUES (1, 'Ada')")
    for create in (False, True):
        with pytest.raises(kbcite.NotAStore, match="holds other tables"):
            KBStore(pg_url, create=create)
    assert tables(pg_url) == ["users"]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT * FROM users").fetchall() == [(1, "Ada")]


def test_without_psycopg_the_message_names_the_extra(monkeypatch):
    from kbcite.engines import postgres as kb_postgres

    monkeypatch.setattr(kb_postgres, "psycopg", None)
    with pytest.raises(kbcite.NotAStore, match=r"kbcite\[postgres\]"):
        KBStore("postgresql://nobody@/nowhere")


def test_an_unreachable_server_is_a_retryable_store_failed():
    with pytest.raises(kbcite.StoreFailed) as info:
        KBStore("postgresql://nobody@/nowhere?host=/nonexistent-socket-dir", timeout=1)
    assert info.value.details["retryable"] is True


def test_a_held_knowledge_base_lock_is_store_busy_and_others_go_on(pg_url):
    with KBStore(pg_url, create=True) as store:
        store.create_knowledge_base(KB)
        store.create_knowledge_base("other")
        article = store.create_article(KB, "Held", "v1")
        store.create_article("other", "Free", "v1")
    holder = psycopg.connect(pg_url, autocommit=True)
    holder.execute("BEGIN")
    holder.execute("SELECT * FROM knowledge_bases WHERE kb_id = %s FOR UPDATE", (KB,))
    try:
        with KBStore(pg_url, timeout=0.3) as store:
            version = call(store, "read_knowledge_article", knowledge_base_id=KB,
                           article_id=article)["updated_at"]  # reads do not wait
            with pytest.raises(kbcite.StoreBusy) as info:
                call(store, "edit_knowledge_article", knowledge_base_id=KB, article_id=article,
                     content="v2", expected_version=version, idempotency_key="k")
            assert info.value.details["retryable"] is True
            # Another knowledge base's writers do not wait for this one's lock.
            assert store.create_article("other", "Also free", "x") == "art-000002"
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_one_key_sent_at_once_through_many_connections_writes_once(pg_url):
    with KBStore(pg_url, create=True) as store:
        store.create_knowledge_base(KB)
        article = store.create_article(KB, "Once", "v1")
        version = call(store, "read_knowledge_article", knowledge_base_id=KB,
                       article_id=article)["updated_at"]
        head = store.head_sequence(KB)
    results, barrier = [], threading.Barrier(8)

    def send():
        with KBStore(pg_url) as mine:
            barrier.wait()
            results.append(call(mine, "edit_knowledge_article", knowledge_base_id=KB,
                                article_id=article, content="v2", expected_version=version,
                                idempotency_key="the-same-key"))
    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 8
    assert sum(1 for r in results if not r["replayed"]) == 1
    first = [r for r in results if not r["replayed"]][0]
    assert all(dict(r, replayed=False) == first for r in results)
    with KBStore(pg_url) as store:
        assert store.head_sequence(KB) == head + 1
        assert store.audit() == []


def test_a_poller_never_sees_the_log_out_of_order_while_many_write(pg_url):
    """Sequences commit in sequence order: a poll never finds a hole a later commit fills."""
    with KBStore(pg_url, create=True) as store:
        store.create_knowledge_base(KB)
        articles = [store.create_article(KB, "Busy %d" % i, "v0") for i in range(4)]
    stop, errors, seen = threading.Event(), [], []

    def write(n):
        with KBStore(pg_url) as mine:
            for i in range(25):
                mine.save_article(KB, articles[(n + i) % 4], content="writer %d save %d" % (n, i))

    def poll():
        with KBStore(pg_url) as mine:
            after = 0
            while not stop.is_set() or after < mine.head_sequence(KB):
                try:
                    page = call(mine, "poll_resource_events", resource_type="knowledge_base",
                                resource_id=KB, after_sequence=after)
                except kbcite.ToolError as exc:
                    errors.append(exc.to_dict())
                    return
                seen.extend(e["sequence"] for e in page["events"])
                after = page["next_after_sequence"]
    poller = threading.Thread(target=poll)
    poller.start()
    writers = [threading.Thread(target=write, args=(n,)) for n in range(6)]
    for t in writers:
        t.start()
    for t in writers:
        t.join(timeout=120)
    stop.set()
    poller.join(timeout=120)
    assert errors == []
    assert seen == list(range(1, 4 + 6 * 25 + 1))


def test_the_command_line_and_the_server_take_a_postgresql_url(pg_url, tmp_path):
    def kb(*args, stdin=""):
        done = subprocess.run(module_argv("kbcite", "--db", pg_url, *args), input=stdin,
                              capture_output=True, text=True, timeout=60, env=child_env())
        assert done.returncode == 0, done.stderr
        return done.stdout
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "refunds.md").write_text("# Refund policy\n\nRefunds take five days.\n",
                                     encoding="utf-8")
    kb("init", KB)
    assert kb("import", KB, str(docs)).endswith("create 1, update 0, unchanged 0\n")
    found = json.loads(kb("--json", "search", KB, "refund policy"))
    assert found["results"][0]["title"] == "Refund policy"
    version = found["results"][0]["updated_at"]
    kb("edit", KB, "art-000001", "--expected-version", version, "--content", "Ten days.")
    assert "article.updated" in kb("events", KB)
    assert kb("audit") == "audit: ok\n"
    assert server_read(pg_url)["content"] == "Ten days."


@pytest.fixture(scope="module")
def standby(postgres):
    """A hot standby of the session's throwaway cluster (skipped on a server of one's own)."""
    cluster = postgres[0]
    if cluster is None:
        pytest.skip("the standby test needs the throwaway cluster, not KB_TEST_POSTGRES_URL")
    replica = cluster.standby()
    yield cluster, replica
    replica.remove()


def on_standby(standby, url):
    """The same store's address on the standby: its socket folder instead of the primary's."""
    primary, replica = standby
    moved = url.replace(quote(primary.dir), quote(replica.dir))
    assert moved != url
    return moved


def replayed(url, check, timeout=30.0):
    """Wait until ``check(store)`` holds on the standby (it replays the primary's WAL)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with KBStore(url) as store:
                if check(store):
                    return
        except (kbcite.NotAStore, kbcite.NotFound):
            pass  # the schema or the knowledge base has not arrived yet
        assert time.monotonic() < deadline, "the standby did not replay the primary in time"
        time.sleep(0.1)


def test_a_hot_standby_serves_reads_and_refuses_writes_clearly(standby, pg_url):
    """Read replicas for search and read: the reads' snapshots work on a standby, and a write
    there fails with a message that says where writes go, with nothing written."""
    with KBStore(pg_url, create=True) as primary:
        primary.create_knowledge_base(KB)
        primary.create_article(KB, "Refund policy", "Refunds take five working days.")
        first = call(primary, "read_knowledge_article", knowledge_base_id=KB,
                     article_id="art-000001")
    replica_url = on_standby(standby, pg_url)
    replayed(replica_url, lambda s: s.call_tool("read_knowledge_article", {
        "knowledge_base_id": KB, "article_id": "art-000001"}, granted=GRANTED)["updated_at"]
        == first["updated_at"])

    with KBStore(replica_url) as replica:
        found = call(replica, "search_knowledge_base", knowledge_base_id=KB, query="refund")
        assert [hit["citation"] for hit in found["results"]] == [first["citation"]]
        with pytest.raises(kbcite.StoreFailed, match="read only.*primary") as refused:
            call(replica, "edit_knowledge_article", knowledge_base_id=KB,
                 article_id="art-000001", expected_version=first["updated_at"],
                 content="Written on the standby.", idempotency_key="k-standby")
        assert refused.value.details["retryable"] is False

    # An edit on the primary reaches the standby's readers, event included.
    with KBStore(pg_url) as primary:
        edited = call(primary, "edit_knowledge_article", knowledge_base_id=KB,
                      article_id="art-000001", expected_version=first["updated_at"],
                      content="Refunds take ten working days.", idempotency_key="k-primary")
    def event_arrived(store):
        events = store.call_tool("poll_resource_events", {
            "resource_type": "knowledge_base", "resource_id": KB,
            "after_sequence": first["head_sequence"]}, granted=GRANTED)["events"]
        return [e["updated_at"] for e in events] == [edited["updated_at"]]
    replayed(replica_url, event_arrived)

    # A read-only kb-server runs on the standby as on any store.
    assert (server_read(replica_url, "--writes", "deny")["content"]
            == "Refunds take ten working days.")


def test_resources_and_their_notifications_on_postgresql(pg_url):
    """The articles as MCP resources on a postgresql:// store: list, a pinned read, and a
    subscription that hears of another process's save within a second (the watcher polls the
    log's heads on PostgreSQL as on SQLite)."""
    from support.stdio_client import Client
    with KBStore(pg_url, create=True) as store:
        store.create_knowledge_base("support")
        article = store.create_article("support", "Refund policy", "Refunds take five days.")
        first = store.get_article("support", article)["updated_at"]
    client = Client(pg_url)
    try:
        client.initialize()
        listed = client.call("resources/list", {})["result"]["resources"]
        assert [entry["name"] for entry in listed] == [article]
        uri = listed[0]["uri"]
        assert client.call("resources/subscribe", {"uri": uri})["result"] == {}
        with KBStore(pg_url) as store:
            store.save_article("support", article, content="Refunds take ten days.")
            started = time.monotonic()  # committed
        message = client.recv(5)
        assert time.monotonic() - started < 1.0
        assert message == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                           "params": {"uri": uri}}
        pinned = client.call("resources/read", {"uri": "%s@%s" % (uri, quote(first, safe=""))})
        assert pinned["result"]["contents"][0]["text"] == "Refunds take five days."
    finally:
        client.kill()


def test_a_commit_that_writes_events_wakes_a_listener_and_nothing_else_does(pg_url):
    """The watcher's LISTEN: a save's NOTIFY arrives at its commit, never before; a read or a
    draft's save (no event) sends none."""
    with KBStore(pg_url, create=True) as store:
        store.create_knowledge_base(KB)
        article = store.create_article(KB, "Title", "v0")
        draft = store.create_article(KB, "Draft", "d0", published=False)
        waiter = store.change_waiter()
        try:
            assert waiter.wait(0.2) is False
            store.save_article(KB, draft, content="d1")
            call(store, "read_knowledge_article", knowledge_base_id=KB, article_id=article)
            assert waiter.wait(0.2) is False
            started = time.monotonic()
            with KBStore(pg_url) as other:
                other.save_article(KB, article, content="v1")
            assert waiter.wait(5) is True
            assert time.monotonic() - started < 1.0
        finally:
            waiter.close()


def test_a_hot_standby_cannot_listen_and_says_so(standby, pg_url):
    """A standby cannot LISTEN: its watchers poll the heads instead (they still work)."""
    with KBStore(pg_url, create=True) as primary:
        primary.create_knowledge_base(KB)
    replica_url = on_standby(standby, pg_url)
    replayed(replica_url, lambda s: s.knowledge_base_exists(KB))
    with KBStore(replica_url) as store:
        with pytest.raises(kbcite.StoreFailed, match="LISTEN"):
            store.change_waiter()
