"""kb-server over Streamable HTTP under load, side by side with the server it replaced and with
an equivalent server on the official MCP SDK.

    python bench/http_load.py                                # new, old and sdk, 3 rounds
    python bench/http_load.py --targets new --workers 1,2,4  # the new server's processes
    python bench/http_load.py --clients 1 --calls 1000       # one client, sequentially
    python bench/http_load.py --against bc177a3 --targets new,old,sdk-bare --clients 1,16

A fresh store (SQLite, or PostgreSQL with a URL) of 1,000 articles per run, one server, a token
that may edit. Each client thread keeps its own HTTP connection and sends 2026-07-28 requests:
search (40%), read (30%), poll (15%) and edit (15%: read, then edit with the version read; a
``version_conflict`` is re-read and retried with a new key). Afterwards: every response was a
JSON-RPC result (no protocol error), the store's audit is clean, and every edit a client saw
accepted is in its article exactly once. Besides the load: the server's memory idle and at its
peak under load (every process of it), and two round trips without a tool, each 300 times in
sequence: a POST without a token (401; nothing touches the store), on a connection of its own
each, and ``server/discover`` on one kept connection (the token check is its only store read).

The targets, each started as a process the same way and run in turn, round by round, so that
whatever else loads the machine falls on each alike:

- ``new``: this checkout's ``kb-server --http`` (``--workers N``);
- ``old``: the ``http.server`` transport this one replaced, from git (``--against REV``, or
  ``--old-ref``; by default the parent of the commit that removed ``kbcite/server/http.py``),
  in a ``git worktree``: a commit's ``kbcite`` package, or before it the ``kb_server.py`` and
  ``kb_store.py`` of the top level (one that takes ``--threads`` runs as ``new`` does, in one
  process: its ``--workers`` are processes);
- ``sdk``: ``bench/sdk_twin.py``, the same store's tools on the official SDK's Streamable HTTP
  app (``mcp``, Python 3.10 and newer); ``sdk-bare``: the same without its auth layer.

Every round runs each target once, in turn (so the rounds alternate them), and with
``--clients 1,16`` each client count too. Besides calls/s, each run reports the server's CPU
time per call (user and system, every process of it); the summary gives each figure's median
over the rounds with its spread (lowest to highest), and its ratio to the other targets'.
"""

import argparse
import http.client
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import common
import corpus
from history import worktree
from kbcite.sim.plan import draw_kind

KB = "load"
SEED = 20261108
MIX = (("search", 0.40), ("read", 0.30), ("poll", 0.15), ("edit", 0.15))
HOT = 20  # the articles edits go to, so that clients meet on some of them
THREADS = 8  # tool calls at once per server process, on every target
ROUND_TRIPS = 300
TARGETS = ("new", "old", "sdk", "sdk-bare")
HERE = os.path.dirname(os.path.abspath(__file__))
# Client processes start their clients together this long after they are spawned.
CLIENT_START_S = 5.0

# Builds the store for a target with that target's own package (the articles on stdin), so a
# server from another commit opens a store of its own schema.
MAKE_STORE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
if os.path.isdir(os.path.join(sys.argv[1], "kbcite")):
    from kbcite import KBStore
else:  # a commit from before the package: the top level's kb_store
    from kb_store import KBStore
rows = [tuple(row) for row in json.loads(sys.stdin.read())]
with KBStore(sys.argv[2], create=True) as store:
    store.create_knowledge_base(sys.argv[3])
    store.create_articles(sys.argv[3], rows)
    tokens = getattr(store, "tokens", None)
    if hasattr(tokens, "create"):
        token = tokens.create("load", [sys.argv[3]], "allow")
    else:  # a commit from before the store handed its tokens out as store.tokens
        token = store.create_token("load", [sys.argv[3]], "allow")
    print(json.dumps({"token": token, "head": store.head_sequence(sys.argv[3])}))
"""


class Connection:
    """One client's HTTP connection, speaking 2026-07-28."""

    def __init__(self, port, token):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.token = token
        self.next_id = 0

    def request(self, method, params, name=None):
        """One request; returns (seconds, the JSON-RPC response or what was answered)."""
        self.next_id += 1
        params = dict(params, _meta={"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                     "io.modelcontextprotocol/clientCapabilities": {}})
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                           "params": params})
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "Authorization": "Bearer " + self.token, "MCP-Protocol-Version": "2026-07-28",
                   "Mcp-Method": method}
        if name:
            headers["Mcp-Name"] = name
        started = time.perf_counter()
        self.conn.request("POST", "/mcp", body=body, headers=headers)
        response = self.conn.getresponse()
        data = response.read()
        seconds = time.perf_counter() - started
        if response.status != 200:
            return seconds, {"http_status": response.status, "body": data[:200].decode()}
        return seconds, json.loads(data)

    def call(self, name, arguments):
        """One tools/call; returns (seconds, the JSON-RPC response)."""
        return self.request("tools/call", {"name": name, "arguments": arguments}, name)


def client(port, token, name, calls, titles, out):
    """One client thread: ``calls`` mixed calls; puts its timings and outcomes in ``out``."""
    rng = random.Random("%s-%d" % (name, SEED))
    conn = Connection(port, token)
    timings = {kind: [] for kind, _ in MIX}
    errors, dropped, accepted, conflicts, n = [], [], [], 0, 0

    def tool(kind, tool_name, arguments):
        nonlocal conn
        try:
            seconds, reply = conn.call(tool_name, arguments)
        except (OSError, http.client.HTTPException) as exc:
            # A connection refused, reset or cut: counted, and the client connects again.
            dropped.append("%s: %s" % (type(exc).__name__, exc))
            conn = Connection(port, token)
            return None
        timings[kind].append(seconds)
        if "result" not in reply:
            errors.append(reply)
            return None
        return reply["result"]

    while n < calls:
        kind = draw_kind(MIX, rng.random())
        if kind == "search":
            query = corpus.question(titles[int(rng.random() * len(titles))])
            tool("search", "search_knowledge_base", {"knowledge_base_id": KB, "query": query})
            n += 1
        elif kind == "read":
            tool("read", "read_knowledge_article", {"knowledge_base_id": KB,
                                                    "article_id": "art-%06d" % (1 + int(
                                                        rng.random() * len(titles)))})
            n += 1
        elif kind == "poll":
            tool("poll", "poll_resource_events", {"resource_type": "knowledge_base",
                                                  "resource_id": KB, "limit": 100})
            n += 1
        else:
            article_id = "art-%06d" % (1 + int(rng.random() * HOT))
            line = "%s edit %d" % (name, n)
            for attempt in range(100):
                read = tool("edit", "read_knowledge_article", {"knowledge_base_id": KB,
                                                               "article_id": article_id})
                n += 1
                if read is None:
                    break
                current = read["structuredContent"]
                result = tool("edit", "edit_knowledge_article", {
                    "knowledge_base_id": KB, "article_id": article_id,
                    "content": current["content"] + "\n" + line,
                    "expected_version": current["updated_at"],
                    "idempotency_key": "%s-%d" % (line, attempt)})
                n += 1
                if result is None:
                    break
                if result.get("isError"):
                    code = json.loads(result["content"][0]["text"])["error"]["code"]
                    if code == "version_conflict":
                        conflicts += 1
                        continue
                    errors.append(result)
                    break
                accepted.append((article_id, line))
                break
    out.append({"timings": timings, "errors": errors, "dropped": dropped, "accepted": accepted,
                "conflicts": conflicts})


def client_group(port, token, names, calls, titles, start_at=None):
    """Clients ``names`` on threads of one process, from ``start_at`` (``time.time()``, the same
    for every process) or now: their outcomes, and when they started and ended."""
    out, threads = [], []
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))
    started = time.time()
    for name in names:
        threads.append(threading.Thread(target=client, args=(port, token, name, calls, titles,
                                                             out)))
        threads[-1].start()
    for thread in threads:
        thread.join()
    return out, started, time.time()


def run_clients(port, token, clients, calls, titles, processes):
    """``(every client's outcome, the seconds from the first start to the last end)``:
    ``clients`` threads in this process, or spread over ``processes`` processes (a client
    process is bound by its own interpreter lock too)."""
    names = ["c%d" % i for i in range(clients)]
    if processes <= 1:
        out, started, ended = client_group(port, token, names, calls, titles)
        return out, ended - started
    groups = [names[i::processes] for i in range(processes)]
    start_at = time.time() + CLIENT_START_S  # every process started and ready by then
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        done = pool.starmap(client_group, [(port, token, group, calls, titles, start_at)
                                           for group in groups if group])
    return ([o for out, _, _ in done for o in out],
            max(e for _, _, e in done) - min(s for _, s, _ in done))


# -- the servers -------------------------------------------------------------------------------


def old_ref():
    """The commit whose kb-server is the http.server transport this one replaced: the parent
    of the commit that removed kbcite/server/http.py."""
    done = subprocess.run(["git", "rev-list", "-1", "HEAD", "--", "kbcite/server/http.py"],
                          cwd=str(common.ROOT), capture_output=True, text=True, timeout=60)
    removed = done.stdout.strip()
    if done.returncode != 0 or not removed:
        raise RuntimeError("no commit of this checkout removed kbcite/server/http.py; name the "
                           "old server's commit with --old-ref")
    return removed + "^"


def server_command(target, address, tree, workers):
    """``(argv, environment)`` that starts ``target`` on ``address``."""
    env = dict(os.environ, PYTHONPATH=tree)
    if target in ("sdk", "sdk-bare"):
        bare = ["--no-auth", "--grant", KB] if target == "sdk-bare" else []
        return [sys.executable, os.path.join(HERE, "sdk_twin.py"), "--db", address, "--http",
                "127.0.0.1:0", "--threads", str(THREADS)] + bare, env
    argv = [sys.executable, "-m", "kbcite.server", "--db", address, "--http", "127.0.0.1:0"]
    if target == "old" and os.path.exists(os.path.join(tree, "kb_server.py")):
        argv = [sys.executable, os.path.join(tree, "kb_server.py"), "--db", address, "--http",
                "127.0.0.1:0"]
    if target == "old" and not _takes_threads(tree):
        return argv + ["--workers", str(THREADS)], env  # threads, before --workers were processes
    return argv + ["--threads", str(THREADS), "--workers", str(workers)], env


def _takes_threads(tree):
    """Whether the kb-server of ``tree`` takes ``--threads`` (its ``--workers`` are processes
    then, so an old commit of this era is started as ``new`` is, one process)."""
    path = os.path.join(tree, "kbcite", "server", "options.py")
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as fh:
        return '"--threads"' in fh.read()


def process_tree(pid):
    """A process and its children's IDs."""
    pids = [pid]
    try:
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True,
                                  timeout=10).stdout.split()
        pids += [int(child) for child in children]
    except (OSError, subprocess.SubprocessError):
        pass
    return pids


def cpu_s(pid):
    """The CPU seconds (user and system) a process and its children have used (Linux; None
    elsewhere)."""
    ticks, found = 0, False
    for one in process_tree(pid):
        try:
            with open("/proc/%d/stat" % one, encoding="utf-8") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (stat fields 14 and 15)
        found = True
    return ticks / os.sysconf("SC_CLK_TCK") if found else None


def rss_mb(pid):
    """The resident memory of a process and its children, in MB (Linux; None elsewhere)."""
    total, found = 0, False
    for one in process_tree(pid):
        try:
            with open("/proc/%d/status" % one, encoding="utf-8") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        found = True
        except OSError:
            continue
    return round(total / 1024, 1) if found else None


def round_trips(port, token, refuses=True):
    """p50 and p99 (ms) of a POST without a token (401) on a fresh connection each, where the
    server ``refuses`` one, and of server/discover on one kept connection."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    anonymous = []
    for _ in range(ROUND_TRIPS if refuses else 0):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        started = time.perf_counter()
        conn.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        anonymous.append(time.perf_counter() - started)
        conn.close()
        assert response.status == 401, response.status
    conn, discover = Connection(port, token), []
    for _ in range(ROUND_TRIPS):
        seconds, reply = conn.request("server/discover", {})
        assert "result" in reply, reply
        discover.append(seconds)

    def summary(seconds):
        return {"p50_ms": round(common.median(seconds) * 1000, 2),
                "p99_ms": round(common.percentile(seconds, 99) * 1000, 2)}
    found = {"discover": summary(discover)}
    if anonymous:
        found["no_store"] = summary(anonymous)
    return found


def run(clients=16, calls=250, directory=None, engine="sqlite", postgres_url=None,
        articles=1000, target="new", workers=1, tree=None, measure_round_trips=False,
        client_processes=1):
    """Build a store, start one target server, run the clients; returns the figures."""
    if clients < 1 or calls < 1 or articles < HOT:
        raise ValueError("http load needs clients >= 1, calls >= 1, articles >= %d" % HOT)
    tree = tree or str(common.ROOT)
    tmp = tempfile.mkdtemp(prefix="kb-bench-http-", dir=directory)
    address = common.store_address(engine, tmp, "httpload", postgres_url)
    server = None
    try:
        rows = corpus.articles(random.Random(SEED), articles)
        made = subprocess.run([sys.executable, "-c", MAKE_STORE, tree, address, KB],
                              input=json.dumps(rows), capture_output=True, text=True,
                              timeout=600)
        if made.returncode != 0:
            raise RuntimeError("the %s store was not made: %s" % (target, made.stderr[-2000:]))
        made = json.loads(made.stdout)
        token, head, titles = made["token"], made["head"], [title for title, _ in rows]
        argv, env = server_command(target, address, tree, workers)
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, env=env, cwd=tree)
        port, said = None, []
        while port is None:
            line = server.stderr.readline()
            if not line:
                raise RuntimeError("the %s server did not start: %s" % (target, "".join(said)))
            said.append(line)
            if line.startswith("kb-server: serving http://"):
                port = int(line.rsplit(":", 1)[1].split("/")[0])
        threading.Thread(target=lambda: server.stderr.read(), daemon=True).start()
        Connection(port, token).request("server/discover", {})  # every process is up
        time.sleep(0.5)
        idle_mb = rss_mb(server.pid)
        trips = (round_trips(port, token, refuses=target != "sdk-bare")
                 if measure_round_trips else None)
        peak = [idle_mb or 0]
        done = threading.Event()

        def sample():
            while not done.wait(0.2):
                peak.append(rss_mb(server.pid) or 0)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        load_start = common.load()
        cpu_start = cpu_s(server.pid)
        out, wall = run_clients(port, token, clients, calls, titles, client_processes)
        cpu_end = cpu_s(server.pid)
        done.set()
        sampler.join()
        accepted = [a for o in out for a in o["accepted"]]
        errors = [e for o in out for e in o["errors"]]
        lost, problems, events = check_store(tree, address, accepted, head)
        per_tool = {}
        for kind, _ in MIX:
            seconds = [s for o in out for s in o["timings"][kind]]
            per_tool[kind] = {"calls": len(seconds),
                              "p50_ms": round(common.median(seconds) * 1000, 2),
                              "p99_ms": round(common.percentile(seconds, 99) * 1000, 2)}
        total = sum(t["calls"] for t in per_tool.values())
        cpu_ms = (round((cpu_end - cpu_start) * 1000 / total, 3)
                  if cpu_start is not None and cpu_end is not None else None)
        return {"target": target, "workers": workers, "engine": engine, "clients": clients,
                "server_cpu_ms_per_call": cpu_ms,
                "client_processes": client_processes,
                "calls_per_client": calls,
                "calls": sum(t["calls"] for t in per_tool.values()), "wall_s": round(wall, 1),
                "calls_per_s": round(sum(t["calls"] for t in per_tool.values()) / wall, 1),
                "per_tool": per_tool, "protocol_errors": len(errors),
                "error_samples": errors[:3],
                "connection_errors": sum(len(o["dropped"]) for o in out),
                "connection_error_samples": [d for o in out for d in o["dropped"]][:3],
                "accepted_edits": len(accepted),
                "conflicts": sum(o["conflicts"] for o in out), "lost_updates": lost,
                "events": events, "audit": problems or "ok", "rss_idle_mb": idle_mb,
                "rss_peak_mb": max(peak), "round_trips": trips,
                "load": [load_start, common.load()]}
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        common.drop_store(engine, address, postgres_url)
        shutil.rmtree(tmp, ignore_errors=True)


CHECK_STORE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
if os.path.isdir(os.path.join(sys.argv[1], "kbcite")):
    from kbcite import KBStore
else:  # a commit from before the package: the top level's kb_store
    from kb_store import KBStore
accepted, head = json.loads(sys.stdin.read()), int(sys.argv[3])
lost = 0
with KBStore(sys.argv[2]) as store:
    problems = store.audit()
    for article_id in sorted({a for a, _ in accepted}):
        lines = store.get_article(sys.argv[4], article_id)["content"].split("\n")
        lost += sum(lines.count(line) != 1 for a, line in accepted if a == article_id)
    events = store.head_sequence(sys.argv[4]) - head
print(json.dumps([lost, problems, events]))
"""


def check_store(tree, address, accepted, head):
    """``(lost updates, audit problems, events written)``, read with the target's package."""
    done = subprocess.run([sys.executable, "-c", CHECK_STORE, tree, address, str(head), KB],
                          input=json.dumps(accepted), capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError("the store could not be checked: %s" % done.stderr[-2000:])
    return json.loads(done.stdout)


def render(results):
    """The load runs as a Markdown table, one row per run."""
    rows = []
    for r in results:
        tools = r["per_tool"]
        trips = r.get("round_trips") or {}
        rows.append([r.get("target", "new"), r.get("workers", 1), r["engine"],
                     "%d x %d" % (r["clients"], r["calls_per_client"]), "%.0f" % r["calls_per_s"]]
                    + ["%s / %s" % (tools[k]["p50_ms"], tools[k]["p99_ms"]) for k, _ in MIX]
                    + ["%s / %s" % (r.get("rss_idle_mb"), r.get("rss_peak_mb"))]
                    + ["%s / %s" % (trips[k]["p50_ms"], trips[k]["p99_ms"]) if k in trips
                       else "" for k in ("no_store", "discover")]
                    + [r.get("server_cpu_ms_per_call", ""), r["protocol_errors"],
                       r["connection_errors"],
                       common.n(r["accepted_edits"]), r["lost_updates"],
                       "ok" if r["audit"] == "ok" else "FAILED"])
    return common.table(["server", "processes", "engine", "clients x calls", "calls/s",
                         "search p50 / p99 ms", "read p50 / p99 ms", "poll p50 / p99 ms",
                         "edit p50 / p99 ms", "RSS idle / peak MB", "no-store p50 / p99 ms",
                         "discover p50 / p99 ms", "server CPU ms / call", "protocol errors",
                         "connection errors",
                         "accepted edits", "lost updates", "audit"], rows)


def _discover_p99(run):
    trips = run.get("round_trips") or {}
    return (trips.get("discover") or {}).get("p99_ms")


# The figures the summary gives per target: each one's median over the rounds.
FIGURES = (("calls/s", lambda r: r["calls_per_s"]),
           ("server CPU ms/call", lambda r: r.get("server_cpu_ms_per_call")),
           ("discover p99 ms", _discover_p99))


def paired(runs, others, get):
    """The ratios of ``runs``' figure to ``others``' round by round (the two lists in the order
    the rounds ran), each pair measured minutes apart: ``(median, lowest, highest)``, or None
    where no round has both figures."""
    ratios = [a / b for a, b in ((get(r), get(o)) for r, o in zip(runs, others))
              if a is not None and b]
    return (common.median(ratios), min(ratios), max(ratios)) if ratios else None


def summarize(results):
    """Per target, process count and client count: each figure's median over the rounds,
    its spread (lowest-highest), and its ratio to the other targets' medians, with the
    median (and spread) of the ratios of the same round, which the machine's drift from
    round to round moves less."""
    groups = {}
    for r in results:
        groups.setdefault((r["target"], r["workers"], r["engine"], r["clients"]), []).append(r)
    medians = {}
    for key, runs in groups.items():
        for label, get in FIGURES:
            values = [v for v in (get(r) for r in runs) if v is not None]
            if values:
                medians[key, label] = (common.median(values), min(values), max(values))
    lines = []
    for key in sorted(groups):
        target, workers, engine, clients = key
        parts = []
        for label, get in FIGURES:
            if (key, label) not in medians:
                continue
            value, low, high = medians[key, label]
            versus = []
            for other in sorted(groups):
                if (other[0] == target or other[1:] != (1, engine, clients) or workers != 1
                        or (other, label) not in medians or not medians[other, label][0]):
                    continue
                ratio = "%.2fx %s" % (value / medians[other, label][0], other[0])
                pairs = paired(groups[key], groups[other], get)
                if pairs is not None:
                    ratio += " [paired %.2fx, %.2f-%.2f]" % pairs
                versus.append(ratio)
            parts.append("%s median %s (%s-%s)%s" % (label, _figure(value), _figure(low),
                                                      _figure(high), " (%s)" % ", ".join(versus)
                                                      if versus else ""))
        lines.append("%s, %d process(es), %s, %d clients, %d run(s): %s"
                     % (target, workers, engine, clients, len(groups[key]), "; ".join(parts)))
    return "\n".join(lines)


def _figure(value):
    return "%.0f" % value if value >= 100 else "%.3g" % value


def main(argv=None):
    """Run the rounds; print the table and the medians; exit 1 if any run lost or broke."""
    parser = argparse.ArgumentParser(prog="bench/http_load.py", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--clients", default="16",
                        help="client threads, comma-separated counts to run each (default 16)")
    parser.add_argument("--calls", type=int, default=250, help="calls per client (default 250)")
    parser.add_argument("--targets", default=",".join(TARGETS),
                        help="new, old, sdk, comma-separated (default all three)")
    parser.add_argument("--workers", default="1",
                        help="the new server's process counts, comma-separated (default 1)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every target (3)")
    parser.add_argument("--client-processes", type=int, default=1,
                        help="processes the client threads are spread over (default 1)")
    parser.add_argument("--old-ref", "--against", dest="old_ref", metavar="REV",
                        help="the old server's commit (default: the parent of the commit that "
                             "removed kbcite/server/http.py)")
    parser.add_argument("--engines", default="sqlite",
                        help="sqlite, postgresql or both (default sqlite)")
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL server (default: a "
                        "throwaway cluster)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    try:
        client_counts = [int(c) for c in args.clients.split(",") if c.strip()]
    except ValueError:
        parser.error("argument --clients: not a comma-separated list of counts: %s"
                     % args.clients)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = set(targets) - set(TARGETS)
    if unknown:
        parser.error("argument --targets: unknown %s (choose from %s)"
                     % (", ".join(sorted(unknown)), ", ".join(TARGETS)))
    tree, remove = None, (lambda: None)
    if "old" in targets:
        tree, remove = worktree(args.old_ref or old_ref())
    runs = [("new", int(w)) for w in args.workers.split(",") if "new" in targets] + [
        (t, 1) for t in targets if t != "new"]
    results = []
    try:
        for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
            url, cleanup = None, (lambda: None)
            if engine == "postgresql":
                url, cleanup, why = common.server_for(args.postgres)
                if why:
                    print("PostgreSQL not measured: %s." % why)
                    continue
            try:
                for round_ in range(args.rounds):
                    for clients, (target, workers) in [(c, r) for c in client_counts
                                                       for r in runs]:
                        results.append(run(clients, args.calls, engine=engine,
                                           postgres_url=url, target=target, workers=workers,
                                           tree=tree if target == "old" else None,
                                           measure_round_trips=True,
                                           client_processes=args.client_processes))
                        print("round %d: %s x%d, %d clients: %.0f calls/s" % (
                            round_ + 1, target, workers, clients, results[-1]["calls_per_s"]),
                            file=sys.stderr, flush=True)
            finally:
                cleanup()
    finally:
        remove()
    print(render(results))
    print()
    print(summarize(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"version": common.code_version(), "machine": common.machine(),
                       "old_ref": args.old_ref or (old_ref() if "old" in targets else None),
                       "runs": results}, fh, indent=1)
    return 0 if all(r["protocol_errors"] == 0 and r["connection_errors"] == 0 and
                    r["lost_updates"] == 0 and r["audit"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
