"""A cancelled call writes nothing: the cancellation is looked at once a write holds its lock
and again just before its commit, so a cancel that arrives while the write waits for the lock,
or while it writes, rolls it back; the caller is told (no response for a call stopped, the
result for one that finished first).

The HTTP app is spoken to in process (2026-07-28: the client closing its connection is the
cancellation), on each engine, with a hook that delivers the cancel exactly while the edit's
transaction holds the lock; a stress run repeats it, with cancels at random moments and the
machine loaded, and holds the promise each time.
"""

import asyncio
import json
import multiprocessing
import os
import random
import threading
import time

import pytest

pytest.importorskip("uvicorn")

import kbcite  # noqa: E402
from kbcite import articles  # noqa: E402
from kbcite.server.http.app import McpApp  # noqa: E402
from kbcite.server.http.settings import Settings  # noqa: E402

KB = "support"
MODERN = "2026-07-28"
EDIT = "edit_knowledge_article"
# How long a test waits for what a healthy run reaches at once.
PATIENCE_S = 30


@pytest.fixture(params=["sqlite", "postgresql"])
def address(request, tmp_path):
    """A store with one article, on each engine; its address."""
    where = str(tmp_path / "kb.db") if request.param == "sqlite" else \
        request.getfixturevalue("pg_url")
    with kbcite.KBStore(where, create=True) as store:
        store.create_knowledge_base(KB)
        store.create_article(KB, "Refunds", "Refunds take five days.")
    return where


def served(address, writes="allow"):
    """The HTTP app on the store, every call on a worker thread (none tried on the event
    loop, where a hook that waits would hold it), and a token whose edits are ``writes``."""
    with kbcite.KBStore(address) as store:
        token = store.tokens.create("agent-%s" % writes, [KB], writes)
    app = McpApp(Settings(db=address, signing_secret=b"s" * 32))
    app.local_reads = False
    app.token = token
    return app


async def post(app, params, request_id, gone=None):
    """One 2026-07-28 tools/call through the app; ``(status, body or None)``. Where ``gone``
    (an asyncio.Event) is set, the client goes away: the request's cancellation."""
    params = dict(params, _meta={"io.modelcontextprotocol/protocolVersion": MODERN,
                                 "io.modelcontextprotocol/clientCapabilities": {}})
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": params}).encode()
    headers = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
               (b"accept", b"application/json, text/event-stream"),
               (b"authorization", ("Bearer " + app.token).encode()),
               (b"mcp-protocol-version", MODERN.encode()), (b"mcp-method", b"tools/call"),
               (b"mcp-name", params["name"].encode()), (b"content-length", b"%d" % len(body))]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "root_path": "",
             "scheme": "http", "headers": headers, "client": ("127.0.0.1", 50000),
             "server": ("127.0.0.1", 8000)}
    inbox = [{"type": "http.request", "body": body, "more_body": False}]
    sent = []

    async def receive():
        if inbox:
            return inbox.pop()
        if gone is None:
            await asyncio.Event().wait()
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    if not sent:
        return None, None
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(data) if data else None


def current(address):
    with kbcite.KBStore(address) as store:
        [row] = store.list_articles(KB)
        return row["article_id"], row["updated_at"], len(store.history(KB, row["article_id"]))


def edit_params(article_id, version, key):
    return {"name": EDIT, "arguments": {
        "knowledge_base_id": KB, "article_id": article_id, "content": "Refunds take %s." % key,
        "expected_version": version, "idempotency_key": key}}


def test_a_cancel_while_the_edit_holds_the_lock_writes_nothing(address, monkeypatch):
    """The client goes away exactly while the edit's transaction holds the lock (a hook in
    the write waits for the cancellation to reach it): nothing is committed, no response."""
    app = served(address)
    article_id, version, versions = current(address)
    write = articles.write
    reached = threading.Event()

    def held(ctx, *args, **kwargs):
        done = write(ctx, *args, **kwargs)
        reached.set()
        assert ctx.db.interrupted.wait(PATIENCE_S), "the cancellation never reached the edit"
        return done
    monkeypatch.setattr(articles, "write", held)

    async def run():
        gone = asyncio.Event()
        answer = asyncio.ensure_future(post(app, edit_params(article_id, version, "gone"), 1,
                                            gone))
        while not reached.is_set():
            await asyncio.sleep(0.005)
        gone.set()  # the client closes its connection
        return await answer
    try:
        status, reply = asyncio.run(run())
        assert reply is None, reply  # no response: 202 and no body, to a client gone anyway
    finally:
        app.close()
    assert current(address) == (article_id, version, versions)


def test_an_edit_that_finished_before_the_cancel_is_answered(address, monkeypatch):
    """A cancel that comes after the commit is too late: the edit was written, and the caller
    hears so (the response is sent, not dropped)."""
    app = served(address)
    article_id, version, versions = current(address)

    async def run():
        gone = asyncio.Event()
        answer = await post(app, edit_params(article_id, version, "kept"), 1, gone)
        gone.set()
        return answer
    try:
        status, reply = asyncio.run(run())
    finally:
        app.close()
    assert status == 200 and reply["result"]["structuredContent"]["changed"] is True
    assert current(address)[2] == versions + 1


# -- the stress run ----------------------------------------------------------------------------


def _burn(stop):
    while not stop.is_set():
        sum(i * i for i in range(10000))


@pytest.mark.slow
def test_fifty_cancelled_edits_under_load_each_write_nothing_or_are_answered(address):
    """Fifty edits, each waiting for another connection's lock, cancelled at a random moment
    (while it waits, just as the lock comes free, after it finished) while two processes keep
    every processor busy: each one either wrote nothing and was not answered, or was written
    and answered; never written and unanswered."""
    app = served(address)
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_burn, args=(stop,), daemon=True)
               for _ in range(max(2, os.cpu_count() or 2))]
    for burner in burners:
        burner.start()
    rng = random.Random(50)
    outcomes = {"written and answered": 0, "nothing written, not answered": 0}
    try:
        for round_ in range(50):
            article_id, version, versions = current(address)
            holder = kbcite.KBStore(address)
            holder_writing = holder._db.write()
            holder_writing.__enter__()
            holder._db.lock_kb(KB)

            async def run():
                gone = asyncio.Event()
                answer = asyncio.ensure_future(post(
                    app, edit_params(article_id, version, "r%d" % round_), round_, gone))
                await asyncio.sleep(rng.uniform(0, 0.2))
                release_first = rng.random() < 0.5
                if release_first:
                    holder_writing.__exit__(None, None, None)
                    await asyncio.sleep(rng.uniform(0, 0.01))
                gone.set()
                if not release_first:
                    await asyncio.sleep(rng.uniform(0, 0.05))
                    holder_writing.__exit__(None, None, None)
                return await asyncio.wait_for(answer, PATIENCE_S)
            try:
                status, reply = asyncio.run(run())
            finally:
                holder.close()
            now = current(address)
            if reply is None:
                assert now == (article_id, version, versions), "round %d: written, no answer" \
                    % round_
                outcomes["nothing written, not answered"] += 1
            else:
                assert status == 200 and now[2] == versions + 1, (round_, reply)
                outcomes["written and answered"] += 1
    finally:
        stop.set()
        for burner in burners:
            burner.join(5)
        app.close()
    assert sum(outcomes.values()) == 50
    assert outcomes["nothing written, not answered"] > 0, outcomes
