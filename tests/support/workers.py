"""Store worker processes (tests/support/store_worker.py) and the checks run on what they leave."""

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

from kbcite import KBStore

KB = "kb-proc"

WORKER = str(Path(__file__).resolve().parent / "store_worker.py")

# Generous: a loaded two-core machine may take seconds to start Python; a healthy run needs
# far less, and a hung worker must fail the test rather than hang it.
LINE_TIMEOUT_S = 60.0


class Worker:
    """A store_worker.py process whose stdout lines arrive through a queue."""

    def __init__(self, *args):
        self.proc = subprocess.Popen(
            [sys.executable, WORKER] + [str(a) for a in args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, encoding="utf-8",
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def read(self, timeout=LINE_TIMEOUT_S):
        """The next JSON value the worker printed."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("worker printed nothing for %.0f s" % timeout) from None
        if line is None:
            self.proc.wait()
            raise AssertionError("worker exited %s: %s" % (self.proc.returncode,
                                                           self.proc.stderr.read()))
        return json.loads(line)

    def drain(self):
        """Everything the worker printed before it ended (it is killed or has exited)."""
        values = []
        while True:
            try:
                line = self.lines.get(timeout=5)
            except queue.Empty:
                return values
            if line is None:
                return values
            values.append(json.loads(line))

    def send(self, value):
        self.proc.stdin.write(json.dumps(value) + "\n")
        self.proc.stdin.flush()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            stream.close()


def events_of(store, kb=KB):
    events, after = [], 0
    while True:
        page = store.call_tool("poll_resource_events", {
            "resource_type": "knowledge_base", "resource_id": kb, "after_sequence": after},
            granted={kb})
        assert page["events"] or not page["has_more"], "has_more with an empty page"
        events.extend(page["events"])
        after = page["next_after_sequence"]
        if not page["has_more"]:
            return events


def check_consistent(db_path, kb=KB, audit=True):
    """The audit (integrity, gapless sequences, index), and every article at its last event.

    The audit covers the whole store: ``audit=False`` for a caller that has just run it on
    the same, unchanged file (it checks each of its knowledge bases in turn)."""
    with KBStore(db_path) as store:
        if audit:
            assert store.audit() == []
        events = events_of(store, kb)
        assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
        assert events and store.head_sequence(kb) == len(events)
        last = {}
        for event in events:
            last[event["article_id"]] = event
        articles = {a["article_id"]: store.get_article(kb, a["article_id"])
                    for a in store.list_articles(kb)}
        for article_id, article in articles.items():
            assert article["updated_at"] == last[article_id]["updated_at"], article_id
            assert (last[article_id]["type"] == "article.unpublished") == (
                not article["published"]), article_id
        return events, articles
