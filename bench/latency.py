"""Tool latency against knowledge-base size, on each engine: a SQLite file in WAL mode, and a
PostgreSQL schema on a server reached over its Unix socket.

For each size: build a knowledge base of that many published articles of about 300 words
(``create_articles``, the store's bulk load in one transaction), then time, each call alone
with ``time.perf_counter()``:

- search: the lower-cased title of a uniformly chosen article, as the simulated agent asks
  (e.g. "reset expired passwords for admins"; the store drops "for");
- read: a uniformly chosen article by ID;
- edit: read first (untimed), then the edit with the version just read, appending one line;
- poll: one page of 100 events from a uniformly chosen cursor;
- check 100: ``check_citations`` with 100 citations of uniformly chosen articles, taken
  before a person saved half of them (one paragraph each, untimed): half come back current,
  half changed with what changed.
"""

import random
import shutil
import sqlite3
import tempfile
import time

import common
import corpus
from kbcite import KBStore
from kbcite.engines.sqlite_fts import fts_literal
from kbcite.search.text import query_terms

KB = "bench"
SEED = 20261108
# Untimed searches first: the first queries also pay for loading the index pages from disk.
WARMUP = 20


def build(path, count, seed=SEED):
    """A store of ``count`` published articles; returns (titles, seconds to build)."""
    rng = random.Random(seed)
    articles = corpus.articles(rng, count)
    started = time.perf_counter()
    with KBStore(path, create=True) as store:
        store.create_knowledge_base(KB)
        # The bulk load: one transaction and one index segment for the lot.
        store.create_articles(KB, articles)
        store.optimize(KB)
    return [title for title, _ in articles], time.perf_counter() - started


def _timed(fn, *args, **kwargs):
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - started, result


def measure(path, titles, searches, reads, edits, polls, seed=SEED, checks=100):
    """Per-call seconds of each tool on an existing store file; returns lists of timings."""
    rng = random.Random(seed + 1)
    count = len(titles)
    granted = {KB}
    out = {"search": [], "read": [], "edit": [], "poll": [], "check": [], "search_top1": 0}

    def article_id(index):
        return "art-%06d" % (index + 1)  # the store numbers a knowledge base's articles 1, 2, ...

    with KBStore(path) as store:
        call = store.call_tool
        for i in range(WARMUP + searches):
            index = min(int(rng.random() * count), count - 1)
            args = {"knowledge_base_id": KB, "query": corpus.question(titles[index])}
            seconds, result = _timed(call, "search_knowledge_base", args, granted=granted)
            if i >= WARMUP:
                out["search"].append(seconds)
                hits = result["results"]
                out["search_top1"] += bool(hits) and hits[0]["article_id"] == article_id(index)
        for _ in range(reads):
            index = min(int(rng.random() * count), count - 1)
            args = {"knowledge_base_id": KB, "article_id": article_id(index)}
            out["read"].append(_timed(call, "read_knowledge_article", args, granted=granted)[0])
        for i in range(edits):
            index = min(int(rng.random() * count), count - 1)
            current = call("read_knowledge_article",
                           {"knowledge_base_id": KB, "article_id": article_id(index)},
                           granted=granted)
            args = {"knowledge_base_id": KB, "article_id": current["article_id"],
                    "content": current["content"] + "\n\nBenchmark note %d." % i,
                    "expected_version": current["updated_at"],
                    "idempotency_key": "bench-edit-%d-%d" % (seed, i)}
            out["edit"].append(_timed(call, "edit_knowledge_article", args, granted=granted)[0])
        head = store.head_sequence(KB)
        for _ in range(polls):
            after = int(rng.random() * max(head - 100, 0))
            args = {"resource_type": "knowledge_base", "resource_id": KB,
                    "after_sequence": after, "limit": 100}
            seconds, page = _timed(call, "poll_resource_events", args, granted=granted)
            out["poll"].append(seconds)
            if len(page["events"]) != min(100, head - after):
                raise AssertionError("poll after %d returned %d events" % (after,
                                                                         len(page["events"])))
        for round_ in range(checks):
            picked = sorted({min(int(rng.random() * count), count - 1) for _ in range(100)})
            cited = [call("read_knowledge_article", {"knowledge_base_id": KB,
                                                     "article_id": article_id(index)},
                          granted=granted)["citation"] for index in picked]
            for citation in cited[::2]:
                current = store.get_article(KB, citation["article_id"])["content"]
                store.save_article(KB, citation["article_id"],
                                   content=current + "\n\nCheck round %d." % round_)
            args = {"knowledge_base_id": KB, "citations": cited}
            seconds, found = _timed(call, "check_citations", args, granted=granted)
            out["check"].append(seconds)
            if sum(r["status"] == "changed" for r in found["results"]) != len(cited[::2]):
                raise AssertionError("check_citations missed a changed citation")
    return out


def matches_per_query(path, titles, queries, seed=SEED):
    """Median number of articles holding at least one of a search's words."""
    rng = random.Random(seed + 1)
    counts = []
    # A diagnostic no tool reports, so read straight from the file, on its own connection.
    conn = sqlite3.connect(path)
    try:
        pk = conn.execute("SELECT pk FROM knowledge_bases WHERE kb_id = ?", (KB,)).fetchone()[0]
        for i in range(WARMUP + queries):
            # The same draws as measure(), so these are the very queries that were timed.
            index = min(int(rng.random() * len(titles)), len(titles) - 1)
            if i < WARMUP:
                continue
            terms = query_terms(corpus.question(titles[index]))
            query = " OR ".join(fts_literal(term) for term in terms)
            counts.append(conn.execute("SELECT count(*) FROM fts_%d WHERE fts_%d MATCH ?"
                                       % (pk, pk), (query,)).fetchone()[0])
    finally:
        conn.close()
    return common.median(counts)


def check_sizes(sizes):
    """Refuse sizes this benchmark cannot run (ValueError), before anything is started."""
    if not sizes or min(sizes) < 2:
        raise ValueError("latency sizes must be at least 2 articles, got %r" % (sizes,))


def run(sizes=(1000, 10000, 100000), searches=300, reads=1000, edits=300, polls=300,
        directory=None, engines=("sqlite",), postgres_url=None, checks=100):
    """Build and measure each size on each engine; returns one row per (engine, size)."""
    check_sizes(sizes)
    for name, value in (("searches", searches), ("reads", reads), ("edits", edits),
                        ("polls", polls)):
        if value < 1:
            raise ValueError("latency %s must be at least 1, got %d" % (name, value))
    rows = []
    load_start = common.load()
    for size in sizes:
        for engine in engines:
            tmp = tempfile.mkdtemp(prefix="kb-bench-latency-", dir=directory)
            path = common.store_address(engine, tmp, "latency%d" % size, postgres_url)
            try:
                titles, build_s = build(path, size)
                t = measure(path, titles, searches, reads, edits, polls, checks=checks)
                rows.append({
                    "engine": engine,
                    "articles": size,
                    "build_s": round(build_s, 2),
                    "db_mb": common.store_mb(engine, path, postgres_url),
                    "search_p50_ms": _ms(common.median(t["search"])),
                    "search_p99_ms": _ms(common.percentile(t["search"], 99)),
                    "search_top1": round(t["search_top1"] / len(t["search"]), 3),
                    "search_matches_p50": matches_per_query(path, titles, searches)
                    if engine == "sqlite" else None,
                    "read_p50_ms": _ms(common.median(t["read"])),
                    "read_p99_ms": _ms(common.percentile(t["read"], 99)),
                    "edit_p50_ms": _ms(common.median(t["edit"])),
                    "edit_p99_ms": _ms(common.percentile(t["edit"], 99)),
                    "poll100_p50_ms": _ms(common.median(t["poll"])),
                    "poll100_p99_ms": _ms(common.percentile(t["poll"], 99)),
                    "check100_p50_ms": _ms(common.median(t["check"])),
                    "check100_p99_ms": _ms(common.percentile(t["check"], 99)),
                    "calls": {"search": searches, "read": reads, "edit": edits, "poll": polls},
                })
            finally:
                common.drop_store(engine, path, postgres_url)
                shutil.rmtree(tmp, ignore_errors=True)
    return {"rows": rows, "load": [load_start, common.load()]}


def _ms(seconds):
    return round(seconds * 1000.0, 3)


TARGETS_MS = {"search_p50_ms": 3.0, "search_p99_ms": 15.0, "read_p50_ms": 0.5,
              "edit_p50_ms": 2.0, "poll100_p50_ms": 1.0, "check100_p50_ms": 5.0}


def render(result):
    """The latency rows as a Markdown table."""
    rows = []
    for r in result["rows"]:
        rows.append([r["engine"], common.n(r["articles"]), "%.1f s" % r["build_s"],
                     "%.0f" % r["db_mb"] if r["db_mb"] is not None else "-",
                     r["search_p50_ms"], r["search_p99_ms"],
                     common.n(int(r["search_matches_p50"]))
                     if r["search_matches_p50"] is not None else "-",
                     "%.1f%%" % (100 * r["search_top1"]), r["read_p50_ms"], r["read_p99_ms"],
                     r["edit_p50_ms"], r["edit_p99_ms"], r["poll100_p50_ms"], r["poll100_p99_ms"],
                     r["check100_p50_ms"], r["check100_p99_ms"]])
    header = ["engine", "articles", "build", "MB", "search p50 ms", "search p99 ms",
              "matches/query", "top hit = asked", "read p50 ms", "read p99 ms", "edit p50 ms",
              "edit p99 ms", "poll 100 p50 ms", "poll 100 p99 ms", "check 100 p50 ms",
              "check 100 p99 ms"]
    text = common.table(header, rows)
    sqlite_rows = [r for r in result["rows"] if r["engine"] == "sqlite"]
    if sqlite_rows:
        biggest = max(sqlite_rows, key=lambda r: r["articles"])
        verdicts = ["%s %s (target %s ms: %s)" % (
            key.replace("_ms", "").replace("_", " "), biggest[key], target,
            "met" if biggest[key] <= target else "missed")
            for key, target in TARGETS_MS.items()]
        text += "\n\nSQLite at %s articles: %s." % (common.n(biggest["articles"]),
                                                   "; ".join(verdicts))
    return text
