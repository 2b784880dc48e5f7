"""A knowledge base and a folder, day three: a round trip that survives a pruned history, an
export in the form each file was imported in, and the command line's small mistakes mended.
The command line runs in this process (``kbcite.cli.main``) on a store file."""

import io
import json
import os
import sys

import pytest

from kbcite import KBStore
from kbcite.cli import main as cli_main
from support.files import write

KB = "kb-docs"
GRANTED = frozenset({KB})


class Run:
    """One in-process run of ``kb``: its exit status, standard output and standard error."""

    def __init__(self, status, stdout, stderr):
        self.status, self.stdout, self.stderr = status, stdout, stderr


def kb_cli(db, *args, stdin="", monkeypatch=None):
    """Run ``kb --db DB ARGS`` in this process; returns a Run (usage errors included)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = stdin if not isinstance(stdin, str) else io.StringIO(stdin)
    sys.stdout, sys.stderr = out, err
    try:
        argv = (["--db", str(db)] if db is not None else []) + [str(a) for a in args]
        try:
            status = cli_main(argv)
        except SystemExit as exc:
            status = exc.code
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return Run(status, out.getvalue(), err.getvalue())


def ok(db, *args, **kw):
    """Run a command that must succeed; returns its standard output."""
    run = kb_cli(db, *args, **kw)
    assert run.status == 0, run.stderr
    return run.stdout


def fails(db, *args, status=1, **kw):
    """Run a command that must fail with ``status``: one message, no traceback."""
    run = kb_cli(db, *args, **kw)
    assert run.status == status, (run.status, run.stdout, run.stderr)
    assert run.stderr.strip() and "Traceback" not in run.stderr
    return run.stderr


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    write(folder, "refunds.md", "# Refund policy\n\nRefunds take five working days.\n")
    write(folder, "shipping.md", "# Shipping\n\nWe ship within two days.\n")
    return folder


def agent_edit(store, article_id, content, clock, key="agent"):
    """An agent's edit of an article through the tool, a minute on."""
    current = store.call_tool("read_knowledge_article", {"knowledge_base_id": KB,
                                                         "article_id": article_id},
                              granted=GRANTED)
    if clock is not None:
        clock.advance(minutes=1)
    store.call_tool("edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": article_id, "content": content,
        "expected_version": current["updated_at"], "idempotency_key": key},
        granted=GRANTED, actor="bot")


def source_ids(store):
    return {a["source"]: a["article_id"] for a in store.list_articles(KB) if a["source"]}


# -- 1. a pruned history keeps each file's base ---------------------------------------------


def test_a_pruned_history_keeps_the_round_trip(kb, docs, clock):
    kb.import_directory(KB, str(docs))
    ids = source_ids(kb)
    agent_edit(kb, ids["refunds.md"], "Refunds take five working days.\n\nTen in December.",
               clock)
    agent_edit(kb, ids["refunds.md"], "Refunds take six working days.\n\nTen in December.",
               clock, key="agent-2")
    clock.advance(days=2)
    pruned = kb.prune_history(KB, 0)
    assert pruned["pruned"] == 1  # the agent's first edit; the import's base is kept
    assert kb.prune_history(KB, 0, dry_run=True)["pruned"] == 0
    written = kb.export_directory(KB, str(docs), edited=True)
    assert [(a["path"], a["action"]) for a in written["actions"]] == [("refunds.md", "write")]
    assert "six working days" in (docs / "refunds.md").read_text(encoding="utf-8")
    again = kb.import_directory(KB, str(docs))
    assert again["counts"]["conflict"] == 0 and again["counts"]["update"] == 0
    assert kb.import_directory(KB, str(docs))["counts"]["unchanged"] == 2
    assert kb.audit() == []


def test_kb_history_prune_then_export_edited_round_trips(tmp_path, docs):
    db = tmp_path / "kb.sqlite3"
    ok(db, "init", KB)
    ok(db, "import", KB, docs)
    with KBStore(str(db)) as store:
        agent_edit(store, source_ids(store)["shipping.md"], "We ship within a day.", None)
    ok(db, "history", "prune", KB, "--keep-days", "0", "--yes")
    out = ok(db, "export", KB, docs, "--edited")
    assert "changed since its import" not in out
    assert "We ship within a day." in (docs / "shipping.md").read_text(encoding="utf-8")
    summary = json.loads(ok(db, "--json", "import", KB, docs))["counts"]
    assert summary["conflict"] == 0 and summary["update"] == 0


# -- 2. kb events --after -1 ----------------------------------------------------------------


@pytest.mark.parametrize("after", ["-1", "-100"])
def test_events_after_a_negative_number_names_the_argument(kb, tmp_path, after):
    db = tmp_path / "kb.sqlite3"
    ok(db, "init", KB)
    message = fails(db, "events", KB, "--after", after)
    assert "--after must be at least 0" in message
    assert "damaged" not in message and "backup" not in message
    with pytest.raises(Exception) as info:
        kb.events(KB, int(after))
    assert info.value.code == "invalid_argument" and "after_sequence" in info.value.message
