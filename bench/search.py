"""Search beside its peers, on one corpus and one set of queries.

For each size, one knowledge base of the bench corpus (``corpus.py``) is built, and the same
queries (each an article's own title, lower-cased, as the simulated agent asks; limit 10) go
to every engine in turn, interleaved query by query so that a noisy moment hits them all:

- ``ours``: ``search_knowledge_base`` on the store, on each engine measured (SQLite, and
  PostgreSQL where a server is at hand): the same ranking, computed by the same code;
- ``fts5-or-bm25``: plain FTS5 over the same titles and bodies (``unicode61
  remove_diacritics 2``), every query word ORed, ranked by ``bm25(fts, 5, 1)``: what a
  knowledge base on SQLite gets without a ranking of its own;
- ``tantivy``: the ``tantivy`` package (Rust, BM25 per field, title boosted 5), where it is
  installed; skipped with the reason otherwise;
- ``ours hybrid``, when asked (``hybrid=True``; ``bench/run.py --search-hybrid``): ours with
  the semantic half on, its build the bulk load with every article embedded on write.

Reported per engine: p50 and p99 latency, how often the asked article is the first hit, the
mean number of hits, and how much of each top 10 is also in ours (on SQLite); and the same,
without the overlap, for title-like queries (at most ``TIERED_TERMS_MAX`` terms) and
question-shaped ones (more) apart, with each engine's top-10 agreement with tantivy's (the
share of tantivy's ten among its own).
"""

import os
import random
import re
import shutil
import sqlite3
import tempfile
import time

import common
import corpus
from kbcite import KBStore
from kbcite.limits import CONTENT_MAX_BYTES
from kbcite.search import embedding
from kbcite.search.text import STOPWORDS, terms_of, tokens
from kbcite.search.tiers import TIERED_TERMS_MAX

KB = "bench"
SEED = 20261108
WARMUP = 20
LIMIT = 10
TANTIVY_TITLE_BOOST = 5.0


def _words(query):
    """A query's words for the peers: what our store searches for, quoted for their syntax."""
    return [w for w in re.findall(r"[a-z0-9]+", query.lower()) if w not in STOPWORDS]


class Ours:
    """The store's own search tool: lexical, or hybrid (the semantic half on)."""

    def __init__(self, address, articles, engine, semantic=False):
        self.name = "ours%s (%s)" % (" hybrid" if semantic else "", engine)
        with KBStore(address, create=True, semantic=semantic) as store:
            store.create_knowledge_base(KB)
            store.create_articles(KB, articles)
            store.optimize(KB)
        self.store = KBStore(address, semantic=semantic)

    def search(self, query):
        """Article IDs of the top hits."""
        found = self.store.call_tool("search_knowledge_base", {
            "knowledge_base_id": KB, "query": query, "limit": LIMIT}, granted={KB})
        return [hit["article_id"] for hit in found["results"]]

    def close(self):
        """Close the store."""
        self.store.close()


class PlainFTS5:
    """FTS5 as it comes: the words ORed, ranked by its bm25 (k1 1.2, b 0.75), over a title
    and a body column weighted ``weights`` (title 5 by default), or over one column holding
    both (``one_field``: textbook BM25 on the whole text)."""

    name = "fts5-or-bm25"

    def __init__(self, path, articles, weights=(5.0, 1.0), one_field=False, name=None):
        self.conn = sqlite3.connect(path)
        self.name = name or self.name
        columns = "text" if one_field else "title, body"
        self.conn.execute("CREATE VIRTUAL TABLE docs USING fts5(%s, "
                          "tokenize='unicode61 remove_diacritics 2')" % columns)
        rows = (((n + 1, "%s\n%s" % (t, b)) if one_field else (n + 1, t, b))
                for n, (t, b) in enumerate(articles))
        with self.conn:
            self.conn.executemany("INSERT INTO docs (rowid, %s) VALUES (?, ?%s)"
                                  % (columns, "" if one_field else ", ?"), rows)
            self.conn.execute("INSERT INTO docs (docs) VALUES ('optimize')")
        self.rank = "bm25(docs)" if one_field else "bm25(docs, %r, %r)" % tuple(weights)

    def search(self, query, limit=LIMIT):
        """Article IDs of the top hits."""
        words = _words(query)
        if not words:
            return []
        expression = " OR ".join('"%s"' % w for w in words)
        return ["art-%06d" % row[0] for row in self.conn.execute(
            "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY %s, rowid LIMIT ?"
            % self.rank, (expression, limit))]

    def close(self):
        """Close the connection."""
        self.conn.close()


class Tantivy:
    """tantivy's BM25 (k1 1.2, b 0.75) over a title and a body field, the title boosted
    ``title_boost`` times (5 by default), or over one field holding both (``one_field``)."""

    name = "tantivy"

    def __init__(self, path, articles, title_boost=TANTIVY_TITLE_BOOST, one_field=False,
                 name=None):
        import tantivy  # noqa: F401  (checked by available())

        self.name = name or self.name
        self.fields = ["text"] if one_field else ["title", "body"]
        builder = tantivy.SchemaBuilder()
        for field in self.fields:
            builder.add_text_field(field, stored=False)
        builder.add_unsigned_field("id", stored=True, indexed=True)
        self.schema = builder.build()
        os.makedirs(path)
        self.index = tantivy.Index(self.schema, path=path)
        writer = self.index.writer()
        for n, (title, body) in enumerate(articles):
            doc = tantivy.Document()
            if one_field:
                doc.add_text("text", "%s\n%s" % (title, body))
            else:
                doc.add_text("title", title)
                doc.add_text("body", body)
            doc.add_unsigned("id", n + 1)
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self.tantivy = tantivy
        self.boosts = {} if one_field else {"title": title_boost}

    def search(self, query, limit=LIMIT):
        """Article IDs of the top hits."""
        words = _words(query)
        if not words:
            return []
        parsed = self.index.parse_query(" ".join(words), self.fields, field_boosts=self.boosts)
        hits = self.searcher.search(parsed, limit).hits
        return ["art-%06d" % self.searcher.doc(address)["id"][0] for _, address in hits]

    def close(self):
        """Nothing to close."""


def tantivy_available():
    """``None`` if the tantivy package imports, else the reason it cannot be measured."""
    try:
        import tantivy  # noqa: F401
    except ImportError as exc:
        return "the tantivy package is not installed (pip install tantivy): %s" % exc
    return None


def measure(size, queries=300, directory=None, engines=("sqlite",), postgres_url=None,
            hybrid=False):
    """Build every engine at ``size`` articles and time the same queries on each (and ours
    hybrid, on the first engine, with ``hybrid``)."""
    rng = random.Random(SEED)
    articles = corpus.articles(rng, size)
    tmp = tempfile.mkdtemp(prefix="kb-bench-search-", dir=directory)
    engines_built, skipped, build, addresses = [], {}, {}, []
    try:
        variants = [(engine, False) for engine in engines]
        if hybrid:
            if embedding.model()[0] is None:
                skipped["ours hybrid"] = embedding.model()[1]
            else:
                variants.append((engines[0], True))
        for engine, semantic in variants:
            address = common.store_address(engine, tmp, "search%d%s" % (
                size, "h" if semantic else ""), postgres_url)
            addresses.append((engine, address))
            started = time.perf_counter()
            engines_built.append(Ours(address, articles, engine, semantic))
            build[engines_built[-1].name] = time.perf_counter() - started
        for make in (PlainFTS5, Tantivy):
            if make is Tantivy and tantivy_available():
                skipped[make.name] = tantivy_available()
                continue
            started = time.perf_counter()
            engines_built.append(make(os.path.join(tmp, make.name), articles))
            build[make.name] = time.perf_counter() - started
        reference = engines_built[0].name
        qrng = random.Random(SEED + 2)
        asked = [min(int(qrng.random() * size), size - 1) for _ in range(WARMUP + queries)]
        results = {e.name: {"seconds": [], "first": 0, "hits": 0, "overlap": 0}
                   for e in engines_built}
        # Per kind of query (title-like, question-shaped): seconds, first hits, and hits
        # shared with tantivy's top 10 (and tantivy's hits, the denominator).
        kinds = {(e.name, kind): {"seconds": [], "first": 0, "agree": 0, "peer_hits": 0}
                 for e in engines_built for kind in ("title", "question")}
        for i, index in enumerate(asked):
            query = corpus.question(articles[index][0])
            tops = {}
            for engine in engines_built:
                started = time.perf_counter()
                top = engine.search(query)
                seconds = time.perf_counter() - started
                tops[engine.name] = top
                if i >= WARMUP:
                    r = results[engine.name]
                    r["seconds"].append(seconds)
                    r["first"] += bool(top) and top[0] == "art-%06d" % (index + 1)
                    r["hits"] += len(top)
            if i >= WARMUP:
                kind = "question" if len(terms_of(tokens(query))) > TIERED_TERMS_MAX else "title"
                peer = tops.get(Tantivy.name)
                for engine in engines_built:
                    results[engine.name]["overlap"] += len(set(tops[engine.name])
                                                          & set(tops[reference]))
                    k = kinds[(engine.name, kind)]
                    k["seconds"].append(results[engine.name]["seconds"][-1])
                    top = tops[engine.name]
                    k["first"] += bool(top) and top[0] == "art-%06d" % (index + 1)
                    if peer is not None:
                        k["agree"] += len(set(top) & set(peer))
                        k["peer_hits"] += len(peer)
        rows = []
        for engine in engines_built:
            r = results[engine.name]
            n = len(r["seconds"])
            rows.append({"engine": engine.name, "articles": size,
                         "build_s": round(build[engine.name], 1),
                         "p50_ms": round(common.median(r["seconds"]) * 1000, 3),
                         "p99_ms": round(common.percentile(r["seconds"], 99) * 1000, 3),
                         "first_hit": round(r["first"] / n, 4),
                         "mean_hits": round(r["hits"] / n, 2),
                         "top10_overlap": round(r["overlap"] / max(r["hits"], 1), 3)})
        by_kind = []
        for (name, kind), k in kinds.items():
            if k["seconds"]:
                by_kind.append({"engine": name, "articles": size, "kind": kind,
                                "queries": len(k["seconds"]),
                                "p50_ms": round(common.median(k["seconds"]) * 1000, 3),
                                "p99_ms": round(common.percentile(k["seconds"], 99) * 1000, 3),
                                "first_hit": round(k["first"] / len(k["seconds"]), 4),
                                "tantivy_agreement": round(k["agree"] / k["peer_hits"], 3)
                                if k["peer_hits"] else None})
        return {"rows": rows, "skipped": skipped, "by_kind": by_kind}
    finally:
        for engine in engines_built:
            engine.close()
        for engine, address in addresses:
            common.drop_store(engine, address, postgres_url)
        shutil.rmtree(tmp, ignore_errors=True)


PLANTED_TARGET_MS = 20.0


def planted(directory=None, searches=30):
    """The planted case: twenty 1 MiB articles of one repeated word and one short article;
    a two-word search for 20 hits, timed with the snippet cache emptied before each."""
    tmp = tempfile.mkdtemp(prefix="kb-bench-planted-", dir=directory)
    try:
        with KBStore(os.path.join(tmp, "planted.db"), create=True) as store:
            store.create_knowledge_base(KB)
            big = "alpha " * (CONTENT_MAX_BYTES // 6 - 1)
            store.create_articles(KB, [("Big %d" % n, big) for n in range(20)])
            store.create_article(KB, "Small", "alpha beta")
            times = []
            for _ in range(searches):
                store._ctx.snippets.clear()  # each search makes its snippets anew
                started = time.perf_counter()
                found = store.call_tool("search_knowledge_base", {
                    "knowledge_base_id": KB, "query": "alpha beta", "limit": 20},
                    granted={KB})
                times.append(time.perf_counter() - started)
            return {"p50_ms": round(common.median(times) * 1000, 2),
                    "max_ms": round(max(times) * 1000, 2), "hits": len(found["results"]),
                    "first": found["results"][0]["title"],
                    "snippet_chars": store.last_search["snippet_chars"],
                    "target_ms": PLANTED_TARGET_MS}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(sizes=(10000, 100000), queries=300, directory=None, engines=("sqlite",),
        postgres_url=None, hybrid=False):
    """The comparison at each size."""
    if not sizes or min(sizes) < 2:
        raise ValueError("search sizes must be at least 2 articles, got %r" % (sizes,))
    if queries < 1:
        raise ValueError("search queries must be at least 1, got %d" % queries)
    load_start = common.load()
    rows, skipped, by_kind = [], {}, []
    for size in sizes:
        result = measure(size, queries, directory, engines, postgres_url, hybrid)
        rows += result["rows"]
        by_kind += result["by_kind"]
        skipped.update(result["skipped"])
    return {"rows": rows, "by_kind": by_kind, "skipped": skipped, "queries": queries,
            "planted": planted(directory), "load": [load_start, common.load()]}


def render(result):
    """The comparison as a Markdown table, with what was skipped and why."""
    rows = [[common.n(r["articles"]), r["engine"], "%.1f s" % r["build_s"], r["p50_ms"],
             r["p99_ms"], "%.1f%%" % (100 * r["first_hit"]), r["mean_hits"],
             "%.0f%%" % (100 * r["top10_overlap"])] for r in result["rows"]]
    text = common.table(["articles", "engine", "build", "p50 ms", "p99 ms", "asked article first",
                         "mean hits", "top-10 overlap with ours (sqlite)"], rows)
    kinds = result.get("by_kind") or []
    if kinds:
        text += "\n\nTitle-like queries (at most %d terms) and questions (more), apart:\n\n" % (
            TIERED_TERMS_MAX)
        text += common.table(
            ["articles", "kind", "queries", "engine", "p50 ms", "p99 ms", "asked article first",
             "top-10 agreement with tantivy"],
            [[common.n(r["articles"]), r["kind"], r["queries"], r["engine"], r["p50_ms"],
              r["p99_ms"], "%.1f%%" % (100 * r["first_hit"]),
              "-" if r["tantivy_agreement"] is None else "%.1f%%" % (100 * r["tantivy_agreement"])]
             for r in sorted(kinds, key=lambda r: (r["articles"], r["kind"] != "title"))])
    for name, why in sorted(result["skipped"].items()):
        text += "\n\n%s skipped: %s." % (name, why)
    p = result.get("planted")
    if p:
        text += ("\n\nThe planted case (twenty 1 MiB articles of one repeated word, a two-word "
                 "search for 20 hits, SQLite): p50 %.2f ms, slowest %.2f ms of 30 (target %.0f ms: "
                 "%s); %d hits, %r first; %s characters read for snippets."
                 % (p["p50_ms"], p["max_ms"], p["target_ms"],
                    "met" if p["max_ms"] <= p["target_ms"] else "missed", p["hits"], p["first"],
                    common.n(p["snippet_chars"])))
    return text
