"""Search quality on public test collections with human relevance judgements, beside BM25.

    python bench/search_quality.py                       # every collection, and the known items
    python bench/search_quality.py --collections med,cran --json quality.json
    python bench/search_quality.py --engines sqlite,postgresql

Each collection (``bench/data/<name>.tar.xz``, the SMART files as published: documents,
queries, judgements; bench/data/README.md gives their source) is loaded into one knowledge
base of each engine measured, a document's title as the article's title and its abstract as
the body. Two of them, CACM and CISI (``TUNING``), are the **tuning set**: every constant of
the ranking (kbcite/search/ranking.py, tiers.py, semantic.py) was chosen on them alone; the
others are reported and never tuned on. Every judged query goes, in turn, to

- ``ours lexical (<engine>)``: ``search_knowledge_base``, limit 10, the semantic half off;
- ``ours hybrid (<engine>)``: the same with the ``[semantic]`` extra's model on, where it is
  installed;
- textbook BM25 (k1 1.2, b 0.75, the words ORed, no stemming): FTS5's ``bm25`` and tantivy's,
  each over one field holding title and body, and over a title field and a body field
  weighed alike; the best of the four on a collection (by nDCG@10) is its **best BM25**;
- ``reference fusion``: the textbook tantivy BM25 (title+body) fused with the same embedding
  model by reciprocal rank (k 60, 30 a side, every document's vector compared): what a
  few lines around two off-the-shelf parts give, for the hybrid to beat.

A query longer than the tool's limit (200 characters) is cut at the last word that fits,
for every engine alike. Reported per engine: nDCG@10 (binary judgements), recall@10, the
ratio of its nDCG@10 to the best BM25's, the per-query paired difference with the best BM25
(mean, and a 95% bootstrap interval of it; queries won and lost), and the p50 and p99 of a
search. The known-item cases (``bench/data/known_items.json``: pages titled with a command's
name, described in their bodies) report the rank of the expected page, and so do the
paraphrases (``bench/data/paraphrases.json``: the same pages asked for in other words).
Building ours hybrid also gives the cost of embedding on write: the bulk load's time against
ours lexical's, per article.
"""

import argparse
import io
import json
import lzma
import math
import os
import random
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import common
import search as peers
from kbcite import KBStore
from kbcite.search import embedding
from kbcite.limits import QUERY_MAX, TITLE_MAX

DATA = Path(__file__).resolve().parent / "data"
KB = "quality"
LIMIT = 10
# The rank a known item must reach to pass: an agent reads the first few hits.
KNOWN_ITEM_RANK = 3

# Each collection's files in its archive (documents, queries, judgements), whether its
# judgements number the queries in order rather than by their ``.I`` (Cranfield's do: its
# queries are numbered 1, 2, 4, 8, ... and its judgements 1 to 225), and the relevance codes
# that are not relevant (Cranfield's -1; its 1 to 4 are degrees of relevance).
COLLECTIONS = {
    "cacm": (("cacm.all", "query.text", "qrels.text"), False, ()),
    "cisi": (("CISI.ALL", "CISI.QRY", "CISI.REL"), False, ()),
    "med": (("MED.ALL", "MED.QRY", "MED.REL"), False, ()),
    "cran": (("cran.all.1400", "cran.qry", "cranqrel"), True, ("-1",)),
    "adi": (("ADI.ALL", "ADI.QRY", "ADI.REL"), False, ()),
}

# The tuning set: every ranking constant is chosen on these, and only these.
TUNING = ("cacm", "cisi")

# The engines that are textbook BM25, one of which is each collection's best BM25.
BM25_ENGINES = ("fts5 bm25 (one field)", "fts5 bm25 (title+body)",
                "tantivy bm25 (one field)", "tantivy bm25 (title+body)")
REFERENCE_FUSION = "reference fusion (tantivy bm25 + model, RRF)"

# The reference fusion: reciprocal rank fusion's usual constant and depth.
FUSION_K, FUSION_DEPTH = 60, 30

# Paired bootstrap of the mean per-query difference: resamples, and a fixed seed so that a
# table is the same run to run.
BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED = 4000, 20261206


def _records(text):
    """``{id: {field letter: text}}`` of a SMART file (``.I n`` then ``.T``, ``.W``, ...)."""
    records, current, field = {}, None, None
    for line in text.splitlines():
        if line.startswith(".I "):
            current = records.setdefault(int(line[3:].split()[0]), {})
            field = None
        elif len(line) >= 2 and line[0] == "." and line[1].isalpha() and \
                line[2:].strip() == "":
            field = line[1]
            current.setdefault(field, [])
        elif current is not None and field is not None:
            current[field].append(line)
    return {key: {f: " ".join(" ".join(lines).split()) for f, lines in fields.items()}
            for key, fields in records.items()}


def load_collection(name):
    """``(docs, queries, qrels)``: ``[(doc id, title, body)]``, ``[(query id, text)]`` of the
    judged queries, ``{query id: {relevant doc ids}}``."""
    (docs_name, queries_name, rels_name), in_order, not_relevant = COLLECTIONS[name]
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(
            (DATA / ("%s.tar.xz" % name)).read_bytes()))) as archive:
        files = {m.name: archive.extractfile(m).read().decode("latin-1")
                 for m in archive.getmembers() if m.isfile()}
    # An article needs a title and a body: a document without one gets "-", which holds no
    # word, the same for every engine (MED's documents have no title).
    docs = [(key, clip(rec.get("T") or "-", TITLE_MAX), rec.get("W") or "-")
            for key, rec in sorted(_records(files[docs_name]).items())]
    qrels = {}
    for line in files[rels_name].splitlines():
        parts = line.split()
        if len(parts) >= 2 and not (len(parts) >= 3 and parts[2] in not_relevant):
            qrels.setdefault(int(parts[0]), set()).add(int(parts[1]))
    records = sorted(_records(files[queries_name]).items())
    if in_order:
        records = [(n, rec) for n, (_, rec) in enumerate(records, 1)]
    queries = [(key, " ".join(rec.get(f, "") for f in "TW" if rec.get(f)))
               for key, rec in records if key in qrels]
    return docs, queries, qrels


def clip(text, size=QUERY_MAX):
    """``text`` with its spaces collapsed, cut at the last whole word within ``size``."""
    text = " ".join(text.split())
    if len(text) <= size:
        return text
    cut = text.rfind(" ", 0, size + 1)
    return text[:cut if cut > 0 else size]


def ndcg(ranked, relevant, k=LIMIT):
    """nDCG@k of a ranked list of IDs against a set of relevant IDs (binary gains)."""
    dcg = sum(1.0 / math.log2(i + 2) for i, key in enumerate(ranked[:k]) if key in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal if ideal else 0.0


def recall(ranked, relevant, k=LIMIT):
    """Recall@k: the share of the relevant IDs among the first k."""
    return len(set(ranked[:k]) & relevant) / len(relevant) if relevant else 0.0


class Ours:
    """The store's search tool on one engine; a hit is reported by its position in ``items``."""

    def __init__(self, address, items, engine, semantic=False):
        self.name = "ours %s (%s)" % ("hybrid" if semantic else "lexical", engine)
        self.semantic = semantic
        started = time.perf_counter()
        with KBStore(address, create=True, semantic=semantic) as store:
            store.create_knowledge_base(KB)
            ids = []
            plain = [(t, b) for t, b, s in items if s is None]
            if len(plain) == len(items):
                ids = store.create_articles(KB, plain)
            else:
                ids = [store.create_article(KB, t, b, source=s) for t, b, s in items]
            store.optimize(KB)
        self.load_seconds = time.perf_counter() - started
        self.articles = len(items)
        self.position = {article_id: n for n, article_id in enumerate(ids)}
        self.store = KBStore(address, semantic=semantic)

    def search(self, query):
        """Positions of the top hits."""
        found = self.store.call_tool("search_knowledge_base", {
            "knowledge_base_id": KB, "query": query, "limit": LIMIT}, granted={KB})
        return [self.position[hit["article_id"]] for hit in found["results"]]

    def close(self):
        """Close the store."""
        self.store.close()


class Peer:
    """One of ``bench/search.py``'s peers, its hits reported by position."""

    def __init__(self, make, path, items, name=None, **options):
        self.peer = make(path, [(t, b) for t, b, _ in items], **options)
        self.name = name or self.peer.name

    def search(self, query, limit=LIMIT):
        """Positions of the top hits."""
        return [int(hit[4:]) - 1 for hit in self.peer.search(query.lower(), limit)]

    def close(self):
        """Close the peer."""
        self.peer.close()


class ReferenceFusion:
    """A textbook BM25 peer fused with the embedding model by reciprocal rank: the top
    ``FUSION_DEPTH`` of each, ``1 / (FUSION_K + rank)`` summed, every document's vector
    compared with the query's."""

    name = REFERENCE_FUSION

    def __init__(self, bm25, items, model):
        self.bm25, self.model = bm25, model
        self.vectors = model.embed([model.article_text(t, b) for t, b, _ in items])

    def search(self, query, limit=LIMIT):
        """Positions of the top hits."""
        np = self.model._np
        similarity = self.vectors @ self.model.embed([query])[0]
        nearest = np.argsort(-similarity, kind="stable")[:FUSION_DEPTH].tolist()
        fused = {}
        for ranking in (self.bm25.search(query, FUSION_DEPTH), nearest):
            for rank, position in enumerate(ranking):
                fused[position] = fused.get(position, 0.0) + 1.0 / (FUSION_K + rank + 1)
        return sorted(fused, key=lambda position: (-fused[position], position))[:limit]

    def close(self):
        """Nothing of its own to close."""


def build(items, tmp, label, engines, postgres_url):
    """Every engine measured, loaded with ``(title, body, source)`` items."""
    built, skipped, addresses = [], {}, []
    model, why_not = embedding.model()
    if model is None:
        skipped["ours hybrid"] = why_not
    for engine in engines:
        for semantic in (False, True) if model is not None else (False,):
            address = common.store_address(engine, tmp, "%s_%s%s" % (
                label, engine, "_hybrid" if semantic else ""), postgres_url)
            addresses.append((engine, address))
            built.append(Ours(address, items, engine, semantic))
    for one_field in (True, False):
        kind = "one field" if one_field else "title+body"
        built.append(Peer(peers.PlainFTS5, os.path.join(tmp, "%s-fts5-%d.db" % (
            label, one_field)), items, name="fts5 bm25 (%s)" % kind, weights=(1.0, 1.0),
            one_field=one_field))
    why = peers.tantivy_available()
    if why:
        skipped["tantivy"] = why
    else:
        for one_field in (True, False):
            kind = "one field" if one_field else "title+body"
            built.append(Peer(peers.Tantivy, os.path.join(tmp, "%s-tantivy-%d" % (
                label, one_field)), items, name="tantivy bm25 (%s)" % kind, title_boost=1.0,
                one_field=one_field))
        if model is not None:
            built.append(ReferenceFusion(built[-1], items, model))
    return built, skipped, addresses


def bootstrap(differences, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED):
    """``(mean, low, high)``: the mean of paired per-query differences and the 2.5th and
    97.5th percentiles of the means of ``resamples`` resamples (queries drawn with
    replacement; a seeded ``random.Random``, so the interval is the same run to run)."""
    n = len(differences)
    if not n:
        return 0.0, 0.0, 0.0
    rng = random.Random(seed)
    means = sorted(sum(differences[rng.randrange(n)] for _ in range(n)) / n
                   for _ in range(resamples))
    return (sum(differences) / n, means[int(0.025 * resamples)],
            means[min(int(0.975 * resamples), resamples - 1)])


def paired(ours, theirs):
    """What ``ours`` per-query scores do against ``theirs`` (same queries, same order):
    the ratio of the means, the mean difference and its bootstrap interval, queries won
    and lost."""
    differences = [a - b for a, b in zip(ours, theirs)]
    mean, low, high = bootstrap(differences)
    total = sum(theirs)
    return {"ratio": round(sum(ours) / total, 4) if total else None,
            "mean_diff": round(mean, 4), "low": round(low, 4), "high": round(high, 4),
            "won": sum(1 for d in differences if d > 0),
            "lost": sum(1 for d in differences if d < 0)}


def measure(name, directory=None, engines=("sqlite",), postgres_url=None):
    """nDCG@10, recall@10 and latency of every engine on one collection, each beside the
    collection's best BM25 (paired per query)."""
    docs, queries, qrels = load_collection(name)
    items = [(title, body, None) for _, title, body in docs]
    doc_ids = [key for key, _, _ in docs]
    tmp = tempfile.mkdtemp(prefix="kb-bench-quality-", dir=directory)
    built, addresses = [], []
    try:
        built, skipped, addresses = build(items, tmp, name, engines, postgres_url)
        scores = {e.name: {"ndcg": [], "recall": [], "seconds": []} for e in built}
        for _, text in queries[:5]:  # warm every engine's caches alike
            for engine in built:
                engine.search(clip(text))
        for qid, text in queries:
            query = clip(text)
            for engine in built:
                started = time.perf_counter()
                top = [doc_ids[n] for n in engine.search(query)]
                s = scores[engine.name]
                s["seconds"].append(time.perf_counter() - started)
                s["ndcg"].append(ndcg(top, qrels[qid]))
                s["recall"].append(recall(top, qrels[qid]))
        means = {e.name: sum(scores[e.name]["ndcg"]) / len(queries) for e in built}
        bm25 = [e.name for e in built if e.name in BM25_ENGINES]
        best = max(bm25, key=lambda e: (means[e], -bm25.index(e))) if bm25 else None
        rows = []
        for e in built:
            s = scores[e.name]
            row = {"collection": name, "tuning": name in TUNING, "engine": e.name,
                   "documents": len(docs), "queries": len(queries),
                   "ndcg10": round(means[e.name], 4),
                   "recall10": round(sum(s["recall"]) / len(queries), 4),
                   "p50_ms": round(common.median(s["seconds"]) * 1000, 3),
                   "p99_ms": round(common.percentile(s["seconds"], 99) * 1000, 3),
                   "best_bm25": best}
            if best is not None:
                row["vs_best_bm25"] = paired(s["ndcg"], scores[best]["ndcg"])
            if REFERENCE_FUSION in scores and "hybrid" in e.name:
                row["vs_reference_fusion"] = paired(s["ndcg"], scores[REFERENCE_FUSION]["ndcg"])
            rows.append(row)
        return {"rows": rows, "skipped": skipped, "embedding": embedding_cost(built, items),
                "per_query": {e.name: [round(v, 4) for v in scores[e.name]["ndcg"]]
                              for e in built}}
    finally:
        _cleanup(built, addresses, postgres_url, tmp)


def embedding_cost(built, items):
    """What embedding adds to a write, an article (ms): the model's work on the collection's
    articles (their vectors and bytes), with its word cache emptied first ("cold") and then
    the median of three passes ("warm"); and, per engine, ours hybrid's bulk load less ours
    lexical's, over the articles (the same work and its rows, but two noisy timings)."""
    model = embedding.model()[0]
    if model is None:
        return {}
    texts = [model.article_text(title, body) for title, body, _ in items]
    passes = []
    for _ in range(4):
        if not passes:
            model._words.clear()
        started = time.perf_counter()
        [model.pack(vector) for vector in model.embed(texts)]
        passes.append((time.perf_counter() - started) * 1000 / len(texts))
    found = {"model cold": round(passes[0], 3),
             "model warm": round(common.median(passes[1:]), 3)}
    loads = {e.name: e for e in built if isinstance(e, Ours)}
    for name, hybrid in loads.items():
        lexical = loads.get(name.replace("hybrid", "lexical"))
        if hybrid.semantic and lexical is not None:
            found[name + ", load less lexical's"] = round(
                (hybrid.load_seconds - lexical.load_seconds) * 1000 / hybrid.articles, 3)
    return found


def known_items(directory=None, engines=("sqlite",), postgres_url=None,
                cases="known_items.json"):
    """The rank (1-based, None past 10) of each known-item case's best expected page (the
    cases of ``cases``, over known_items.json's pages)."""
    fixture = json.loads((DATA / "known_items.json").read_text(encoding="utf-8"))
    if cases != "known_items.json":
        fixture["cases"] = json.loads((DATA / cases).read_text(encoding="utf-8"))["cases"]
    items = [(p["title"], p["body"], p["source"]) for p in fixture["pages"]]
    sources = [p["source"] for p in fixture["pages"]]
    tmp = tempfile.mkdtemp(prefix="kb-bench-known-", dir=directory)
    built, addresses = [], []
    try:
        built, skipped, addresses = build(items, tmp, "known", engines, postgres_url)
        rows = []
        for case in fixture["cases"]:
            row = {"query": case["query"], "expect": case["expect"], "ranks": {}}
            for engine in built:
                top = [sources[n] for n in engine.search(case["query"])]
                ranks = [top.index(s) + 1 for s in case["expect"] if s in top]
                row["ranks"][engine.name] = min(ranks) if ranks else None
            rows.append(row)
        return {"rows": rows, "engines": [e.name for e in built], "skipped": skipped}
    finally:
        _cleanup(built, addresses, postgres_url, tmp)


def _cleanup(built, addresses, postgres_url, tmp):
    for engine in built:
        engine.close()
    for engine, address in addresses:
        common.drop_store(engine, address, postgres_url)
    shutil.rmtree(tmp, ignore_errors=True)


def run(collections=tuple(COLLECTIONS), directory=None, engines=("sqlite",), postgres_url=None):
    """Every collection's table and the known items."""
    rows, skipped, embedded, per_query = [], {}, {}, {}
    load_start = common.load()
    for name in collections:
        result = measure(name, directory, engines, postgres_url)
        rows += result["rows"]
        skipped.update(result["skipped"])
        embedded[name] = result["embedding"]
        per_query[name] = result["per_query"]
    known = known_items(directory, engines, postgres_url)
    skipped.update(known["skipped"])
    paraphrases = known_items(directory, engines, postgres_url, "paraphrases.json")
    return {"rows": rows, "known": known, "paraphrases": paraphrases, "skipped": skipped,
            "embedding_ms_per_article": embedded, "per_query_ndcg10": per_query,
            "tuning": list(TUNING), "load": [load_start, common.load()]}


def _versus(row, key="vs_best_bm25"):
    found = row.get(key)
    if not found or found["ratio"] is None:
        return ["-", "-", "-"]
    return ["%.3fx" % found["ratio"], "%+.4f [%+.4f, %+.4f]" % (
        found["mean_diff"], found["low"], found["high"]), "%d / %d" % (found["won"],
                                                                      found["lost"])]


def summary(rows):
    """One line a collection: its set, its best BM25, and ours (and the reference fusion)
    against it; hybrid against the reference fusion."""
    out = []
    for name in dict.fromkeys(r["collection"] for r in rows):
        mine = {r["engine"]: r for r in rows if r["collection"] == name}
        lexical = next((r for e, r in mine.items() if e.startswith("ours lexical")), None)
        hybrid = next((r for e, r in mine.items() if e.startswith("ours hybrid")), None)
        fusion = mine.get(REFERENCE_FUSION)

        def cell(row, key="vs_best_bm25"):
            if row is None or not row.get(key) or row[key]["ratio"] is None:
                return "-"
            return "%.3fx (low %+.4f)" % (row[key]["ratio"], row[key]["low"])
        first = next(iter(mine.values()))
        out.append([name.upper(), "tuning" if first["tuning"] else "never tuned on",
                    "%s %.4f" % (first["best_bm25"], mine[first["best_bm25"]]["ndcg10"])
                    if first["best_bm25"] else "-", cell(lexical), cell(hybrid), cell(fusion),
                    cell(hybrid, "vs_reference_fusion")])
    return common.table(["collection", "set", "best BM25 (nDCG@10)", "ours lexical",
                         "ours hybrid", "reference fusion", "hybrid / reference fusion"], out)


def render(result):
    """The tables as Markdown."""
    parts = ["### Every collection against its best BM25 (nDCG@10: ratio, and the lower end "
             "of the paired difference's 95%% bootstrap interval)\n\n%s\n\nTuning set: %s; "
             "the rest were never tuned on." % (summary(result["rows"]), ", ".join(
                 n.upper() for n in result.get("tuning", TUNING)))]
    for name in dict.fromkeys(r["collection"] for r in result["rows"]):
        rows = [r for r in result["rows"] if r["collection"] == name]
        parts.append("### %s (%s documents, %d judged queries; %s)\n\n%s\n\nBest BM25: %s."
                     % (name.upper(), common.n(rows[0]["documents"]), rows[0]["queries"],
                        "tuning set" if rows[0]["tuning"] else "never tuned on",
                        common.table(["engine", "nDCG@10", "recall@10", "x best BM25",
                                      "paired difference [95% interval]", "won / lost",
                                      "p50 ms", "p99 ms"],
                                     [[r["engine"], "%.4f" % r["ndcg10"], "%.4f" % r["recall10"]]
                                      + _versus(r) + [r["p50_ms"], r["p99_ms"]] for r in rows]),
                        rows[0]["best_bm25"]))
        for r in rows:
            if r.get("vs_reference_fusion"):
                parts.append("%s against the reference fusion: %s, %s, won / lost %s." % (
                    r["engine"], *_versus(r, "vs_reference_fusion")))
    for key, heading in (("known", "Known items"), ("paraphrases", "Paraphrases")):
        known = result[key]
        cells = [[case["query"], ", ".join(e.rsplit("/", 1)[-1] for e in case["expect"])]
                 + [case["ranks"][e] or "-" for e in known["engines"]] for case in known["rows"]]
        passed = ["%s %d of %d (top 10: %d)" % (
            e, sum(1 for c in known["rows"] if c["ranks"][e] and
                   c["ranks"][e] <= KNOWN_ITEM_RANK), len(known["rows"]),
            sum(1 for c in known["rows"] if c["ranks"][e])) for e in known["engines"]]
        parts.append("### %s (rank of the expected page; pass: top %d)\n\n%s\n\n%s."
                     % (heading, KNOWN_ITEM_RANK,
                        common.table(["query", "expected"] + known["engines"], cells),
                        "; ".join(passed)))
    for name, costs in sorted(result.get("embedding_ms_per_article", {}).items()):
        for engine, cost in sorted(costs.items()):
            parts.append("Embedding on write, %s, %s: %.3f ms an article." % (
                name.upper(), engine, cost))
    for name, why in sorted(result["skipped"].items()):
        parts.append("%s skipped: %s." % (name, why))
    parts.append("Load average (1 min) at start and end: %s, %s." % tuple(result["load"]))
    return "\n\n".join(parts)


def _collections(text):
    names = [part.strip() for part in text.split(",") if part.strip()]
    bad = [name for name in names if name not in COLLECTIONS]
    if not names or bad:
        raise argparse.ArgumentTypeError("--collections: one or more of %s, got %r"
                                         % (", ".join(COLLECTIONS), text))
    return names


def _engines(text):
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names or set(names) - {"sqlite", "postgresql"}:
        raise argparse.ArgumentTypeError("--engines: sqlite, postgresql or both, got %r" % text)
    return names


def main(argv=None):
    """Run the benchmark and print its tables."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--collections", type=_collections, default=list(COLLECTIONS),
                   help="comma-separated: %s (default all)" % ",".join(COLLECTIONS))
    p.add_argument("--engines", type=_engines, default=["sqlite"],
                   help="ours on sqlite, postgresql or both (default sqlite)")
    p.add_argument("--postgres", help="a PostgreSQL URL (default: a throwaway server)")
    p.add_argument("--dir", help="where the temporary stores go")
    p.add_argument("--json", help="also write the numbers to this file")
    args = p.parse_args(argv)
    if args.json:
        try:
            Path(args.json).open("a").close()
        except OSError as exc:
            p.error("--json: cannot write %s: %s" % (args.json, exc.strerror))
    url, cleanup = None, None
    if "postgresql" in args.engines:
        url, cleanup, why = common.server_for(args.postgres)
        if url is None:
            print("PostgreSQL not measured: %s." % why, file=sys.stderr)
            args.engines = [e for e in args.engines if e != "postgresql"] or ["sqlite"]
    try:
        result = run(args.collections, args.dir, tuple(args.engines), url)
    finally:
        if cleanup is not None:
            cleanup()
    version = common.code_version() or {}
    print("`python bench/search_quality.py %s` at %s%s\n" % (
        " ".join(sys.argv[1:] if argv is None else argv), version.get("commit"),
        " (uncommitted: %s)" % ", ".join(version["uncommitted"])
        if version.get("uncommitted") else ""))
    print(render(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
