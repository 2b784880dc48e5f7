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
    python examples/transcript.py --resources [--write-docs]   # the articles as MCP resources

``--resources`` plays the other session: templates, the list, a read of the current version
and of the version a citation names, completions, a subscription that hears of a colleague's
save, and the poll of the event log that says what the notification only hinted at.

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
RESOURCES = ("<!-- resources transcript: begin -->", "<!-- resources transcript: end -->")
# What differs from one run to the next: the versions (time stamps, in a URI with their colons
# percent-encoded) and the package version.
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d(?::|%3A)\d\d(?::|%3A)\d\d\.\d{6}Z")


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


@contextlib.contextmanager
def served(full):
    """A fresh store in a temporary folder and a stdio server on it: ``(session, db path,
    the first article's ID)``."""
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "kb.db")
        article = make_store(db)
        argv = SERVER + ["--db", db, "--grant", "support", "--writes", "ask"]
        print("# server: kb-server --db kb.db --grant support --writes ask")
        yield Session(argv, full), db, article


def run(full):
    """Play the session; returns the server's exit code."""
    with served(full) as (s, db, article):
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


def run_resources(full):
    """Play the resources session; returns the server's exit code."""
    with served(full) as (s, db, article):
        s.say("Handshake: the server offers resources (with subscriptions), completions, "
              "logging.")
        s.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "transcript", "version": "1.0"}})
        s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        s.say("The templates: an article now, and an article at a version (a citation's).")
        s.request("resources/templates/list", {})

        s.say("The list: the granted knowledge bases' published articles, a page at a time.")
        s.request("resources/list", {})

        s.say("Read the current version: Markdown, its citation in _meta.")
        read = s.request("resources/read", {"uri": "kb://support/articles/%s" % article})
        cited = read["result"]["contents"][0]["_meta"]["kbcite/citation"]

        s.say("Complete the template's arguments: knowledge bases, then articles by words.")
        template = "kb://{knowledge_base_id}/articles/{article_id}"
        s.request("completion/complete", {"ref": {"type": "ref/resource", "uri": template},
                                          "argument": {"name": "knowledge_base_id",
                                                       "value": "sup"}})
        s.request("completion/complete", {"ref": {"type": "ref/resource", "uri": template},
                                          "argument": {"name": "article_id",
                                                       "value": "password"},
                                          "context": {"arguments": {
                                              "knowledge_base_id": "support"}}})

        s.say("Subscribe to the article; keep the log's head from the search to poll from.")
        s.request("resources/subscribe", {"uri": "kb://support/articles/%s" % article})
        found = s.tool("search_knowledge_base", knowledge_base_id="support",
                       query="reset password", limit=1)
        cursor = found["result"]["structuredContent"]["head_sequence"]

        s.say("A colleague saves the article in the app; the server hints that it changed.")
        with KBStore(db) as store:
            store.save_article("support", article, content="Open Settings > Security and "
                               "choose Reset password. The link is valid for 30 minutes.")
        s.receive()

        s.say("The hint is not the truth: the event log is. Poll it from the cursor.")
        s.tool("poll_resource_events", resource_type="knowledge_base", resource_id="support",
               after_sequence=cursor)

        s.say("The version the first read cited is still there, through its pinned URI.")
        s.request("resources/read", {"uri": "kb://support/articles/%s@%s" % (
            article, cited["updated_at"].replace(":", "%3A"))})

        s.say("A knowledge base not granted (here: not there at all) is one not-found, the same "
              "bytes either way.")
        s.request("resources/read", {"uri": "kb://internal/articles/%s" % article})

        s.say("Close stdin: the server exits 0.")
        code = s.close()
        print("# exit code %d" % code)
        return code


def normalize(text):
    """The transcript with its time stamps numbered in order of first use (T1, T2, ...) and the
    server's version as X.Y.Z: what two runs of it have in common."""
    seen = {}
    text = STAMP.sub(lambda m: seen.setdefault(m.group(0).replace("%3A", ":"),
                                               "T%d" % (len(seen) + 1)), text)
    return re.sub(r'("serverInfo":\{[^}]*"version":")[^"]+"', r'\1X.Y.Z"', text)


def docs_block(page, markers=(BEGIN, END)):
    """The transcript in a docs page: the lines between its two markers, without the fence."""
    begin, finish = markers
    start, end = page.index(begin), page.index(finish)
    return page[start + len(begin):end].strip().removeprefix("```text").removesuffix("```")


def capture(full=False, resources=False):
    """Play the session (or the resources one); returns (the server's exit code, the
    transcript as text)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = (run_resources if resources else run)(full)
    return code, out.getvalue()


def write_docs(text, path=DOCS, markers=(BEGIN, END)):
    """Replace the transcript between the markers of ``path`` with ``text``."""
    with open(path, encoding="utf-8") as f:
        page = f.read()
    begin, finish = markers
    start, end = page.index(begin) + len(begin), page.index(finish)
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
    parser.add_argument("--resources", action="store_true",
                        help="the session with the articles as MCP resources")
    args = parser.parse_args(argv)
    if not args.write_docs:
        return (run_resources if args.resources else run)(args.full)
    code, text = capture(args.full, args.resources)
    if code == 0:
        write_docs(text, markers=RESOURCES if args.resources else (BEGIN, END))
        print("wrote the transcript into %s" % os.path.relpath(DOCS), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
