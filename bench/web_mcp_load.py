"""Sixteen browsers' page loads against the agents' ``/mcp`` p99: does serving the pages slow
the agents down?

    python bench/web_mcp_load.py                        # 100,000 articles, 16 browsers, 3 rounds
    python bench/web_mcp_load.py --think 0              # browsers loading pages back to back
    python bench/web_mcp_load.py --articles 300 --edited 20 --seconds 2 --rounds 1 --browsers 2

One ``kb-server --http 127.0.0.1:0`` process (uvicorn, real sockets, ``--workers``) on a
SQLite store built as ``bench/web_pages.py`` builds it: ``--articles`` published articles,
``--edited`` of them with four versions. In a process of their own, ``--agents`` MCP clients
(2026-07-28, each on a kept connection, bearer token) call search (45%), read (35%) and poll
(20%), each waiting ``--interval`` seconds after an answer before its next call; every call
is timed from its request to the response's last byte. In another process, ``--browsers``
people, each signed in through the sign-in form with a token of their own (a session cookie,
as a browser holds it), load pages: the knowledge base's list, an article, its history, the
diff of its oldest and newest versions and the search page, each page's HTML then its style
sheet, with ``--think`` seconds between loads (a person reading; 0: back to back).

Each round measures the agents for ``--seconds`` alone and for ``--seconds`` with the
browsers loading pages meanwhile, in alternating order from round to round so that whatever
else loads the machine falls on both alike. The table gives each round's /mcp p50 and p99
alone and with the browsers, the ratio of the p99s, the browsers' page loads per second and
their p50/p99, and the server's CPU per second of each phase; the target is a median ratio of
at most 1.2 (p99 raised by no more than 20%).
"""

import argparse
import http.client
import json
import multiprocessing
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from urllib.parse import quote, urlencode

import common
import corpus
import web_pages
from http_load import Connection, cpu_s
from kbcite import KBStore
from kbcite.sim.plan import draw_kind

KB = web_pages.KB
SEED = 20261108
MIX = (("search", 0.45), ("read", 0.35), ("poll", 0.20))
PAGES = (("list", 0.10), ("article", 0.40), ("history", 0.15), ("diff", 0.15),
         ("search page", 0.20))
TARGET_RATIO = 1.2
# Every process of a phase starts its clients together this long after it is spawned.
START_S = 1.0
_CSRF = re.compile(r'<input type="hidden" name="csrf" value="([^"]*)">')


def start_server(path, workers, folder):
    """``(the server process, its port)``: kb-server --http on port 0, its log in a file."""
    log = open(os.path.join(folder, "server.log"), "w+", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "kbcite.server", "--db", path, "--http",
                             "127.0.0.1:0", "--workers", str(workers)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                            env=common.child_env())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        log.seek(0)
        found = re.search(r"^kb-server: serving http://[^:]+:(\d+)/mcp$", log.read(), re.M)
        if found:
            return proc, int(found.group(1))
        if proc.poll() is not None:
            raise SystemExit("the server exited: %s" % open(log.name).read()[-2000:])
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not start in 120 s")


def sign_in(port, token):
    """A session cookie for ``token``, through the sign-in form as a browser gets one."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/login")
    response = conn.getresponse()
    page = response.read().decode("utf-8")
    login = [v.split(";")[0] for k, v in response.getheaders() if k.lower() == "set-cookie"]
    conn.request("POST", "/login", body=urlencode({"csrf": _CSRF.search(page).group(1),
                                                   "next": "/", "token": token}),
                 headers={"Content-Type": "application/x-www-form-urlencoded",
                          "Origin": "http://127.0.0.1:%d" % port, "Cookie": "; ".join(login)})
    response = conn.getresponse()
    response.read()
    conn.close()
    for name, value in response.getheaders():
        if name.lower() == "set-cookie" and value.startswith("kb_session="):
            return value.split(";")[0]
    raise SystemExit("signing in failed: %d" % response.status)


def agent(port, token, name, until, interval, titles, out):
    """One agent until ``until``: ``(kind, seconds)`` of each call, and what went wrong."""
    rng = random.Random("%s-%d" % (name, SEED))
    conn = Connection(port, token)
    timings, errors = [], []
    while time.time() < until:
        kind = draw_kind(MIX, rng.random())
        if kind == "search":
            call = ("search_knowledge_base", {"knowledge_base_id": KB, "query": corpus.question(
                titles[int(rng.random() * len(titles))])})
        elif kind == "read":
            call = ("read_knowledge_article", {"knowledge_base_id": KB, "article_id":
                                               "art-%06d" % (1 + int(rng.random() * len(titles)))})
        else:
            call = ("poll_resource_events", {"resource_type": "knowledge_base",
                                             "resource_id": KB, "limit": 100})
        try:
            seconds, reply = conn.call(*call)
        except (OSError, http.client.HTTPException) as exc:
            errors.append("%s: %s" % (type(exc).__name__, exc))
            conn = Connection(port, token)
            continue
        timings.append((kind, seconds))
        if "result" not in reply or reply["result"].get("isError"):
            errors.append(str(reply)[:200])
        time.sleep(interval)
    out.append({"timings": timings, "errors": errors})


def browser(port, cookie, name, until, think, paths, out):
    """One person until ``until``: the seconds of each page load (its HTML, then its style
    sheet), and any answer that was not 200."""
    rng = random.Random("%s-%d" % (name, SEED))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    loads, errors = [], []
    while time.time() < until:
        page = draw_kind(PAGES, rng.random())
        choices = paths[page]
        target = choices[int(rng.random() * len(choices))]
        started = time.perf_counter()
        try:
            for path in (target, "/static/style.css"):
                conn.request("GET", path, headers={"Cookie": cookie})
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    errors.append("%s: %d" % (path, response.status))
        except (OSError, http.client.HTTPException) as exc:
            errors.append("%s: %s" % (type(exc).__name__, exc))
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            continue
        loads.append((page, time.perf_counter() - started))
        time.sleep(think)
    out.append({"loads": loads, "errors": errors})


def _ready(pause):
    """This process's ID, after a pause (so that another process takes the next task)."""
    time.sleep(pause)
    return os.getpid()


def group(kind, args_list, start_at, seconds):
    """Threads of one process, each ``kind`` (agent or browser) with its arguments, started
    at ``start_at`` and run for ``seconds``: their outcomes."""
    time.sleep(max(0.0, start_at - time.time()))
    out, threads = [], []
    target = agent if kind == "agent" else browser
    for args in args_list:
        threads.append(threading.Thread(target=target, args=args[:3] + (
            start_at + seconds,) + args[3:] + (out,)))
        threads[-1].start()
    for thread in threads:
        thread.join()
    return out


def phase(pool, server, jobs, seconds):
    """One phase: the jobs' processes started together; ``(outcomes by kind, the server's
    CPU seconds per second meanwhile)``."""
    start_at = time.time() + START_S
    pending = {kind: pool.apply_async(group, (kind, args, start_at, seconds))
               for kind, args in jobs.items()}
    time.sleep(max(0.0, start_at - time.time()))
    before, began = cpu_s(server.pid), time.time()
    done = {kind: result.get(timeout=seconds + 120) for kind, result in pending.items()}
    if not all(one["timings"] for one in done["agent"]):
        raise SystemExit("an agent made no call in its phase: the machine is too busy to start "
                         "a phase within %g s" % START_S)
    after, took = cpu_s(server.pid), time.time() - began
    return done, (after - before) / took if before is not None and after is not None else None


def figures(agents, browsers, cpu, seconds):
    """One phase's numbers: /mcp p50/p99 (ms), calls, errors; the pages' loads/s, p50/p99."""
    calls = [s for a in agents for _, s in a["timings"]]
    out = {"mcp_p50_ms": 1000 * common.median(calls), "mcp_p99_ms":
           1000 * common.percentile(calls, 99), "calls": len(calls),
           "errors": sum(len(a["errors"]) for a in agents + browsers),
           "server_cpu_per_s": round(cpu, 3) if cpu is not None else None}
    loads = [s for b in browsers for _, s in b["loads"]]
    if loads:
        out.update(page_loads_per_s=len(loads) / seconds,
                   page_p50_ms=1000 * common.median(loads),
                   page_p99_ms=1000 * common.percentile(loads, 99))
    return out


def browse_paths(path, ids, queries):
    """The URLs the browsers load, by page."""
    base = "/kb/%s/articles/" % KB
    with KBStore(path) as store:
        diffs = []
        for aid in ids:
            rows = store.history(KB, aid)
            diffs.append(base + "%s/diff?from=%s&to=%s" % (aid, quote(rows[0]["updated_at"]),
                                                            quote(rows[-1]["updated_at"])))
    return {"list": ["/kb/%s?page=%d" % (KB, n) for n in range(1, web_pages.LIST_PAGES + 1)],
            "article": [base + aid for aid in ids],
            "history": [base + aid + "/history" for aid in ids], "diff": diffs,
            "search page": ["/kb/%s/search?q=%s" % (KB, quote(q)) for q in queries]}


def run(articles=100000, edited=500, agents=4, interval=0.05, browsers=16, think=1.0,
        seconds=20.0, rounds=3, workers=1):
    """Every round's phases and the summary."""
    folder = tempfile.mkdtemp(prefix="kb-bench-web-mcp-")
    try:
        path = os.path.join(folder, "web.sqlite3")
        started = time.perf_counter()
        ids, queries, token = web_pages.build(path, articles, edited)
        with KBStore(path) as store:
            people = [store.tokens.create("person-%d" % i, [KB], "ask") for i in range(browsers)]
            titles = [row["title"] for row in store.list_articles(KB)]
        build_s = time.perf_counter() - started
        paths = browse_paths(path, ids, queries)
        server, port = start_server(path, workers, folder)
        try:
            cookies = [sign_in(port, person) for person in people]
            agent_args = [(port, token, "a%d" % i, interval, titles) for i in range(agents)]
            browser_args = [(port, cookie, "b%d" % i, think, paths)
                            for i, cookie in enumerate(cookies)]
            results = []
            with multiprocessing.get_context("spawn").Pool(2) as pool:
                # Both processes up (each spawned one imports this module) before any phase
                # begins: a late one would start after its phase had ended.
                seen = set()
                while len(seen) < 2:
                    seen.update(pool.map(_ready, [0.2, 0.2], chunksize=1))
                for n in range(rounds):
                    one = {}
                    order = ("alone", "with") if n % 2 == 0 else ("with", "alone")
                    for name in order:
                        jobs = {"agent": agent_args}
                        if name == "with":
                            jobs["browser"] = browser_args
                        done, cpu = phase(pool, server, jobs, seconds)
                        one[name] = figures(done["agent"], done.get("browser", []), cpu,
                                            seconds)
                    one["ratio"] = one["with"]["mcp_p99_ms"] / one["alone"]["mcp_p99_ms"]
                    one["load"] = common.load()
                    results.append(one)
        finally:
            server.terminate()
            server.wait(timeout=60)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ratios = [r["ratio"] for r in results]
    return {"articles": articles, "edited": edited, "agents": agents, "interval": interval,
            "browsers": browsers, "think": think, "seconds": seconds, "rounds": rounds,
            "workers": workers, "build_s": round(build_s, 1), "rounds_data": results,
            "ratio": round(common.median(ratios), 3), "ratio_range": [round(min(ratios), 3),
                                                                     round(max(ratios), 3)],
            "machine": common.machine(), "load": common.load(), "code": common.code_version()}


def render(result):
    """Each round as a row of a Markdown table, and the verdict."""
    rows = []
    for n, r in enumerate(result["rounds_data"], 1):
        a, w = r["alone"], r["with"]
        rows.append([str(n), "%.1f / %.1f" % (a["mcp_p50_ms"], a["mcp_p99_ms"]),
                     "%.1f / %.1f" % (w["mcp_p50_ms"], w["mcp_p99_ms"]), "%.2fx" % r["ratio"],
                     "%.1f" % w.get("page_loads_per_s", 0),
                     "%.1f / %.1f" % (w.get("page_p50_ms", 0), w.get("page_p99_ms", 0)),
                     "%s / %s" % (a["server_cpu_per_s"], w["server_cpu_per_s"]),
                     "%d / %d" % (a["errors"], w["errors"]), str(r["load"])])
    text = common.table(["round", "/mcp p50 / p99 ms alone", "with browsers", "p99 ratio",
                         "page loads/s", "page p50 / p99 ms", "server CPU/s alone / with",
                         "errors", "load"], rows)
    text += ("\n\n%s articles (%s with four versions); %d agents, %.3g s between an agent's "
             "calls; %d browsers, %.3g s between a browser's page loads; %.3g s a phase, "
             "%d worker%s. Median p99 ratio %.2fx (range %.2f-%.2f), target <= %.1fx: %s."
             % (common.n(result["articles"]), common.n(result["edited"]), result["agents"],
                result["interval"], result["browsers"], result["think"], result["seconds"],
                result["workers"], "" if result["workers"] == 1 else "s", result["ratio"],
                result["ratio_range"][0], result["ratio_range"][1], TARGET_RATIO,
                "met" if result["ratio"] <= TARGET_RATIO else "missed"))
    return text


def main(argv=None):
    """Run the benchmark and print its table (``--json``: the whole result)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--articles", type=int, default=100000)
    parser.add_argument("--edited", type=int, default=500)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--interval", type=float, default=0.05,
                        help="seconds an agent waits after an answer (default 0.05)")
    parser.add_argument("--browsers", type=int, default=16)
    parser.add_argument("--think", type=float, default=1.0,
                        help="seconds a browser waits between page loads (default 1; 0: back "
                             "to back)")
    parser.add_argument("--seconds", type=float, default=20.0, help="a phase's length")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    for name in ("articles", "edited", "agents", "browsers", "rounds", "workers"):
        if getattr(args, name) < 1:
            parser.error("argument --%s: must be at least 1" % name)
    if args.edited > args.articles:
        parser.error("argument --edited: must be at most --articles")
    for name in ("interval", "think"):
        if getattr(args, name) < 0:
            parser.error("argument --%s: must be 0 or more" % name)
    if args.seconds <= 0:
        parser.error("argument --seconds: must be positive")
    result = run(args.articles, args.edited, args.agents, args.interval, args.browsers,
                 args.think, args.seconds, args.rounds, args.workers)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
