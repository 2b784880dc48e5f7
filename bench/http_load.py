"""kb-server over Streamable HTTP under load: 16 clients at once, 250 calls each.

A fresh store (SQLite, or PostgreSQL with a URL) of 1,000 articles, one ``kb-server --http``
process, a token that may edit. Each client thread keeps its own HTTP connection and sends
2026-07-28 requests: search (40%), read (30%), poll (15%) and edit (15%: read, then edit with
the version read; a ``version_conflict`` is re-read and retried with a new key). Afterwards:
every response was a JSON-RPC result (no protocol error), the store's audit is clean, and
every edit a client saw accepted is in its article exactly once.
"""

import http.client
import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import common
import corpus
from kbcite import KBStore
from kbcite.sim.plan import draw_kind

KB = "load"
SEED = 20261108
MIX = (("search", 0.40), ("read", 0.30), ("poll", 0.15), ("edit", 0.15))
HOT = 20  # the articles edits go to, so that clients meet on some of them


class Connection:
    """One client's HTTP connection, speaking 2026-07-28."""

    def __init__(self, port, token):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.token = token
        self.next_id = 0

    def call(self, name, arguments):
        """One tools/call; returns (seconds, the JSON-RPC response)."""
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments, "_meta": {
                               "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                               "io.modelcontextprotocol/clientCapabilities": {}}}})
        started = time.perf_counter()
        self.conn.request("POST", "/mcp", body=body, headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "Authorization": "Bearer " + self.token, "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call", "Mcp-Name": name})
        response = self.conn.getresponse()
        data = response.read()
        seconds = time.perf_counter() - started
        if response.status != 200:
            return seconds, {"http_status": response.status, "body": data[:200].decode()}
        return seconds, json.loads(data)


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


def run(clients=16, calls=250, directory=None, engine="sqlite", postgres_url=None,
        articles=1000):
    """Build a store, start kb-server --http, run the clients; returns the figures."""
    if clients < 1 or calls < 1 or articles < HOT:
        raise ValueError("http load needs clients >= 1, calls >= 1, articles >= %d" % HOT)
    tmp = tempfile.mkdtemp(prefix="kb-bench-http-", dir=directory)
    address = common.store_address(engine, tmp, "httpload", postgres_url)
    server = None
    try:
        rows = corpus.articles(random.Random(SEED), articles)
        with KBStore(address, create=True) as store:
            store.create_knowledge_base(KB)
            store.create_articles(KB, rows)
            token = store.create_token("load", [KB], "allow")
            head = store.head_sequence(KB)
        server = subprocess.Popen([sys.executable, "-m", "kbcite.server", "--db", address,
                                   "--http", "127.0.0.1:0", "--workers", "8"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  env=common.child_env())
        port = None
        while port is None:
            line = server.stderr.readline()
            if not line:
                raise RuntimeError("kb-server did not start")
            if line.startswith("kb-server: serving http://"):
                port = int(line.rsplit(":", 1)[1].split("/")[0])
        threading.Thread(target=lambda: server.stderr.read(), daemon=True).start()
        titles = [title for title, _ in rows]
        out, threads = [], []
        load_start = common.load()
        started = time.perf_counter()
        for i in range(clients):
            threads.append(threading.Thread(target=client, args=(port, token, "c%d" % i, calls,
                                                                 titles, out)))
            threads[-1].start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        accepted = [a for o in out for a in o["accepted"]]
        errors = [e for o in out for e in o["errors"]]
        lost = 0
        with KBStore(address) as store:
            problems = store.audit()
            for article_id in {a for a, _ in accepted}:
                lines = store.get_article(KB, article_id)["content"].split("\n")
                for _, line in [a for a in accepted if a[0] == article_id]:
                    lost += lines.count(line) != 1
            events = store.head_sequence(KB) - head
        per_tool = {}
        for kind, _ in MIX:
            seconds = [s for o in out for s in o["timings"][kind]]
            per_tool[kind] = {"calls": len(seconds),
                              "p50_ms": round(common.median(seconds) * 1000, 2),
                              "p99_ms": round(common.percentile(seconds, 99) * 1000, 2)}
        return {"engine": engine, "clients": clients, "calls_per_client": calls,
                "calls": sum(t["calls"] for t in per_tool.values()), "wall_s": round(wall, 1),
                "calls_per_s": round(sum(t["calls"] for t in per_tool.values()) / wall, 1),
                "per_tool": per_tool, "protocol_errors": len(errors),
                "error_samples": errors[:3],
                "connection_errors": sum(len(o["dropped"]) for o in out),
                "connection_error_samples": [d for o in out for d in o["dropped"]][:3],
                "accepted_edits": len(accepted),
                "conflicts": sum(o["conflicts"] for o in out), "lost_updates": lost,
                "events": events, "audit": problems or "ok",
                "load": [load_start, common.load()]}
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        common.drop_store(engine, address, postgres_url)
        shutil.rmtree(tmp, ignore_errors=True)


def render(results):
    """The load runs as a Markdown table, one row per engine."""
    rows = []
    for r in results:
        tools = r["per_tool"]
        rows.append([r["engine"], "%d x %d" % (r["clients"], r["calls_per_client"]),
                     common.n(r["calls"]), "%.0f" % r["calls_per_s"]]
                    + ["%s / %s" % (tools[k]["p50_ms"], tools[k]["p99_ms"]) for k, _ in MIX]
                    + [r["protocol_errors"], r["connection_errors"],
                       common.n(r["accepted_edits"]), common.n(r["conflicts"]), r["lost_updates"],
                       "ok" if r["audit"] == "ok" else "FAILED"])
    return common.table(["engine", "clients x calls", "calls", "calls/s",
                         "search p50 / p99 ms", "read p50 / p99 ms", "poll p50 / p99 ms",
                         "edit p50 / p99 ms", "protocol errors", "connection errors",
                         "accepted edits",
                         "conflicts", "lost updates", "audit"], rows)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="bench/http_load.py", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--clients", type=int, default=16, help="client threads (default 16)")
    parser.add_argument("--calls", type=int, default=250, help="calls per client (default 250)")
    parser.add_argument("--engines", default="sqlite,postgresql",
                        help="sqlite, postgresql or both (default both)")
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL server (default: a "
                        "throwaway cluster)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()

    results = []
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for engine in engines:
        url, cleanup = None, (lambda: None)
        if engine == "postgresql":
            url, cleanup, why = common.server_for(args.postgres)
            if why:
                print("PostgreSQL not measured: %s." % why)
                continue
        try:
            results.append(run(args.clients, args.calls, engine=engine, postgres_url=url))
        finally:
            cleanup()
    print(render(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1)
    sys.exit(0 if all(r["protocol_errors"] == 0 and r["connection_errors"] == 0 and
                      r["lost_updates"] == 0 and r["audit"] == "ok" for r in results) else 1)
