"""How long a subscriber waits for ``notifications/resources/updated`` after another process
commits a save: kb-server over stdio (2025-11-25 resources/subscribe) and over HTTP (a session's
GET stream, and a 2026-07-28 listen stream), on SQLite and on PostgreSQL.

    python bench/notify_latency.py [--edits 50] [--workers 1] [--engines sqlite,postgresql]
    python bench/notify_latency.py --engines postgresql --postgres postgresql://kb@db/kb

Each edit is a person's save through the store, timed from just after its commit to the
notification's arrival. On SQLite the watcher looks at the log's heads every 0.2 s, so the
wait is spread over 0 to 0.2 s plus the delivery; on PostgreSQL the save's commit NOTIFYs and
the watcher's LISTEN wakes at once. PostgreSQL is a throwaway cluster (``initdb``/``pg_ctl``)
unless ``--postgres`` names a server. Prints p50, p95 and the worst per engine and transport.
Exits non-zero if any wait passes one second (the issue's bound).
"""

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

import common
from kbcite import KBStore

# The bound a notification must arrive within (the proof: "within a second").
BOUND_S = 1.0
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
URI = "kb://support/articles/art-000001"


ENGINES = ("sqlite", "postgresql")


def make_store(path):
    """A knowledge base ``support`` with one article, and a token for it."""
    with KBStore(path, create=True) as store:
        store.create_knowledge_base("support")
        store.create_article("support", "Resetting your password", "Version 0.")
        return store.tokens.create("bench", ["support"], "allow")


def timed_saves(db, edits, wait):
    """Save ``edits`` times; ``wait()`` blocks until the notification; the seconds each took."""
    waits = []
    with KBStore(db) as store:
        for i in range(edits):
            store.save_article("support", "art-000001", content="Version %d." % (i + 1))
            committed = time.monotonic()
            wait()
            waits.append(time.monotonic() - committed)
            time.sleep(random.uniform(0.0, 0.25))  # not in step with the watcher
    return waits


def stdio(db, edits):
    """The waits of a stdio client subscribed to the article."""
    proc = subprocess.Popen([sys.executable, "-m", "kbcite.server", "--db", db, "--grant",
                             "support"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=common.child_env())

    def send(message):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}})
    proc.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": URI}})
    proc.stdout.readline()

    def wait():
        while json.loads(proc.stdout.readline()).get("method") != \
                "notifications/resources/updated":
            pass
    try:
        return timed_saves(db, edits, wait)
    finally:
        proc.stdin.close()
        proc.wait(30)


class Sse:
    """An event stream read off a raw socket, message by message."""

    def __init__(self, port, head, body=b""):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.sendall(head + body)
        self.buffer = b""

    def message(self):
        """The next JSON-RPC message; the head, chunk sizes and keep-alives are skipped."""
        while True:
            while b"\r\n\r\n" not in self.buffer:
                data = self.sock.recv(65536)
                if not data:
                    raise SystemExit("the stream ended")
                self.buffer += data
            block, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
            lines = [x for x in block.split(b"\r\n") if x.startswith(b"data: ")]
            if lines:
                return json.loads(lines[0][6:])


def post(port, token, message, headers=()):
    """POST one message to the server; its headers and body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sent = {"Authorization": "Bearer " + token, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"}
    sent.update(headers)
    conn.request("POST", "/mcp", json.dumps(message), sent)
    response = conn.getresponse()
    return response.headers, response.read()  # names in any case, as HTTP has them


def serve(db, workers):
    """kb-server over HTTP on a free port; the process and its port."""
    proc = subprocess.Popen([sys.executable, "-m", "kbcite.server", "--db", db, "--http",
                             "127.0.0.1:0", "--workers", str(workers)],
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=common.child_env())
    for line in proc.stderr:
        if line.startswith("kb-server: serving http"):
            return proc, int(line.rsplit(":", 1)[1].split("/")[0])
    raise SystemExit("the server did not start")


def http_legacy(db, token, port, edits):
    """The waits of a 2025-11-25 session subscribed to the article, on its GET stream."""
    headers, _ = post(port, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                    "params": {"protocolVersion": "2025-11-25",
                                               "capabilities": {},
                                               "clientInfo": {"name": "b", "version": "1"}}})
    session = headers["Mcp-Session-Id"]
    post(port, token, {"jsonrpc": "2.0", "method": "notifications/initialized"},
         {"Mcp-Session-Id": session})
    post(port, token, {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
                       "params": {"uri": URI}}, {"Mcp-Session-Id": session})
    stream = Sse(port, ("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s"
                        "\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\n\r\n"
                        % (port, token, session)).encode())
    time.sleep(0.3)  # the stream is open once the watcher has it
    return timed_saves(db, edits, stream.message)


def http_modern(db, token, port, edits):
    """The waits of a 2026-07-28 listen stream of the article."""
    body = json.dumps({"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen",
                       "params": {"_meta": META, "notifications": {
                           "resourceSubscriptions": [URI]}}}).encode()
    stream = Sse(port, ("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s"
                        "\r\nAccept: application/json, text/event-stream\r\nContent-Type: "
                        "application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: "
                        "subscriptions/listen\r\nContent-Length: %d\r\n\r\n"
                        % (port, token, len(body))).encode(), body)
    first = stream.message()
    if first.get("method") != "notifications/subscriptions/acknowledged":
        raise SystemExit("the listen stream began with %r, not its acknowledgement" % first)
    return timed_saves(db, edits, stream.message)


def summary(name, waits):
    """Print one row of the table; returns the worst wait."""
    ordered = sorted(waits)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    print("| %s | %d | %.0f | %.0f | %.0f |" % (name, len(waits), pick(0.5) * 1000,
                                                 pick(0.95) * 1000, ordered[-1] * 1000))
    return ordered[-1]


def run_engine(engine, db, edits, workers):
    """The three transports' rows on one store; the worst waits."""
    token = make_store(db)
    worst = [summary("%s, stdio, resources/subscribe" % engine, stdio(db, edits))]
    proc, port = serve(db, workers)
    try:
        worst.append(summary("%s, HTTP (%d worker(s)), session GET stream" % (engine, workers),
                             http_legacy(db, token, port, edits)))
        worst.append(summary("%s, HTTP (%d worker(s)), subscriptions/listen" % (engine, workers),
                             http_modern(db, token, port, edits)))
    finally:
        proc.terminate()
        proc.wait(30)
    return worst


def main(argv=None):
    """Time the notifications and print the table; exit 1 past the bound."""
    parser = argparse.ArgumentParser(prog="bench/notify_latency.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=50, metavar="N",
                        help="saves timed per transport (default 50)")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="the HTTP server's worker processes (default 1)")
    parser.add_argument("--engines", default="sqlite", metavar="LIST",
                        help="sqlite, postgresql or both, comma-separated (default sqlite)")
    parser.add_argument("--postgres", metavar="URL",
                        help="a PostgreSQL server (default: a throwaway cluster)")
    args = parser.parse_args(argv)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for name in ("edits", "workers"):
        if getattr(args, name) < 1:
            parser.error("argument --%s: must be at least 1" % name)
    if not engines or any(e not in ENGINES for e in engines):
        parser.error("argument --engines: a comma-separated list of %s, got %r"
                     % (" and ".join(ENGINES), args.engines))
    print("| transport | edits | p50 ms | p95 ms | worst ms |\n|---|---|---|---|---|")
    worst = []
    with tempfile.TemporaryDirectory() as tmp:
        for engine in engines:
            if engine == "sqlite":
                worst += run_engine(engine, os.path.join(tmp, "kb.db"), args.edits,
                                    args.workers)
                continue
            url, cleanup, reason = common.server_for(args.postgres)
            if url is None:
                print("| postgresql: not measured, %s | | | | |" % reason)
                continue
            address = common.store_address("postgresql", tmp, "notify", url)
            try:
                worst += run_engine(engine, address, args.edits, args.workers)
            finally:
                common.drop_store("postgresql", address, url)
                cleanup()
    return 1 if worst and max(worst) > BOUND_S else 0


if __name__ == "__main__":
    sys.exit(main())
