"""Where the HTTP app serves a request, spoken to in process as an ASGI server would: on the
event loop (a quick 2026-07-28 read, on a store whose reads wait for nothing, whatever else is
in progress) or on a worker thread (everything else, so that a wait for a lock never holds the
loop); and the threads' results handed back to the loop in one wake-up when they finish
together."""

import asyncio
import json
import sqlite3
import threading
import time

import pytest

pytest.importorskip("uvicorn")

import kbcite  # noqa: E402
from kbcite.server.http.app import McpApp  # noqa: E402
from kbcite.server.pool import StorePool  # noqa: E402
from kbcite.server.http.settings import Settings  # noqa: E402
from kbcite.server.http.threads import Threads  # noqa: E402
from support.stdio_client import make_db  # noqa: E402

MODERN = "2026-07-28"
# How long a test waits for worker threads to reach a state (never reached on a healthy run).
PATIENCE_S = 30


def recording_app(tmp_path, writes):
    """The app on a SQLite store, with a token whose edits are in ``writes`` mode, and where
    each call was served: the name of the thread ``dispatch.serve`` ran on, in order."""
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        token = store.tokens.create(writes, ["support"], writes)
    served = McpApp(Settings(db=str(made.path), signing_secret=b"s" * 32))
    served.token, served.made, served.ran_on = token, made, []
    serve = served.dispatch.serve

    def recorded(*args, **kwargs):
        served.ran_on.append(threading.current_thread().name)
        return serve(*args, **kwargs)
    served.dispatch.serve = recorded
    return served


@pytest.fixture
def app(tmp_path):
    """``recording_app`` with a token that may edit."""
    served = recording_app(tmp_path, "allow")
    yield served
    served.close()


async def post(app, method, params=None, modern=True, request_id=1, session=None):
    """One POST through the app; returns (status, the JSON body or None, headers)."""
    params = dict(params or {})
    headers = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
               (b"accept", b"application/json, text/event-stream"),
               (b"authorization", ("Bearer " + app.token).encode())]
    if modern:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientCapabilities": {}}
        headers += [(b"mcp-protocol-version", MODERN.encode()), (b"mcp-method", method.encode())]
        if method == "tools/call":
            headers.append((b"mcp-name", params["name"].encode()))
    if session is not None:
        headers.append((b"mcp-session-id", session.encode()))
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                       "params": params}).encode()
    headers.append((b"content-length", b"%d" % len(body)))
    scope = {"type": "http", "method": "POST", "path": "/mcp", "root_path": "",
             "scheme": "http", "headers": headers, "client": ("127.0.0.1", 50000)}
    inbox = [{"type": "http.request", "body": body, "more_body": False}]
    sent = []

    async def receive():
        if inbox:
            return inbox.pop()
        await asyncio.Event().wait()  # the client stays connected

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(data) if data else None, dict(sent[0]["headers"])


def read(article_id):
    return {"name": "read_knowledge_article",
            "arguments": {"knowledge_base_id": "support", "article_id": article_id}}


async def read_then_edit(app, content, key):
    """Read the billing article, then edit it with the version read; the edit succeeds."""
    _, reply, _ = await post(app, "tools/call", read(app.made.billing))
    version = reply["result"]["structuredContent"]["updated_at"]
    status, reply, _ = await post(app, "tools/call", {
        "name": "edit_knowledge_article", "arguments": {
            "knowledge_base_id": "support", "article_id": app.made.billing, "content": content,
            "expected_version": version, "idempotency_key": key}})
    assert status == 200 and not reply["result"].get("isError"), reply


def test_a_store_file_reads_without_waiting_so_the_app_may_serve_in_place(app):
    with kbcite.KBStore(str(app.made.path)) as store:
        assert "local_reads" in store.capabilities
    assert app.local_reads


def test_a_quick_read_alone_is_served_on_the_event_loop(app):
    async def calls():
        status, reply, _ = await post(app, "tools/call", read(app.made.password))
        assert status == 200 and not reply["result"].get("isError")
        assert reply["result"]["structuredContent"]["article_id"] == app.made.password
        status, reply, _ = await post(app, "server/discover")
        assert status == 200 and "result" in reply
        return threading.current_thread().name
    loop_thread = asyncio.run(calls())
    assert app.ran_on == [loop_thread, loop_thread]


def test_an_edit_alone_is_served_on_the_loop_and_a_handshake_session_on_threads(app):
    async def calls():
        await read_then_edit(app, "Invoices are emailed on the second.", "inplace-1")
        status, reply, headers = await post(app, "initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}, modern=False)
        assert status == 200 and "result" in reply
        status, reply, _ = await post(app, "tools/call", read(app.made.password), modern=False,
                                      request_id=2,
                                      session=headers[b"Mcp-Session-Id"].decode())
        assert status == 200 and not reply["result"].get("isError"), reply
        return threading.current_thread().name
    loop_thread = asyncio.run(calls())
    # The read, then the edit (nothing else in progress, the lock free), on the loop.
    assert app.ran_on[:2] == [loop_thread, loop_thread]
    assert len(app.ran_on) == 4 and loop_thread not in app.ran_on[2:]


def test_the_loop_checks_tokens_reads_and_edits_on_one_connection_of_its_own(app, monkeypatch):
    """A connection's page cache starts over once another commits: what the loop serves
    (the token check, the read, the edit) shares its own connection; a thread's call does
    not."""
    used = []
    call_tool, principal = kbcite.KBStore.call_tool, kbcite.tokens.Tokens.principal

    def recorded_call(store, name, *args, **kwargs):
        used.append((name, store._ctx))
        return call_tool(store, name, *args, **kwargs)

    def recorded_check(tokens, token):
        used.append(("token", tokens._ctx))
        return principal(tokens, token)
    monkeypatch.setattr(kbcite.KBStore, "call_tool", recorded_call)
    monkeypatch.setattr(kbcite.tokens.Tokens, "principal", recorded_check)

    async def calls():
        await read_then_edit(app, "Invoices are emailed on the third.", "own-1")
        await post(app, "tools/call", read(app.made.billing), request_id=2)
        app.local_reads = False  # now on a thread, from the pools
        await post(app, "tools/call", read(app.made.billing), request_id=3)
    asyncio.run(calls())
    names = [name for name, _ in used]
    assert names == ["token", "read_knowledge_article", "token", "edit_knowledge_article",
                     "token", "read_knowledge_article", "token", "read_knowledge_article"]
    loop = {id(ctx) for _, ctx in used[:6]}
    assert len(loop) == 1
    assert id(used[7][1]) not in loop and id(used[6][1]) not in loop


def test_the_threads_own_connection_is_never_lent_twice_at_once(tmp_path):
    made = make_db(tmp_path / "kb.db")
    pool = StorePool(str(made.path), readers=1, writers=1)
    try:
        with pool.in_place():
            with pool.writing("support", {"support"}) as edit:
                with pool.reading() as read:
                    assert read is not edit  # lent already: one of the pool's
            with pool.reading() as again:
                assert again is edit  # given back: the thread's own again
        with pool.reading() as outside:
            assert outside is not edit and outside is read
    finally:
        pool.close()
    with pytest.raises(Exception):
        edit.get_article("support", made.billing)  # closed with the pool


def test_quick_reads_begun_together_are_all_served_on_the_loop(app):
    async def calls():
        replies = await asyncio.gather(*(post(app, "tools/call", read(app.made.password),
                                              request_id=n) for n in range(4)))
        assert [status for status, _, _ in replies] == [200] * 4
        return threading.current_thread().name
    loop_thread = asyncio.run(calls())
    assert app.ran_on == [loop_thread] * 4


def test_a_store_whose_reads_may_wait_serves_them_on_threads(app):
    app.local_reads = False  # as on PostgreSQL, or with the semantic half's model
    async def calls():
        status, reply, _ = await post(app, "tools/call", read(app.made.password))
        assert status == 200 and not reply["result"].get("isError"), reply
        return threading.current_thread().name
    loop_thread = asyncio.run(calls())
    assert len(app.ran_on) == 1 and app.ran_on[0] != loop_thread


def test_an_edit_waiting_for_the_lock_leaves_the_loop_serving_reads(app):
    # Another process holds the store's write lock: the edit waits on its thread, and reads
    # begun meanwhile are answered on the loop before the lock is let go.
    def billing_versions():
        with kbcite.KBStore(str(app.made.path)) as store:
            return len(store.history("support", app.made.billing))
    versions_before = billing_versions()
    holder = sqlite3.connect(str(app.made.path), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    answered = []

    async def calls():
        status, reply, _ = await post(app, "tools/call", read(app.made.billing))
        version = reply["result"]["structuredContent"]["updated_at"]
        edit = asyncio.ensure_future(post(app, "tools/call", {
            "name": "edit_knowledge_article", "arguments": {
                "knowledge_base_id": "support", "article_id": app.made.billing,
                "content": "Invoices are emailed on the third.", "expected_version": version,
                "idempotency_key": "inplace-wait"}}, request_id=2))
        deadline = time.monotonic() + PATIENCE_S
        while len(app.ran_on) < 2 and time.monotonic() < deadline:  # the edit has begun
            await asyncio.sleep(0.01)
        for n in range(3):
            status, reply, _ = await post(app, "tools/call", read(app.made.password),
                                          request_id=10 + n)
            assert status == 200 and not reply["result"].get("isError"), reply
            answered.append(edit.done())
        holder.execute("ROLLBACK")
        status, reply, _ = await edit
        assert status == 200 and not reply["result"].get("isError"), reply
        return threading.current_thread().name
    try:
        loop_thread = asyncio.run(calls())
    finally:
        holder.close()
    assert answered == [False] * 3  # every read answered while the edit still waited
    # The edit was tried on the loop, found the lock held, and went to a thread, where it
    # waited; it was written once.
    assert app.ran_on[1] == loop_thread and app.ran_on[2] != loop_thread
    assert app.ran_on[3:] == [loop_thread] * 3
    assert billing_versions() == versions_before + 1


def test_results_finished_together_reach_the_loop_in_one_wake_up():
    threads = Threads(4, "test-threads")
    drains = []
    drain = threads._drain

    def counted(loop):
        drains.append(loop)
        drain(loop)
    threads._drain = counted
    gate = threading.Event()

    def work(n):
        gate.wait(PATIENCE_S)
        if n == 3:
            raise ValueError("the fourth fails")
        return n

    async def main():
        loop = asyncio.get_running_loop()
        futures = [threads.run(loop, work, n) for n in range(4)]
        gate.set()
        # The loop is held here until every result is queued for it: one drain settles all.
        deadline = time.monotonic() + PATIENCE_S
        while len(threads._done.get(loop, [[]])[0]) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        return await asyncio.gather(*futures, return_exceptions=True)
    results = asyncio.run(main())
    assert results[:3] == [0, 1, 2] and isinstance(results[3], ValueError)
    assert len(drains) == 1
    threads.close()


@pytest.mark.parametrize("mode", ["ask", "review"])
def test_an_edit_a_person_must_see_is_not_tried_on_the_loop(tmp_path, mode):
    # Writes mode ask (an approval) or review (the queue): never on the loop, even alone.
    served = recording_app(tmp_path, mode)
    made = served.made
    try:
        async def calls():
            status, reply, _ = await post(served, "tools/call", read(made.billing))
            version = reply["result"]["structuredContent"]["updated_at"]
            status, reply, _ = await post(served, "tools/call", {
                "name": "edit_knowledge_article", "arguments": {
                    "knowledge_base_id": "support", "article_id": made.billing,
                    "content": "Invoices are emailed on the fourth.",
                    "expected_version": version, "idempotency_key": "inplace-" + mode}},
                request_id=2)
            assert status == 200, reply
            return threading.current_thread().name, reply
        loop_thread, reply = asyncio.run(calls())
    finally:
        served.close()
    # Tried on the loop, refused there before anything ran, then served on a thread.
    assert served.ran_on[:2] == [loop_thread, loop_thread]
    assert len(served.ran_on) == 3 and served.ran_on[2] != loop_thread
    assert "result" in reply
