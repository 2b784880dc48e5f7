"""Real processes on one store, on each engine: racing edits, writers killed with SIGKILL,
and (PostgreSQL) the database server itself stopped abruptly under a write workload."""

import random
import re
import signal
import time

import pytest

from kbcite import KBStore
from support.workers import KB, LINE_TIMEOUT_S, Worker, check_consistent


@pytest.fixture
def shared(engine, tmp_path, request):
    """The address of a new store that several processes open: a file, or a PostgreSQL schema."""
    if engine == "sqlite":
        return str(tmp_path / "shared.db")
    return request.getfixturevalue("pg_url")


@pytest.mark.parametrize("workers,rounds", [(8, 4)])
def test_racing_edits_one_winner_per_version(shared, workers, rounds):
    db = shared
    with KBStore(db, create=True) as store:
        store.create_knowledge_base(KB)
        article_id = store.create_article(KB, "Race", "start")
        initial = store.get_article(KB, article_id)["updated_at"]
    pool = [Worker("race", db, KB, article_id, "w%d" % i) for i in range(workers)]
    attempts = []
    try:
        for worker in pool:
            assert worker.read() == "ready"
        with KBStore(db) as store:
            for round_ in range(rounds):
                current = store.get_article(KB, article_id)
                job = {"round": round_, "version": current["updated_at"],
                       "content": current["content"]}
                for worker in pool:
                    worker.send(job)
                replies = [worker.read() for worker in pool]
                first_tries = [reply[0] for reply in replies]
                # All started from the same version: exactly one wins it, the rest conflict.
                assert [a["code"] for a in first_tries].count("ok") == 1
                assert all(a["code"] in ("ok", "version_conflict") for a in first_tries)
                # Every worker got its line in eventually, through re-reads.
                assert all(reply[-1]["code"] == "ok" for reply in replies)
                attempts.extend(a for reply in replies for a in reply)
    finally:
        for worker in pool:
            worker.stop()

    accepted = sorted((a for a in attempts if a["code"] == "ok"), key=lambda a: a["sequence"])
    rejected = [a for a in attempts if a["code"] != "ok"]
    assert len(accepted) == workers * rounds
    assert rejected and all(a["code"] == "version_conflict" for a in rejected)
    # One winner per version: the accepted edits form a single chain from the first version.
    assert [a["previous_version"] for a in accepted] == (
        [initial] + [a["updated_at"] for a in accepted[:-1]])
    won = {a["previous_version"]: a for a in accepted}
    for a in rejected:
        # each loser had read a version that a winner had already replaced, and its conflict
        # carried the change since: enough to rebuild the current text without reading it
        assert a["expected"] in won and a["current"] != a["expected"]
        assert a["current"] > a["expected"]
        assert a["rebuilt"] in (True, None)
    assert any(a["rebuilt"] is True for a in rejected)

    events, articles = check_consistent(db)
    assert [(e["type"], e["updated_at"]) for e in events] == (
        [("article.published", initial)]
        + [("article.updated", a["updated_at"]) for a in accepted])
    assert [e["sequence"] for e in events[1:]] == [a["sequence"] for a in accepted]
    content = articles[article_id]["content"]
    assert content.split("\n") == ["start"] + [a["line"] for a in accepted]
    # The history is the accepted edits in order, each with its event and its writer.
    with KBStore(db) as store:
        versions = store.history(KB, article_id)
    assert [(v["action"], v["updated_at"], v["sequence"]) for v in versions] == (
        [("create", initial, 1)] + [("edit", a["updated_at"], a["sequence"]) for a in accepted])
    assert [v["actor"] for v in versions[1:]] == [a["line"].split()[0] for a in accepted]
    assert [(v["event"], v["updated_at"]) for v in versions] == [
        (e["type"], e["updated_at"]) for e in events]
    for a in rejected:
        assert a["line"] not in content.split("\n")


LINE = re.compile(r"^w\d+ op \d+$")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_writer_killed_mid_stream_leaves_a_consistent_store(shared):
    db = shared
    # Long articles make every write re-index a lot of text, so kills land mid-transaction.
    filler = " ".join("word%d" % (i % 997) for i in range(12000))
    with KBStore(db, create=True) as store:
        store.create_knowledge_base(KB)
        for i in range(3):
            store.create_article(KB, "Streamed %d" % i, filler)
    rng = random.Random(20261108)
    reported = []
    kills = 6
    for k in range(kills):
        worker = Worker("stream", db, KB, "w%d" % k)
        try:
            assert worker.read() == "ready"
            for _ in range(rng.randint(2, 12)):
                reported.append(worker.read())
            time.sleep(rng.random() * 0.02)
            worker.proc.send_signal(signal.SIGKILL)
            worker.proc.wait(timeout=LINE_TIMEOUT_S)
            assert worker.proc.returncode == -signal.SIGKILL
            # whatever it printed before dying was committed too
            reported.extend(worker.drain())
        finally:
            worker.stop()

    events, articles = check_consistent(db)
    logged = {(e["article_id"], e["updated_at"]): e["type"] for e in events}
    kinds = {"edit": "article.updated", "save": "article.updated",
             "publish": "article.published", "unpublish": "article.unpublished"}
    assert {r["op"] for r in reported} >= {"edit", "save", "unpublish"}
    for r in reported:
        # nothing a writer saw committed was lost
        assert logged.get((r["article_id"], r["updated_at"])) == kinds[r["op"]], r
    lines = {aid: [l for l in art["content"].split("\n") if LINE.match(l)]
             for aid, art in articles.items()}
    for r in reported:
        if "line" in r:
            assert r["line"] in lines[r["article_id"]]
    # At most the one write in flight per kill committed without being reported.
    reported_lines = {r["line"] for r in reported if "line" in r}
    unreported = [l for found in lines.values() for l in found if l not in reported_lines]
    assert len(unreported) <= kills
    for found in lines.values():
        assert len(found) == len(set(found))
    # Writes by one process appear in the order it made them.
    for found in lines.values():
        keys = [tuple(int(n) for n in re.findall(r"\d+", l)) for l in found]
        assert keys == sorted(keys)
    # and the store is still writable afterwards
    with KBStore(db) as store:
        aid = sorted(articles)[0]
        if not articles[aid]["published"]:
            store.publish(KB, aid)
        store.save_article(KB, aid, content="after the kills")
    check_consistent(db)


def test_the_database_server_stopped_abruptly_loses_no_confirmed_edit(postgres, pg_url):
    """PostgreSQL killed (pg_ctl stop -m immediate) under a writer, then started again."""
    cluster, _ = postgres
    if cluster is None:
        pytest.skip("needs a PostgreSQL cluster this session started (KB_TEST_POSTGRES_URL "
                    "names a server the tests must not stop)")
    with KBStore(pg_url, create=True) as store:
        store.create_knowledge_base(KB)
        for i in range(3):
            store.create_article(KB, "Edited %d" % i, "start")
    worker = Worker("retry", pg_url, KB, "w0")
    reported = []
    try:
        assert worker.read() == "ready"
        while len([r for r in reported if "op" in r]) < 20:
            reported.append(worker.read())
        cluster.stop("immediate")  # as a crash: no shutdown checkpoint, connections cut
        # The lines queued first were written before the stop; read on until the worker says
        # why it fails (it keeps trying), then see it fail twice more.
        outage = []
        while not any("error" in r for r in outage):
            assert len(outage) < 100000, "the outage was not noticed"
            outage.append(worker.read())
        outage += [worker.read() for _ in range(2)]
        cluster.start()
        reported += outage
        while len([r for r in reported if "op" in r]) < 40:
            reported.append(worker.read())
    finally:
        if worker.proc.poll() is None:
            worker.proc.kill()
        # The worker writes on while the test reads: every line it printed before the kill
        # counts, so that only the one edit in flight at the kill may be unreported.
        reported += worker.drain()
        stderr = worker.proc.stderr.read()
        worker.stop()
        if cluster.run(cluster.pg_ctl, "-D", cluster.data, "status", check=False).returncode:
            cluster.start()
    assert "Traceback" not in stderr, stderr
    errors = [r for r in reported if "error" in r]
    assert all(r["error"] in ("store_failed", "store_busy") and r["retryable"] is True
               for r in errors), errors
    assert [r for r in outage if "error" in r], "the outage was not noticed"
    edits = [r for r in reported if "op" in r]
    events, articles = check_consistent(pg_url)
    logged = {(e["article_id"], e["updated_at"]) for e in events}
    lines = [l for art in articles.values() for l in art["content"].split("\n") if LINE.match(l)]
    # Every confirmed edit is there, each exactly once, replays included (a call whose commit
    # landed before the connection died comes back as a replay of it, never a second write).
    for r in edits:
        assert (r["article_id"], r["updated_at"]) in logged, r
        assert lines.count(r["line"]) == 1, r
    assert len(lines) == len(set(lines))
    assert set(lines) <= {r["line"] for r in edits} | {"w0 op %d" % len(edits)}
