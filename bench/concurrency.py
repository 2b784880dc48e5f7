"""Concurrent edits: 1, 2, 4 and 8 writer processes, on each engine, in two layouts.

- ``one``: every process edits the same few articles of one knowledge base: the writers of a
  knowledge base take turns (SQLite's file lock, PostgreSQL's row lock on the knowledge base),
  and conflicts grow with the writers.
- ``separate``: each process edits its own knowledge base in the same store. SQLite still lets
  one writer into the file at a time; PostgreSQL lets the writers of different knowledge bases
  run side by side, since its serial point is the knowledge base's row.

Each process loops for a fixed time: pick one of its articles, read it, and edit it with the
version it read, appending a line unique to this process and attempt. On a
``version_conflict`` it re-reads and retries the same line (with a new idempotency key), as
an agent should. Afterwards the run is audited: ``store.audit()`` finds nothing, each
knowledge base's event count is its initial count plus its accepted edits, and every
accepted line is in its article's final content exactly once, at the version its edit
reported.
"""

import multiprocessing
import random
import shutil
import tempfile
import time

import common
import corpus
from kbcite import KBStore, VersionConflict

KB = "bench"
SEED = 20261108
LAYOUTS = ("one", "separate")
# In the separate layout each process has a knowledge base of its own, this size.
SEPARATE_ARTICLES = 200


def worker(path, kb, article_ids, name, seconds, barrier, results):
    """One writer process: edit until the deadline; put (counts, accepted edits) on ``results``."""
    rng = random.Random("%s-%d" % (name, SEED))
    granted = {kb}
    accepted, conflicts, attempts = [], 0, 0
    with KBStore(path) as store:
        barrier.wait()  # every process starts its clock together
        deadline = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < deadline:
            article_id = article_ids[min(int(rng.random() * len(article_ids)),
                                         len(article_ids) - 1)]
            line = "%s edit %d" % (name, n)
            n += 1
            for retry in range(1000):
                current = store.call_tool("read_knowledge_article", {
                    "knowledge_base_id": kb, "article_id": article_id}, granted=granted)
                attempts += 1
                try:
                    result = store.call_tool("edit_knowledge_article", {
                        "knowledge_base_id": kb, "article_id": article_id,
                        "content": current["content"] + "\n" + line,
                        "expected_version": current["updated_at"],
                        "idempotency_key": "%s-try%d" % (line, retry)}, granted=granted)
                except VersionConflict:
                    conflicts += 1
                    continue
                accepted.append((article_id, line, result["updated_at"],
                                 result["event"]["sequence"]))
                break
            else:
                raise AssertionError("%s never got an edit through" % line)
    results.put({"name": name, "kb": kb, "attempts": attempts, "conflicts": conflicts,
                 "accepted": accepted})


def setup(path, kbs, articles, hot):
    """A store of knowledge bases ``kbs`` of ``articles`` published articles each; returns
    ``{kb: IDs of its hot articles}``."""
    hot_ids = {}
    with KBStore(path, create=True) as store:
        for kb in kbs:
            store.create_knowledge_base(kb)
            ids = store.create_articles(kb, corpus.articles(random.Random(SEED), articles))
            hot_ids[kb] = ids[:hot]
    return hot_ids


def audit(path, kb, hot_ids, initial_head, accepted):
    """Problems in one knowledge base after a run (an empty list when nothing was lost)."""
    problems = []
    with KBStore(path) as store:
        head = store.head_sequence(kb)
        if head != initial_head + len(accepted):
            problems.append("%d events, expected %d initial + %d accepted"
                            % (head, initial_head, len(accepted)))
        if sorted(a[3] for a in accepted) != list(range(initial_head + 1, head + 1)):
            problems.append("the accepted edits' sequences are not the new events")
        events = {}
        after = initial_head
        while after < head:
            page = store.call_tool("poll_resource_events", {
                "resource_type": "knowledge_base", "resource_id": kb, "after_sequence": after},
                granted={kb})
            for event in page["events"]:
                events[event["sequence"]] = event
            after = page["next_after_sequence"]
        for article_id, line, updated_at, sequence in accepted:
            event = events.get(sequence)
            if event is None or (event["article_id"], event["updated_at"]) != (article_id,
                                                                             updated_at):
                problems.append("edit %r has no matching event (got %r)" % (line, event))
        for article_id in hot_ids:
            lines = store.get_article(kb, article_id)["content"].split("\n")
            mine = [a for a in accepted if a[0] == article_id]
            # Accepted edits form one chain per article, so their lines appear in commit order.
            expected = [a[1] for a in sorted(mine, key=lambda a: a[3])]
            found = [l for l in lines if " edit " in l]
            if found != expected:
                problems.append("article %s: %d accepted lines, %d found in order"
                                % (article_id, len(expected), len(found)))
    return problems


def run_one(processes, seconds, articles=1000, hot=4, directory=None, engine="sqlite",
            layout="one", postgres_url=None):
    """One run with ``processes`` writers; returns its row (raises if the audit fails)."""
    tmp = tempfile.mkdtemp(prefix="kb-bench-concurrency-", dir=directory)
    path = common.store_address(engine, tmp, "concurrency", postgres_url)
    try:
        if layout == "one":
            kbs = [KB] * processes
            hot_ids = setup(path, [KB], articles, hot)
        else:
            kbs = ["%s-%d" % (KB, i) for i in range(processes)]
            hot_ids = setup(path, kbs, SEPARATE_ARTICLES, hot)
        with KBStore(path) as store:
            initial = {kb: store.head_sequence(kb) for kb in hot_ids}
        # spawn: the same start method on every platform, and a fresh interpreter per writer.
        ctx = multiprocessing.get_context("spawn")
        barrier, results = ctx.Barrier(processes), ctx.Queue()
        procs = [ctx.Process(target=worker, args=(path, kbs[i], hot_ids[kbs[i]], "p%d" % i,
                                                  seconds, barrier, results))
                 for i in range(processes)]
        for proc in procs:
            proc.start()
        # Read results before joining: a child blocks on exit until its queue is drained.
        outcomes = [results.get(timeout=seconds + 120) for _ in procs]
        for proc in procs:
            proc.join(timeout=60)
            if proc.exitcode != 0:
                raise RuntimeError("writer process exited %s" % proc.exitcode)
        accepted = [a for o in outcomes for a in o["accepted"]]
        attempts = sum(o["attempts"] for o in outcomes)
        conflicts = sum(o["conflicts"] for o in outcomes)
        with KBStore(path) as store:
            problems = store.audit()
        for kb in hot_ids:
            mine = [a for o in outcomes if o["kb"] == kb for a in o["accepted"]]
            problems += audit(path, kb, hot_ids[kb], initial[kb], mine)
        if problems:
            raise AssertionError("concurrency audit failed: %s" % problems[:5])
        return {"engine": engine, "layout": layout, "processes": processes,
                "seconds": seconds, "accepted": len(accepted),
                "edits_per_s": round(len(accepted) / seconds, 1), "attempts": attempts,
                "conflicts": conflicts,
                "conflict_rate": round(conflicts / attempts, 4) if attempts else 0.0,
                "audit": "ok"}
    finally:
        common.drop_store(engine, path, postgres_url)
        shutil.rmtree(tmp, ignore_errors=True)


def run(process_counts=(1, 2, 4, 8), seconds=3.0, articles=1000, hot=4, directory=None,
        repeats=3, engines=("sqlite",), layouts=LAYOUTS, postgres_url=None):
    """``repeats`` runs per engine, layout and process count; one row each, with the medians."""
    if not process_counts or min(process_counts) < 1:
        raise ValueError("process counts must be at least 1, got %r" % (process_counts,))
    if seconds <= 0:
        raise ValueError("concurrency seconds must be positive, got %r" % seconds)
    if not 1 <= hot <= min(articles, SEPARATE_ARTICLES):
        raise ValueError("hot articles must be from 1 to %d, got %d"
                         % (min(articles, SEPARATE_ARTICLES), hot))
    if repeats < 1:
        raise ValueError("concurrency repeats must be at least 1, got %d" % repeats)
    load_start = common.load()
    rows = []
    for engine in engines:
        for layout in layouts:
            for processes in process_counts:
                # One count's runs back to back: each row's spread is the machine's noise alone.
                runs = [run_one(processes, seconds, articles, hot, directory, engine, layout,
                                postgres_url) for _ in range(repeats)]
                rates = [r["edits_per_s"] for r in runs]
                rows.append({"engine": engine, "layout": layout, "processes": processes,
                             "seconds": seconds, "runs": runs,
                             "edits_per_s": common.median(rates),
                             "edits_per_s_range": [min(rates), max(rates)],
                             "conflict_rate": common.median([r["conflict_rate"] for r in runs]),
                             "accepted": sum(r["accepted"] for r in runs),
                             "conflicts": sum(r["conflicts"] for r in runs),
                             "audit": "ok" if all(r["audit"] == "ok" for r in runs)
                             else "FAILED"})
    return {"rows": rows, "articles": articles, "hot": hot, "repeats": repeats,
            "load": [load_start, common.load()]}


def render(result):
    """The concurrency rows as a Markdown table."""
    firsts = {}
    for r in result["rows"]:
        firsts.setdefault((r["engine"], r["layout"]), r["edits_per_s"])
    rows = [[r["engine"], r["layout"], r["processes"],
             "%d x %.1f s" % (len(r["runs"]), r["seconds"]),
             "%.0f" % r["edits_per_s"], "%.0f-%.0f" % tuple(r["edits_per_s_range"]),
             "%.0f%%" % (r["edits_per_s"] / firsts[(r["engine"], r["layout"])] * 100),
             "%.1f%%" % (100 * r["conflict_rate"]), common.n(r["accepted"]),
             common.n(r["conflicts"]), r["audit"]] for r in result["rows"]]
    return common.table(["engine", "knowledge bases", "processes", "runs", "edits/s (median)",
                         "range", "vs 1 process", "conflict rate (median)",
                         "accepted edits (all runs)", "conflicts (all runs)",
                         "audit: no lost edit, no missing event"], rows) + (
        "\n\none: every process edits the same %d articles of one knowledge base of %s "
        "articles; separate: each process edits %d articles of its own knowledge base (of %d). "
        "Every edit is a read and a compare-and-swap with the version read; a conflict is "
        "re-read and retried. Conflict rate = rejected edit attempts / all edit attempts."
        % (result["hot"], common.n(result["articles"]), result["hot"], SEPARATE_ARTICLES))
