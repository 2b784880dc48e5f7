"""The web pages' server time at 100,000 articles: article, history and diff pages, and the
search page beside the search tool's own time.

    python bench/web_pages.py                          # 100,000 articles, 3 runs
    python bench/web_pages.py --articles 1000 --requests 50 --repeats 1   # a smoke run

A SQLite store of ``--articles`` published articles of about 300 words (the corpus of
``bench/latency.py``, bulk loaded), ``--edited`` of them saved three more times (a history
of four versions, each save rewriting one paragraph). The pages are asked of ``kb-server``'s
ASGI app in this process (``create_app``, the same app ``--http`` serves), signed in with a
session cookie, each request timed from the app's call to its last byte: the server's time,
routing, session, store, rendering, without a network. Each run times ``--requests`` of
each page on uniformly chosen edited articles: a page of the knowledge base's list (one of
its first 40, newest change first), the article, its history, the diff of its oldest and
newest versions; then the search page and the search tool (``call_tool`` on a
store of its own) with the same queries, alternately. The table gives each run's median of
p50 and of p99, and the search page's p50 over the tool's.
"""

import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
import time

import common
import corpus
from kbcite import KBStore
from kbcite.server import web
from kbcite.server.asgi import create_app

KB = "bench"
SEED = 20261108
HOST = b"127.0.0.1:8765"
# Untimed requests first: the first pages also pay for templates compiling and index pages
# coming from disk.
WARMUP = 20

# The list's pages asked for: the first ones, which people read (each 50 articles).
LIST_PAGES = 40

TARGETS = {"p50_ms": 15.0, "p99_ms": 60.0, "search_ratio": 1.5}


def build(path, count, edited, seed=SEED):
    """The store; returns ``(the edited articles' IDs, queries, the token)``."""
    rng = random.Random(seed)
    articles = corpus.articles(rng, count)
    with KBStore(path, create=True) as store:
        store.create_knowledge_base(KB)
        ids = store.create_articles(KB, articles)
        store.optimize(KB)
        chosen = rng.sample(range(count), edited)
        for i in chosen:
            paragraphs = articles[i][1].split("\n\n")
            for save in range(3):
                paragraphs[int(rng.random() * len(paragraphs))] = \
                    "Rewritten %d by a person, with a few new words." % save
                store.save_article(KB, ids[i], content="\n\n".join(paragraphs), actor="bench")
        token = store.tokens.create("bench", [KB], "allow")
    return [ids[i] for i in chosen], [corpus.question(articles[i][0]) for i in chosen], token


class Client:
    """Requests to the app in this process, each timed to its last byte."""

    def __init__(self, app, cookie):
        self.app = app
        self.cookie = cookie
        self.loop = asyncio.new_event_loop()

    def get(self, path, query=""):
        """``(seconds, status, body bytes)`` of one GET."""
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
                 "query_string": query.encode("utf-8"), "root_path": "",
                 "headers": [(b"host", HOST), (b"cookie", self.cookie.encode("latin-1"))],
                 "server": ("127.0.0.1", 8765), "client": ("127.0.0.1", 50000)}
        out = {"body": []}

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            if message["type"] == "http.response.start":
                out["status"] = message["status"]
            else:
                out["body"].append(message.get("body", b""))

        started = time.perf_counter()
        self.loop.run_until_complete(self.app(scope, receive, send))
        return time.perf_counter() - started, out["status"], b"".join(out["body"])


def _quote(text):
    from urllib.parse import quote
    return quote(text, safe="")


def measure(client, store, ids, versions, queries, requests, rng):
    """One run: ``{page: [seconds...]}`` for each page and for the search tool."""
    times = {"list": [], "article": [], "history": [], "diff": [], "search page": [],
             "search tool": []}
    base = "/kb/%s/articles/" % KB
    for _ in range(requests):
        i = int(rng.random() * len(ids))
        aid = ids[i]
        oldest, newest = versions[aid]
        for page, path, query in (
                ("list", "/kb/%s" % KB, "page=%d" % (1 + int(rng.random() * LIST_PAGES))),
                ("article", base + aid, ""), ("history", base + aid + "/history", ""),
                ("diff", base + aid + "/diff", "from=%s&to=%s" % (_quote(oldest),
                                                                  _quote(newest)))):
            seconds, status, body = client.get(path, query)
            assert status == 200, (page, status, body[:300])
            times[page].append(seconds)
        q = queries[int(rng.random() * len(queries))]
        seconds, status, body = client.get("/kb/%s/search" % KB, "q=" + _quote(q))
        assert status == 200 and b'class="hits"' in body, (status, body[:300])
        times["search page"].append(seconds)
        started = time.perf_counter()
        store.call_tool("search_knowledge_base", {"knowledge_base_id": KB, "query": q,
                                                  "limit": 20}, granted={KB})
        times["search tool"].append(time.perf_counter() - started)
    return times


def run(articles, edited, requests, repeats):
    """Every run's percentiles, and the summary."""
    folder = tempfile.mkdtemp(prefix="kb-bench-web-")
    try:
        path = os.path.join(folder, "web.sqlite3")
        started = time.perf_counter()
        ids, queries, token = build(path, articles, edited)
        build_s = time.perf_counter() - started
        app = create_app(path, signing_secret=b"bench" * 8)
        pages = web.pages_for(app)
        app._web = pages
        cookie = "kb_session=" + pages.sessions.sign_in(token)
        client = Client(app, cookie)
        with KBStore(path) as store:
            versions = {}
            for aid in ids:
                rows = store.history(KB, aid)
                versions[aid] = (rows[0]["updated_at"], rows[-1]["updated_at"])
            rng = random.Random(SEED)
            measure(client, store, ids, versions, queries, WARMUP, rng)
            runs = []
            for _ in range(repeats):
                times = measure(client, store, ids, versions, queries, requests, rng)
                runs.append({page: {"p50_ms": 1000 * common.median(values),
                                    "p99_ms": 1000 * common.percentile(values, 99)}
                             for page, values in times.items()})
        app.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    summary = {}
    for page in runs[0]:
        summary[page] = {key: round(common.median([r[page][key] for r in runs]), 3)
                         for key in ("p50_ms", "p99_ms")}
    summary["search_ratio"] = round(common.median([
        r["search page"]["p50_ms"] / r["search tool"]["p50_ms"] for r in runs]), 2)
    return {"articles": articles, "edited": edited, "requests": requests, "repeats": repeats,
            "build_s": round(build_s, 1), "runs": runs, "summary": summary,
            "machine": common.machine(), "load": common.load(),
            "code": common.code_version()}


def render(result):
    """The summary as a Markdown table, with the targets."""
    s = result["summary"]
    rows = []
    for page in ("list", "article", "history", "diff", "search page", "search tool"):
        verdict = "-"
        if page in ("article", "history", "diff"):
            verdict = "met" if (s[page]["p50_ms"] <= TARGETS["p50_ms"]
                                and s[page]["p99_ms"] <= TARGETS["p99_ms"]) else "missed"
        rows.append([page, "%.2f" % s[page]["p50_ms"], "%.2f" % s[page]["p99_ms"], verdict])
    text = common.table(["page", "p50 ms", "p99 ms", "p50 <= 15, p99 <= 60"], rows)
    text += ("\n\n%s articles, %s with four versions; %d requests of each page a run, median "
             "of %d runs. Search page / search tool, p50: %.2fx (target <= %.1fx: %s)."
             % (common.n(result["articles"]), common.n(result["edited"]), result["requests"],
                result["repeats"], s["search_ratio"], TARGETS["search_ratio"],
                "met" if s["search_ratio"] <= TARGETS["search_ratio"] else "missed"))
    return text


def main(argv=None):
    """Run the benchmark and print its table (``--json``: the whole result)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--articles", type=int, default=100000)
    parser.add_argument("--edited", type=int, default=500)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    for name in ("articles", "edited", "requests", "repeats"):
        if getattr(args, name) < 1:
            parser.error("argument --%s: must be at least 1" % name)
    if args.edited > args.articles:
        parser.error("argument --edited: must be at most --articles (%d)" % args.articles)
    result = run(args.articles, args.edited, args.requests, args.repeats)
    print(json.dumps(result, indent=1) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
