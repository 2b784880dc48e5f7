#!/usr/bin/env python3
"""A real session with the MCP server (``kb-server``), printed as the JSON-RPC lines that crossed
its stdio.

Builds a small store in a temporary folder, starts the server the way an MCP client does, and
walks through the citation workflow: handshake, search, read (keeping the citation), a
colleague's save, an edit refused for its stale version, a re-read, the retry (which a scripted
person approves through elicitation), a poll showing what changed since the citation, and
``check_citations`` saying what became of it and what its text lost and gained.

    python examples/transcript.py [--full]
    python examples/transcript.py --write-docs      # put it in docs/server.md, between its markers

``->`` lines went from the client to the server, ``<-`` lines back. Without ``--full``, the
text twin of each structuredContent (the same JSON as a string) is shortened to keep the
transcript readable; everything else is printed exactly as it crossed the pipe.
"""

import argparse
import contextlib
import io
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from kbcite import KBStore  # noqa: E402

# The server as a client starts it, from this checkout's package.
SERVER = [sys.executable, "-m", "kbcite.server"]
# A read that takes longer than this means the server hung: stop rather than wait forever.
TIMEOUT_S = 15.0
TWIN = "<structuredContent as JSON text>"
# The transcript's place in the docs: the block between these two lines is the output.
DOCS = os.path.join(ROOT, "docs", "server.md")
BEGIN, END = "<!-- transcript: begin -->", "<!-- transcript: end -->"
# What differs from one run to the next: the versions (time stamps) and the package version.
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


class Session:
    """A scripted MCP client that prints every line it sends and receives."""

    def __init__(self, argv, full):
        self.full = full
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [ROOT] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.inbox = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.last_id = 0

    def _read(self):
        for line in self.proc.stdout:
            self.inbox.put(line)
        self.inbox.put(None)

    def say(self, text):
        """Print a comment line between messages."""
        print("\n# " + text)

    def send(self, message):
        """Send one message and print it."""
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        print("-> " + line)
        self.proc.stdin.write(line.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def receive(self):
        """The next message from the server, printed."""
        line = self.inbox.get(timeout=TIMEOUT_S)
        if line is None:
            raise SystemExit("the server closed its output")
        message = json.loads(line)
        shown = message
        content = (message.get("result") or {}).get("structuredContent")
        if content is not None and not self.full:
            shown = json.loads(line)
            shown["result"]["content"][0]["text"] = TWIN
        print("<- " + json.dumps(shown, ensure_ascii=False, separators=(",", ":")))
        return message

    def request(self, method, params):
        """Send a request and return the next message."""
        self.last_id += 1
        self.send({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
        return self.receive()

    def tool(self, name, **arguments):
        """Call a tool; returns the next message (its answer, or a question for the person)."""
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def close(self):
        """Close stdin, as a client does, and return the server's exit code."""
        self.proc.stdin.close()
        return self.proc.wait(timeout=TIMEOUT_S)


def make_store(path):
    """A knowledge base ``support`` with three published articles."""
    with KBStore(path, create=True) as store:
        store.create_knowledge_base("support", name="Customer support")
        article = store.create_article(
            "support", "Resetting your password",
            "Open Settings > Security and choose Reset password. The link is valid for 1 hour.")
        store.create_article("support", "Two-factor authentication",
                             "Turn on 2FA under Settings > Security > Two-factor.")
        store.create_article("support", "Billing and invoices",
                             "Invoices are emailed on the first day of each month.")
    return article


def run(full):
    """Play the session; returns the server's exit code."""
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "kb.db")
        article = make_store(db)
        argv = SERVER + ["--db", db, "--grant", "support", "--writes", "ask"]
        print("# server: kb-server --db kb.db --grant support --writes ask")
        s = Session(argv, full)

        s.say("Handshake. The client declares elicitation, so the server can ask its person.")
        s.request("initialize", {"protocolVersion": "2025-11-25",
                                 "capabilities": {"elicitation": {}},
                                 "clientInfo": {"name": "transcript", "version": "1.0"}})
        s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        s.say("Search: every hit carries a citation.")
        s.tool("search_knowledge_base", knowledge_base_id="support", query="reset password",
               limit=2)

        s.say("Read: keep the citation; its updated_at is the version to edit against.")
        read = s.tool("read_knowledge_article", knowledge_base_id="support", article_id=article)
        cited = read["result"]["structuredContent"]
        cursor = cited["head_sequence"]

        s.say("Meanwhile a colleague saves the article in the app (not over MCP).")
        with KBStore(db) as store:
            store.save_article("support", article, content=cited["content"].replace(
                "1 hour", "30 minutes"))

        s.say("The agent edits with the version it cited: refused as stale, nobody is asked.")
        s.tool("edit_knowledge_article", knowledge_base_id="support", article_id=article,
               content=cited["content"] + "\nSSO users reset it with their identity provider.",
               expected_version=cited["updated_at"], idempotency_key="add-sso-note-1")

        s.say("Re-read, re-apply the change to what is there now.")
        fresh = s.tool("read_knowledge_article", knowledge_base_id="support",
                       article_id=article)["result"]["structuredContent"]

        s.say("Retry with the new version and a new key: the server asks the person first.")
        question = s.tool("edit_knowledge_article", knowledge_base_id="support",
                          article_id=article,
                          content=fresh["content"] + "\nSSO users reset it with their identity "
                                                     "provider.",
                          expected_version=fresh["updated_at"],
                          idempotency_key="add-sso-note-2")
        s.say("The person accepts; the edit is written.")
        s.send({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept"}})
        s.receive()

        s.say("Poll from the cursor of the first read: what changed since the citation.")
        s.tool("poll_resource_events", resource_type="knowledge_base", resource_id="support",
               after_sequence=cursor)

        s.say("Check the first citation: changed, and what its text lost and gained since.")
        s.tool("check_citations", knowledge_base_id="support", citations=[cited["citation"]])

        s.say("Close stdin: the server exits 0.")
        code = s.close()
        print("# exit code %d" % code)
        return code


def normalize(text):
    """The transcript with its time stamps numbered in order of first use (T1, T2, ...) and the
    server's version as X.Y.Z: what two runs of it have in common."""
    seen = {}
    text = STAMP.sub(lambda m: seen.setdefault(m.group(0), "T%d" % (len(seen) + 1)), text)
    return re.sub(r'("serverInfo":\{[^}]*"version":")[^"]+"', r'\1X.Y.Z"', text)


def docs_block(page):
    """The transcript in a docs page: the lines between its two markers, without the fence."""
    start, end = page.index(BEGIN), page.index(END)
    return page[start + len(BEGIN):end].strip().removeprefix("```text").removesuffix("```")


def capture(full=False):
    """Play the session; returns (the server's exit code, the transcript as text)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run(full)
    return code, out.getvalue()


def write_docs(text, path=DOCS):
    """Replace the transcript between the markers of ``path`` with ``text``."""
    with open(path, encoding="utf-8") as f:
        page = f.read()
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    page = page[:start] + "\n```text\n" + text.strip("\n") + "\n```\n" + page[end:]
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)


def main(argv=None):
    """Print one session, or write it into docs/server.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true",
                        help="print the JSON text twin of every structuredContent too")
    parser.add_argument("--write-docs", action="store_true",
                        help="write the transcript into docs/server.md instead of printing it")
    args = parser.parse_args(argv)
    if not args.write_docs:
        return run(args.full)
    code, text = capture(args.full)
    if code == 0:
        write_docs(text)
        print("wrote the transcript into %s" % os.path.relpath(DOCS), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
