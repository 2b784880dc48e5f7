"""The store under faults: files that are not stores, a held write lock, a damaged event log or
search index, failures that must come out as ToolErrors, drafts that must not show through
timing, and titles that only look non-blank."""

import hashlib
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kbcite
from kbcite import KBStore, ToolError
from kbcite.limits import APPLICATION_ID
from kbcite.validation import is_blank

ROOT = Path(__file__).resolve().parent.parent
KB = "kb-main"
GRANTED = frozenset({KB})
MIB = 1024 * 1024


def call(store, name, **arguments):
    return store.call_tool(name, arguments, granted=GRANTED)


def error_of(store, name, arguments):
    with pytest.raises(ToolError) as info:
        store.call_tool(name, arguments, granted=GRANTED)
    return info.value


def poll(store, **extra):
    return call(store, "poll_resource_events", resource_type="knowledge_base", resource_id=KB,
                **extra)


def files_of(directory):
    """Name -> SHA-256 of every file in ``directory``: a changed or new file shows."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in Path(directory).iterdir() if p.is_file()}


def run(*argv, timeout=60):
    return subprocess.run([sys.executable] + [str(a) for a in argv], capture_output=True,
                          text=True, timeout=timeout, cwd=str(ROOT))



# -- 1. a file that is not a store is left exactly as it was -----------------------------------


def make_foreign(path):
    """Another application's SQLite file: a table ``users``, user_version 1, rollback journal."""
    conn = sqlite3.connect(str(path))
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('Ada')")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("create", [False, True])
def test_a_foreign_sqlite_file_is_refused_byte_for_byte_unchanged(tmp_path, create):
    app = tmp_path / "app.db"
    make_foreign(app)
    before = files_of(tmp_path)
    with pytest.raises(kbcite.NotAStore) as info:
        KBStore(str(app), create=create)
    assert "another application's SQLite database" in info.value.message
    assert "users" in info.value.message
    assert files_of(tmp_path) == before
    conn = sqlite3.connect(str(app))
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        conn.close()


def test_the_server_and_the_cli_refuse_a_foreign_file_in_one_line(tmp_path):
    app = tmp_path / "app.db"
    make_foreign(app)
    before = files_of(tmp_path)
    for argv in (("-m", "kbcite.server", "--db", app, "--grant", KB),
                 (ROOT / "kb_store.py", "--db", app, "list", KB),
                 (ROOT / "kb_store.py", "--db", app, "events", KB),
                 (ROOT / "kb_store.py", "--db", app, "init", KB)):
        done = run(*argv)
        assert done.returncode != 0
        assert done.stdout == ""
        assert "Traceback" not in done.stderr
        assert "not a knowledge-base store" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) <= 3, done.stderr  # usage + the one line
        assert files_of(tmp_path) == before


def test_an_empty_file_is_not_turned_into_a_store_except_by_init(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(kbcite.NotAStore, match="empty database"):
        KBStore(str(empty))
    for argv in (("-m", "kbcite.server", "--db", empty, "--grant", KB),
                 (ROOT / "kb_store.py", "--db", empty, "list", KB)):
        done = run(*argv)
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert "empty database" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt"]
    assert empty.stat().st_size == 0
    done = run(ROOT / "kb_store.py", "--db", empty, "init", KB)
    assert done.returncode == 0, done.stderr
    with KBStore(str(empty)) as store:
        assert store.knowledge_base_exists(KB)


def test_a_missing_file_is_created_only_on_request(tmp_path):
    path = tmp_path / "new.db"
    with pytest.raises(kbcite.NotAStore, match="no knowledge-base store"):
        KBStore(str(path))
    assert not path.exists()
    with KBStore(str(path), create=True) as store:
        store.create_knowledge_base(KB)
    conn = sqlite3.connect(str(path))
    try:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_a_store_made_before_the_application_id_still_opens(tmp_path):
    path = tmp_path / "old.db"
    with KBStore(str(path), create=True) as store:
        store.create_knowledge_base(KB)
    conn = sqlite3.connect(str(path))
    conn.execute("PRAGMA application_id = 0")
    conn.commit()
    conn.close()
    with KBStore(str(path)) as store:
        assert store.knowledge_base_exists(KB)


# -- 2. opening and reading never wait for a writer ---------------------------------------------


OPEN_AND_READ = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
started = time.perf_counter()
from kbcite import KBStore
with KBStore(sys.argv[1]) as store:
    opened = time.perf_counter() - started
    granted = {"kb-main"}
    events = store.call_tool("poll_resource_events", {"resource_type": "knowledge_base",
                             "resource_id": "kb-main"}, granted=granted)
    found = store.call_tool("search_knowledge_base", {"knowledge_base_id": "kb-main",
                            "query": "refund"}, granted=granted)
    listed = store.list_articles("kb-main")
print(json.dumps({"opened": opened, "took": time.perf_counter() - started,
                  "events": len(events["events"]), "hits": len(found["results"]),
                  "listed": len(listed)}))
"""


def test_opening_and_reading_go_on_while_another_process_holds_the_write_lock(
        tmp_path, hold_write_lock):
    path = str(tmp_path / "kb.db")
    with KBStore(path, create=True) as store:
        store.create_knowledge_base(KB)
        store.create_article(KB, "Refund policy", "Refunds take five days.")
    with hold_write_lock(path):
        reader = run("-c", OPEN_AND_READ, path, ROOT, timeout=60)
        assert reader.returncode == 0, reader.stderr
        got = json.loads(reader.stdout)
        assert (got["events"], got["hits"], got["listed"]) == (1, 1, 1)
        # The store's busy timeout is 30 s: waiting on the lock would show as seconds.
        assert got["took"] < 1.0, got
        listing = run(ROOT / "kb_store.py", "--db", path, "list", KB, timeout=60)
        assert listing.returncode == 0 and "Refund policy" in listing.stdout
        # A write, by contrast, does wait for the lock, and says so when it gives up.
        with KBStore(path, timeout=0.2) as store:
            with pytest.raises(kbcite.StoreBusy) as info:
                store.create_article(KB, "Blocked", "x")
            assert info.value.details["retryable"] is True
            error = error_of(store, "edit_knowledge_article", {
                "knowledge_base_id": KB, "article_id": "art-000001", "content": "new",
                "expected_version": call(store, "read_knowledge_article", knowledge_base_id=KB,
                                         article_id="art-000001")["updated_at"],
                "idempotency_key": "k1"})
            assert error.code == "store_busy" and "same idempotency_key" in error.message
    with KBStore(path) as store:
        assert store.create_article(KB, "Now free", "x") == "art-000002"


def test_a_server_starts_and_answers_while_the_write_lock_is_held(tmp_path, hold_write_lock):
    path = str(tmp_path / "kb.db")
    with KBStore(path, create=True) as store:
        store.create_knowledge_base(KB)
        store.create_article(KB, "Refund policy", "Refunds take five days.")
    with hold_write_lock(path):
        requests = "\n".join([
            '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
            '"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}',
            '{"jsonrpc":"2.0","method":"notifications/initialized"}',
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":'
            '"search_knowledge_base","arguments":{"knowledge_base_id":"kb-main","query":'
            '"refund"}}}', ""])
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "kbcite.server", "--db", path,
                               "--grant", KB], input=requests, capture_output=True, text=True,
                              timeout=60, cwd=str(ROOT))
        took = time.perf_counter() - started
        assert done.returncode == 0, done.stderr
        assert '"Refund policy"' in done.stdout
        assert took < 10, took  # not the 30 s of a wait on the lock


# -- 3. a damaged event log is an error, never an endless has_more ------------------------------


def damage_events(store, where):
    store._db._conn.execute("DELETE FROM events WHERE " + where)


def test_a_poll_across_missing_events_is_store_damaged_not_an_endless_loop(kb):
    for n in range(5):
        kb.create_article(KB, "Article %d" % n, "x")
    damage_events(kb, "sequence > 2")
    assert [e["sequence"] for e in poll(kb, limit=2)["events"]] == [1, 2]
    for after in (0, 2):
        error = error_of(kb, "poll_resource_events", {
            "resource_type": "knowledge_base", "resource_id": KB, "after_sequence": after})
        assert error.code == "store_damaged"
        assert error.details == {"knowledge_base_id": KB, "missing_sequence": 3,
                                 "head_sequence": 5, "retryable": False}
        assert "event 3 is missing" in error.message and repr(KB) in error.message
    assert any("missing sequence(s) 3, 4, 5" in p for p in kb.audit())


def test_a_hole_in_the_middle_of_the_log_is_found_at_the_hole(kb):
    for n in range(5):
        kb.create_article(KB, "Article %d" % n, "x")
    damage_events(kb, "sequence = 3")
    assert [e["sequence"] for e in poll(kb, limit=2)["events"]] == [1, 2]
    error = error_of(kb, "poll_resource_events", {
        "resource_type": "knowledge_base", "resource_id": KB, "after_sequence": 2})
    assert error.details["missing_sequence"] == 3
    assert [e["sequence"] for e in poll(kb, after_sequence=3)["events"]] == [4, 5]
    assert any("missing sequence(s) 3" in p for p in kb.audit())


def test_the_cli_events_command_stops_on_a_damaged_log(tmp_path):
    path = str(tmp_path / "kb.db")
    with KBStore(path, create=True) as store:
        store.create_knowledge_base(KB)
        for n in range(3):
            store.create_article(KB, "Article %d" % n, "x")
        damage_events(store, "sequence = 2")
    done = run(ROOT / "kb_store.py", "--db", path, "events", KB, timeout=30)
    assert done.returncode == 1
    assert "event 2 is missing" in done.stderr and "Traceback" not in done.stderr


# -- 4. every failure of call_tool is a ToolError ----------------------------------------------


def test_argument_names_that_are_not_strings_are_invalid_arguments(kb):
    error = error_of(kb, "search_knowledge_base", {"knowledge_base_id": KB, 7: "x", "query": "refund"})
    assert error.code == "invalid_argument" and error.details["argument"] == "arguments"
    assert "argument names must be strings" in error.message


@pytest.mark.parametrize("name,argument", [
    ("search_knowledge_base", "limit"), ("poll_resource_events", "after_sequence"),
    ("poll_resource_events", "limit")])
@pytest.mark.parametrize("sign", [1, -1])
def test_integers_of_thousands_of_digits_are_invalid_arguments(kb, name, argument, sign):
    arguments = {"search_knowledge_base": {"knowledge_base_id": KB, "query": "refund"},
                 "poll_resource_events": {"resource_type": "knowledge_base",
                                          "resource_id": KB}}[name]
    error = error_of(kb, name, dict(arguments, **{argument: sign * 10 ** 5000}))
    assert error.code == "invalid_argument" and error.details["argument"] == argument
    assert "5001 digits" in error.message and len(error.message) < 300


def test_a_full_disk_is_store_failed_and_writes_nothing(db_path, clock):
    with KBStore(db_path, clock=clock, create=True) as store:
        store.create_knowledge_base(KB)
        article_id = store.create_article(KB, "Small", "x")
        version = call(store, "read_knowledge_article", knowledge_base_id=KB,
                       article_id=article_id)["updated_at"]
        pages = store._db._conn.execute("PRAGMA page_count").fetchone()[0]
        store._db._conn.execute("PRAGMA max_page_count = %d" % pages)
        before = store._db.dump()
        error = error_of(store, "edit_knowledge_article", {
            "knowledge_base_id": KB, "article_id": article_id, "content": "y" * (MIB // 2),
            "expected_version": version, "idempotency_key": "big"})
        assert error.code == "store_failed" and error.details["retryable"] is True
        assert "full" in error.message
        assert store._db.dump() == before
        store._db._conn.execute("PRAGMA max_page_count = 1073741823")
        done = call(store, "edit_knowledge_article", knowledge_base_id=KB, article_id=article_id,
                    content="y" * (MIB // 2), expected_version=version, idempotency_key="big")
        assert done["replayed"] is False


def test_a_search_index_that_names_missing_rows_is_store_damaged(kb):
    for title in ("Refund policy", "Refund window", "Shipping"):
        kb.create_article(KB, title, "About refunds and more.")
    # Around the foreign keys, as damage would be.
    if kb.engine == "sqlite":
        kb._db._conn.execute("PRAGMA foreign_keys = OFF")
    else:
        kb._db._conn.execute("SET session_replication_role = replica")
    kb._db._conn.execute("DELETE FROM articles WHERE article_id = 'art-000001'")
    error = error_of(kb, "search_knowledge_base", {"knowledge_base_id": KB,
                                                   "query": "refund policy"})
    assert error.code == "store_damaged" and error.details["retryable"] is False
    assert repr(KB) in error.message and "kb reindex %s" % KB in error.message
    assert kb.audit()
    # What the message asks for mends the search: the index is made from the articles there are.
    kb.rebuild_index(KB)
    found = call(kb, "search_knowledge_base", knowledge_base_id=KB, query="refund policy")
    assert [hit["title"] for hit in found["results"]] == ["Refund window"]


def test_a_fault_inside_a_tool_is_an_internal_error_tool_error(kb, monkeypatch):
    def broken(*args):
        raise KeyError("bug")
    monkeypatch.setitem(kb._handlers, "read_knowledge_article", broken)
    error = error_of(kb, "read_knowledge_article", {"knowledge_base_id": KB,
                                                    "article_id": "art-000001"})
    assert error.code == "internal_error" and "KeyError" in error.message


def test_preview_edit_raises_only_tool_errors(kb):
    with pytest.raises(ToolError) as info:
        kb.preview_edit({1: 2}, granted=GRANTED)
    assert info.value.code == "invalid_argument"


# -- 5. a draft and a missing article cost the caller the same ----------------------------------


def statements_of(store, action):
    """The SQL statements the store runs for ``action`` (a function of the store)."""
    seen, execute = [], store._db.execute

    def recording(sql, params=()):
        seen.append(sql)
        return execute(sql, params)
    store._db.execute = recording
    try:
        action(store)
    finally:
        del store._db.execute
    return seen


def test_a_draft_is_refused_without_reading_its_content(kb):
    draft = kb.create_article(KB, "Secret plan", "s" * MIB, published=False)
    missing = "art-%06d" % 999

    def read(article_id):
        def action(store):
            with pytest.raises(kbcite.NotFound) as info:
                call(store, "read_knowledge_article", knowledge_base_id=KB,
                     article_id=article_id)
            return info.value
        return action

    on_draft = statements_of(kb, read(draft))
    on_missing = statements_of(kb, read(missing))
    # The same statements run for both (the ID is bound, not in the text), and none reads
    # content.
    assert on_draft == on_missing and len(on_draft) >= 2
    assert not any("content" in s for s in on_draft)
    d, m = read(draft)(kb), read(missing)(kb)
    assert d.message.replace(draft, "X") == m.message.replace(missing, "X")


def test_an_edit_of_a_draft_is_refused_without_reading_its_content(kb):
    draft = kb.create_article(KB, "Secret plan", "s" * MIB, published=False)
    version = kb.get_article(KB, draft)["updated_at"]

    def edit(store):
        with pytest.raises(kbcite.NotFound):
            call(store, "edit_knowledge_article", knowledge_base_id=KB, article_id=draft,
                 content="x", expected_version=version, idempotency_key="k")
    assert not any("content" in s.split("FROM")[0] for s in statements_of(kb, edit)
                   if s.startswith("SELECT"))


# -- 6. blank means no visible character -------------------------------------------------------


@pytest.mark.parametrize("title", ["\u200b", "\u200b\u200b\u200b", " \u00a0\u2003", "\ufeff",
                                   "\u2060\u200d", "\t\n", "\u3000", "\u202e\u200b"])
def test_a_title_of_only_invisible_characters_is_blank(kb, title):
    with pytest.raises(kbcite.InvalidArgument, match="blank"):
        kb.create_article(KB, title, "content")
    article_id = kb.create_article(KB, "Visible", "content")
    with pytest.raises(kbcite.InvalidArgument, match="blank"):
        kb.save_article(KB, article_id, title=title)
    version = kb.get_article(KB, article_id)["updated_at"]
    error = error_of(kb, "edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": article_id, "content": "new", "title": title,
        "expected_version": version, "idempotency_key": "k-%d" % len(title)})
    assert error.code == "invalid_argument" and error.details["argument"] == "title"


@pytest.mark.parametrize("title", ["\u200bA", "a\u200b", "\u0915", "\u0301x", "-"])
def test_a_title_with_one_visible_character_is_not_blank(kb, title):
    assert kb.create_article(KB, title, "content").startswith("art-")


def test_is_blank_follows_the_unicode_categories():
    assert is_blank("")
    assert is_blank("\u200b\u2028\u2029\x00\x7f")
    assert not is_blank("\u200b.")
    assert not is_blank("\U0001F600")
