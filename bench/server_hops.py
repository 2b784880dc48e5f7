"""How many of the server layer's functions one search request passes through, per protocol era.

    python bench/server_hops.py                   # this checkout
    python bench/server_hops.py --against 1108adc # side by side with a commit (a git worktree)
    python bench/server_hops.py --list            # each call, in order

A store of one article and a token that may edit; the HTTP app (``kbcite.server.asgi``'s
``create_app``, which every commit since the ASGI server keeps) is called in process with one
``tools/call`` of ``search_knowledge_base`` in each era: in a 2025-11-25 session (initialize and
initialized first) and as a 2026-07-28 request. A profile function on every thread counts the
calls of functions defined under ``kbcite/server/`` from the request's start to the store's
``call_tool`` (the hops before the store) and to its end; and at ``call_tool`` the frames of the
server on the stack (how deep the request stands). Counts, not times: the same on any machine.
"""

import argparse
import json
import os
import subprocess
import sys

from history import worktree

HERE = os.path.dirname(os.path.abspath(__file__))

# Runs in a process of its own with the tree's package first on its path (argv: the tree).
COUNT = r"""
import asyncio, json, os, sys, tempfile, threading, traceback
sys.path.insert(0, sys.argv[1])
os.environ["KBCITE_SEMANTIC"] = "off"
import kbcite.store
from kbcite import KBStore
from kbcite.server.asgi import create_app

SERVER = os.sep + os.path.join("kbcite", "server") + os.sep
SEARCH = {"name": "search_knowledge_base",
          "arguments": {"knowledge_base_id": "kb", "query": "refund days"}}
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {}}
path = os.path.join(tempfile.mkdtemp(), "hops.db")
with KBStore(path, create=True) as store:
    store.create_knowledge_base("kb")
    store.create_article("kb", "Refund policy", "Refunds take five days.")
    tokens = getattr(store, "tokens", None)
    if hasattr(tokens, "create"):
        token = tokens.create("hops", ["kb"], "allow")
    else:  # a commit from before the store handed its tokens out as store.tokens
        token = store.create_token("hops", ["kb"], "allow")

counting, calls, depth = [None], {}, {}
real_call_tool = kbcite.store.KBStore.call_tool

def call_tool(self, name, *args, **kwargs):
    era = counting[0]
    if era is not None and name == SEARCH["name"]:
        calls[era].append("(the store)")
        depth[era] = sum(SERVER in frame.filename for frame in traceback.extract_stack())
    return real_call_tool(self, name, *args, **kwargs)

def profile(frame, event, arg):
    if event == "call" and counting[0] is not None and SERVER in frame.f_code.co_filename:
        where = frame.f_code.co_filename.split(SERVER, 1)[1]
        calls[counting[0]].append("%s %s" % (where, frame.f_code.co_name))

kbcite.store.KBStore.call_tool = call_tool
sys.setprofile(profile)
threading.setprofile(profile)  # the worker threads, which the app starts after this
app = create_app(path)

async def post(message, headers=()):
    body = json.dumps(message).encode()
    head = [(b"host", b"127.0.0.1:1"), (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"authorization", b"Bearer " + token.encode()),
            (b"content-length", b"%d" % len(body))] + list(headers)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/mcp", "raw_path": b"/mcp",
             "query_string": b"", "root_path": "", "headers": head,
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 1), "state": {}}
    received = []

    async def receive():
        if not received:
            received.append(True)
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays

    sent = []

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    return sent

async def counted(era, message, headers):
    counting[0], calls[era] = era, []
    try:
        sent = await post(message, headers)
    finally:
        counting[0] = None
    assert b'"structuredContent"' in sent[-1]["body"], sent

async def main():
    sent = await post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "hops", "version": "1"}}})
    session = {name.lower(): value for name, value in sent[0]["headers"]}[b"mcp-session-id"]
    legacy = [(b"mcp-session-id", session), (b"mcp-protocol-version", b"2025-11-25")]
    await post({"jsonrpc": "2.0", "method": "notifications/initialized"}, legacy)
    await counted("2025-11-25", {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                 "params": SEARCH}, legacy)
    await counted("2026-07-28", {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                 "params": dict(SEARCH, _meta=MODERN)},
                  [(b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", b"tools/call"),
                   (b"mcp-name", SEARCH["name"].encode())])

asyncio.run(main())
sys.setprofile(None)
threading.setprofile(None)
app.close()
print(json.dumps({era: {"before_store": found.index("(the store)"), "whole": len(found) - 1,
                        "depth": depth[era], "calls": found} for era, found in calls.items()}))
"""


def count(tree):
    """``{era: {before_store, whole, depth, calls}}`` for the checkout at ``tree``."""
    done = subprocess.run([sys.executable, "-c", COUNT, tree], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        raise RuntimeError("counting in %s failed: %s" % (tree, done.stderr[-2000:]))
    return json.loads(done.stdout.splitlines()[-1])


def render(results):
    """The counts as a Markdown table, a row a tree and era."""
    rows = ["| tree | era | server calls before the store | in the whole request | "
            "server frames on the stack at the store |", "|---|---|---:|---:|---:|"]
    for name, found in results:
        for era, figures in found.items():
            rows.append("| %s | %s | %d | %d | %d |" % (name, era, figures["before_store"],
                                                        figures["whole"], figures["depth"]))
    return "\n".join(rows)


def main(argv=None):
    """Count this checkout's hops (and a commit's, with --against); print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", metavar="REV",
                        help="a commit to count beside this checkout (from 1108adc on)")
    parser.add_argument("--list", action="store_true", help="print each call, in order")
    args = parser.parse_args(argv)
    results = []
    if args.against:
        tree, remove = worktree(args.against)
        try:
            results.append((args.against, count(tree)))
        finally:
            remove()
    results.append(("this checkout", count(os.path.dirname(HERE))))
    print(render(results))
    if args.list:
        for name, found in results:
            for era, figures in found.items():
                print("\n%s, %s:" % (name, era))
                print("\n".join("  " + call for call in figures["calls"]))


if __name__ == "__main__":
    main()
