"""The admin command line ``kb`` (kbcite/cli/): every command, its exit status, its words for a
person, ``--json``, and the Markdown import that honours versions.

Commands run in this process (``kbcite.cli.main`` with streams and an environment of their own,
``support.cli``); the tests of the process itself (its exit statuses and standard input as a
real process has them, a closed pipe, ``python -m kbcite``, ``kb_store.py``) start real ones.
"""

import io
import json
import os
import re
import sqlite3
import subprocess
import sys

import pytest

import kbcite
from kbcite import KBStore, cli
from kbcite.folder_scan import read_markdown_folder
from support.cli import COMMAND_ENVIRONMENT, run_kb
from support.commands import ROOT, child_env, module_argv
from support.files import write
from kbcite.testing import dump_file as dump

# The command line as a real process runs it: ``python -m kbcite`` from this checkout.
PROCESS = module_argv("kbcite")
VERSION_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z\Z")
KB = "help"
AGENT_WORDS = ("granted to this client", "search again", "after_sequence", "expected_version",
               "read_knowledge_article", "idempotency_key")


def process_env(env=None):
    """A real process's environment: this checkout's package, the command line's variables
    only as ``env`` gives them (as ``run_kb`` does)."""
    inherited = {k: v for k, v in child_env().items() if k not in COMMAND_ENVIRONMENT}
    return dict(inherited, **(env or {}))


def run(db, *args, ok=True, stdin=None, env=None, script=None, process=False):
    """Run the command line in this process, or as a real one (``process``, or ``script`` run
    by this interpreter); returns (exit status, stdout, stderr)."""
    argv = (["--db", str(db)] if db is not None else []) + [str(a) for a in args]
    if script is None and not process:
        code, stdout, stderr = run_kb(argv, stdin=stdin or "", env=env)
    else:
        command = PROCESS if script is None else [sys.executable, script]
        proc = subprocess.run(command + argv, input=stdin if stdin is not None else "",
                              capture_output=True, text=True, encoding="utf-8", timeout=60,
                              env=process_env(env))
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    if ok:
        assert code == 0, stderr
        assert stderr == ""
    return code, stdout, stderr


def out(db, *args, **kw):
    return run(db, *args, **kw)[1]


def fails(db, *args, status=1, **kw):
    """Run a command that must fail: that status, one message on stderr, nothing on stdout."""
    code, stdout, stderr = run(db, *args, ok=False, **kw)
    assert code == status, (code, stdout, stderr)
    assert stdout == "" or status == 3
    assert stderr.strip() and "Traceback" not in stderr
    if status != 2:
        assert not any(word in stderr for word in AGENT_WORDS), stderr
    return stderr


def as_json(db, *args, **kw):
    return json.loads(out(db, "--json", *args, **kw))


def rows(db):
    """``list --json`` of KB."""
    return as_json(db, "list", KB)


def all_events(db, *extra):
    return as_json(db, "events", KB, *extra)["events"]


@pytest.fixture
def db(tmp_path):
    """A store file with the knowledge base KB, made by ``init``."""
    path = tmp_path / "kb.sqlite3"
    assert out(path, "init", KB) == "created knowledge base %s in %s\n" % (KB, path)
    return path


@pytest.fixture
def docs(tmp_path):
    """A folder of three Markdown files."""
    folder = tmp_path / "docs"
    write(folder, "refunds.md", "# Refund policy\n\nRefunds take five working days.\n")
    write(folder, "shipping.md", "# Shipping\n\nWe ship within two days.\n")
    write(folder, "sub/returns.md", "# Returns\n\nReturn within thirty days.\n")
    write(folder, "notes.txt", "# Not Markdown\n")
    return folder


# -- the basics -------------------------------------------------------------------------------


def test_init_creates_and_refuses_a_duplicate(db):
    out(db, "init", "second", "--name", "Second KB")
    with KBStore(str(db)) as store:
        assert store.knowledge_base_exists(KB) and store.knowledge_base_exists("second")
    assert KB in fails(db, "init", KB)
    assert [r["knowledge_base_id"] for r in as_json(db, "knowledge-bases")] == [KB, "second"]
    assert "Second KB" in out(db, "kbs")


def test_db_goes_before_or_after_the_command_or_in_kb_db(db):
    for extra, env in ((["list", KB, "--db", str(db)], {}), (["list", KB], {"KB_DB": str(db)}),
                       (["--db", "/nowhere/x.db", "list", KB, "--db", str(db)], {})):
        code, stdout, stderr = run_kb(extra, env=env)
        assert code == 0, stderr
        assert stdout.startswith("ARTICLE")
    code, _, stderr = run_kb(["list", KB])  # KB_DB unset
    assert code == 2 and "--db PATH or set KB_DB" in stderr


def test_version_and_help_on_every_argument():
    code, stdout, _ = run_kb(["--version"])
    assert code == 0 and stdout.startswith("kb %s" % kbcite.__version__)
    parser = cli.build_parser()
    subparsers = [a for a in parser._actions if a.dest == "command"][0].choices
    assert set(cli.COMMANDS) <= set(subparsers)
    for name, sub in list(subparsers.items()) + [("kb", parser)]:
        assert sub.description or name == "kb"
        for action in sub._actions:
            assert action.help, "%s %s has no help" % (name, action.dest)


def test_add_save_publish_unpublish_and_events(db, tmp_path):
    text = "Line one\nहिंदी और 中文 🎉\n"
    source = write(tmp_path, "article.txt", text)
    first = out(db, "add", KB, "--title", "From content", "--content", "Plain words").strip()
    second = out(db, "add", KB, "--title", "From file", "--file", source, "--raw").strip()
    piped = out(db, "add", KB, "--title", "Piped", stdin="from stdin").strip()
    draft = out(db, "add", KB, "--title", "Not yet", "--content", "Hidden", "--draft").strip()
    listed = rows(db)
    assert [(r["article_id"], r["published"], r["title"]) for r in listed] == [
        (first, 1, "From content"), (second, 1, "From file"), (piped, 1, "Piped"),
        (draft, 0, "Not yet")]
    assert "draft" in out(db, "list", KB).splitlines()[4]
    with KBStore(str(db)) as store:
        assert store.get_article(KB, second)["content"] == text
        assert store.get_article(KB, piped)["content"] == "from stdin"
    saved = out(db, "save", KB, first, "--content", "v2").strip()
    retitled = out(db, "save", KB, first, "--title", "Renamed").strip()  # content kept
    hidden = out(db, "unpublish", KB, first).strip()
    shown = out(db, "publish", KB, first).strip()
    assert out(db, "publish", KB, first).strip() == shown  # already published: no event
    assert [saved, retitled, hidden, shown] == sorted({saved, retitled, hidden, shown})
    log = all_events(db)
    assert [(e["type"], e["updated_at"]) for e in log[3:]] == [
        ("article.updated", saved), ("article.updated", retitled),
        ("article.unpublished", hidden), ("article.published", shown)]
    assert all_events(db, "--after", "5") == log[5:]
    table = out(db, "events", KB).splitlines()
    assert table[0].split() == ["SEQ", "TYPE", "ARTICLE", "VERSION", "ACTOR"]
    assert table[1].split()[:4] == ["1", "article.published", first, log[0]["updated_at"]]
    assert out(db, "events", KB, "--after", str(len(log))) == ""


def test_search_read_and_json_are_the_tools_own_results(db):
    article = out(db, "add", KB, "--title", "Refund policy",
                  "--content", "Refunds take five working days.").strip()
    out(db, "add", KB, "--title", "Shipping", "--content", "We ship in two days.")
    with KBStore(str(db)) as store:
        granted = {KB}
        tool_search = store.call_tool("search_knowledge_base", {
            "knowledge_base_id": KB, "query": "refund days", "limit": 5}, granted=granted)
        tool_read = store.call_tool("read_knowledge_article", {
            "knowledge_base_id": KB, "article_id": article}, granted=granted)
        tool_events = store.call_tool("poll_resource_events", {
            "resource_type": "knowledge_base", "resource_id": KB}, granted=granted)
    assert as_json(db, "search", KB, "refund days", "--limit", "5") == tool_search
    assert as_json(db, "read", KB, article) == tool_read
    # The events are the tool's, each with who made its change (people see that; agents do not).
    shown_events = as_json(db, "events", KB)
    assert [{k: v for k, v in e.items() if k not in ("actor", "actor_issuer")}
            for e in shown_events["events"]] == \
        tool_events["events"]
    assert dict(shown_events, events=None) == dict(tool_events, events=None)
    assert all("actor" in e for e in shown_events["events"])
    table = out(db, "search", KB, "refund days").splitlines()
    assert table[0].split() == ["ARTICLE", "VERSION", "TITLE"]
    assert table[1].startswith(article) and "Refund policy" in table[1]
    assert "**Refunds**" in table[2] or "**days**" in table[2]
    shown = out(db, "read", KB, article)
    assert "version:  %s" % tool_read["updated_at"] in shown
    assert json.dumps(tool_read["citation"]) in shown
    assert shown.rstrip().endswith("Refunds take five working days.")
    assert "no published article matches" in out(db, "search", KB, "zebra")


def test_edit_is_compare_and_swap_with_exit_3_and_the_current_version(db, tmp_path):
    article = out(db, "add", KB, "--title", "Doc", "--content", "v1").strip()
    cited = as_json(db, "read", KB, article)["updated_at"]
    saved = out(db, "save", KB, article, "--content", "v2 by a person").strip()
    stderr = fails(db, "edit", KB, article, "--expected-version", cited, "--content", "mine",
                   status=3)
    assert saved in stderr and cited in stderr and "--expected-version %s" % saved in stderr
    assert "kb read %s %s" % (KB, article) in stderr
    assert as_json(db, "read", KB, article)["content"] == "v2 by a person"
    conflict = run(db, "--json", "edit", KB, article, "--expected-version", cited,
                   "--content", "mine", ok=False)
    assert conflict[0] == 3
    assert json.loads(conflict[1])["error"]["details"]["current_version"] == saved

    new = write(tmp_path, "new.md", "v3 from a file")
    done = out(db, "edit", KB, article, "--expected-version", saved, "--file", new,
               "--title", "Doc 3", "--idempotency-key", "k1")
    assert done.startswith("edited %s: version " % article)
    again = as_json(db, "edit", KB, article, "--expected-version", saved, "--file", new,
                    "--title", "Doc 3", "--idempotency-key", "k1")
    assert again["replayed"] is True
    head = len(all_events(db))
    piped = as_json(db, "edit", KB, article, "--expected-version", again["updated_at"],
                    stdin="v4 piped")
    assert piped["replayed"] is False and piped["event"]["sequence"] == head + 1
    assert as_json(db, "read", KB, article)["content"] == "v4 piped"


def test_errors_are_for_a_person_and_name_what_is_wrong(db, tmp_path):
    article = out(db, "add", KB, "--title", "Doc", "--content", "v1").strip()
    draft = out(db, "add", KB, "--title", "Hidden", "--content", "x", "--draft").strip()
    assert "there is no article art-000404 in knowledge base %s, draft or published" % KB \
        in fails(db, "read", KB, "art-000404")
    assert "is a draft" in fails(db, "read", KB, draft) and "kb publish" in fails(
        db, "read", KB, draft)
    assert "there is no knowledge base nowhere" in fails(db, "search", "nowhere", "refund")
    assert "there is no knowledge base nowhere" in fails(db, "list", "nowhere")
    for command in ("publish", "unpublish"):
        assert "art-000404" in fails(db, command, KB, "art-000404")
    assert "art-000404" in fails(db, "save", KB, "art-000404", "--content", "x")
    assert "--after 9 is beyond the head" in fails(db, "events", KB, "--after", "9")
    assert "--expected-version" in fails(db, "edit", KB, article, "--expected-version",
                                         "yesterday", "--content", "x")
    assert "QUERY must be at least 2" in fails(db, "search", KB, "x")
    assert "--limit must be at most 20" in fails(db, "search", KB, "doc", "--limit", "50")
    missing = tmp_path / "missing.md"
    assert str(missing) in fails(db, "add", KB, "--title", "T", "--file", missing)
    assert "give the content" not in fails(db, "add", KB, "--title", "T")  # empty stdin
    assert "content must not be empty" in fails(db, "add", KB, "--title", "T")


def test_bad_values_fail_and_write_nothing(db, tmp_path):
    article = out(db, "add", KB, "--title", "Doc", "--content", "v1").strip()
    before = dump(db)
    fails(db, "save", KB, article)  # nothing to save
    fails(db, "add", KB, "--title", "", "--content", "x")
    fails(db, "add", KB, "--title", "\u200b", "--content", "x")
    fails(db, "add", KB, "--title", "t" * 201, "--content", "x")
    fails(db, "add", KB, "--title", "T", "--content", "")
    fails(db, "import", KB, tmp_path / "no-such-dir")
    fails(db, "edit", KB, article, "--expected-version", "2020-01-01T00:00:00Z",
          "--content", "x", status=3)
    assert dump(db) == before


@pytest.mark.parametrize("args", [
    (),
    ("frobnicate", KB),
    ("add", KB, "--content", "no title"),
    ("add", KB, "--title", "T", "--content", "c", "--file", "f.md"),
    ("events", KB, "--after", "three"),
    ("edit", KB, "art-000001", "--content", "no version"),
    ("save", KB),
    ("init",),
])
def test_bad_command_lines_are_usage_errors_exit_2(db, args):
    before = dump(db)
    assert "usage" in fails(db, *args, status=2)
    assert dump(db) == before


def test_missing_foreign_and_junk_files_are_refused_untouched(tmp_path):
    path = tmp_path / "absent.db"
    for args in (("list", KB), ("add", KB, "--title", "T", "--content", "C"),
                 ("events", KB), ("publish", KB, "art-000001"), ("audit",)):
        assert "no knowledge-base store" in fails(path, *args)
        assert not path.exists()
    other = tmp_path / "other.db"
    conn = sqlite3.connect(str(other))
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    assert "not a knowledge-base store" in fails(other, "list", KB)
    assert other.read_bytes() == before
    junk = write(tmp_path, "junk.db", b"junk" * 1000)
    assert "not a knowledge-base store" in fails(junk, "list", KB)
    assert junk.read_bytes() == b"junk" * 1000


def test_a_closed_pipe_ends_quietly(db):
    with KBStore(str(db)) as store:
        store.create_articles(KB, [("Title %d" % i, "x") for i in range(3000)])
    for command in (module_argv("kbcite"), [sys.executable, str(ROOT / "kb_store.py")]):
        proc = subprocess.Popen(command + ["--db", str(db), "events", KB],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
        assert proc.stdout.readline().split() == [b"SEQ", b"TYPE", b"ARTICLE", b"VERSION",
                                                  b"ACTOR"]
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == cli.EXIT_BROKEN_PIPE
        assert stderr == ""


def test_audit_reports_problems_with_exit_1(db):
    out(db, "add", KB, "--title", "Doc", "--content", "v1")
    assert out(db, "audit") == "audit: ok\n"
    conn = sqlite3.connect(str(db))
    conn.execute("DELETE FROM events")
    conn.commit()
    conn.close()
    code, stdout, _ = run(db, "audit", ok=False)
    assert code == 1 and "missing sequence(s) 1" in stdout


def test_reindex_rebuilds_a_damaged_search_index(db):
    out(db, "add", KB, "--title", "Refund policy", "--content", "Refunds take five days.")
    out(db, "add", KB, "--title", "Shipping", "--content", "We ship in two days.")
    conn = sqlite3.connect(str(db))
    conn.execute("DELETE FROM search_docs WHERE pk = (SELECT pk FROM articles "
                 "WHERE article_id = 'art-000001')")
    conn.commit()
    conn.close()
    code, stdout, _ = run(db, "audit", ok=False)
    assert code == 1 and "search" in stdout
    assert out(db, "reindex", KB) == "reindexed %s\n" % KB
    assert out(db, "audit") == "audit: ok\n"
    assert "Refund policy" in out(db, "search", KB, "refund")
    code, _, stderr = run(db, "reindex", "no-such-kb", ok=False)
    assert code == 1 and "no-such-kb" in stderr


@pytest.mark.slow  # eight real processes
def test_a_real_process_exits_with_each_status_and_reads_piped_stdin(tmp_path):
    path = tmp_path / "kb.sqlite3"
    assert out(path, "init", KB, process=True).startswith("created knowledge base %s" % KB)
    article = out(None, "add", KB, "--title", "Piped", stdin="from a pipe, ü",
                  env={"KB_DB": str(path)}, process=True).strip()
    cited = as_json(path, "read", KB, article, process=True)
    assert cited["content"] == "from a pipe, ü"
    out(path, "save", KB, article, "--content", "moved on", process=True)
    assert "art-000404" in fails(path, "read", KB, "art-000404", process=True)
    assert "usage" in fails(path, "frobnicate", status=2, process=True)
    assert "--db PATH or set KB_DB" in fails(None, "list", KB, status=2, process=True)
    stderr = fails(path, "edit", KB, article, "--expected-version", cited["updated_at"],
                   "--content", "mine", status=3, process=True)
    assert "--expected-version" in stderr


def test_kb_store_py_and_python_m_still_run_the_command_line(db):
    assert out(db, "list", KB, script=str(ROOT / "kb_store.py")).startswith("ARTICLE")
    done = subprocess.run([sys.executable, "-m", "kb_store", "--db", str(db), "list", KB],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("ARTICLE")


# -- import: a sync that honours versions ------------------------------------------------------


def imported(db):
    """source -> article row, for the imported articles."""
    return {r["source"]: r for r in rows(db) if r["source"]}


def test_import_creates_then_updates_only_what_changed(db, docs):
    report = out(db, "import", KB, docs)
    assert report.splitlines()[-1] == \
        "3 of 3 file(s) changed an article: create 3, update 0, unchanged 0"
    first = imported(db)
    assert set(first) == {"refunds.md", "shipping.md", "sub/returns.md"}
    assert first["refunds.md"]["title"] == "Refund policy"
    assert out(db, "import", KB, docs) == \
        "0 of 3 file(s) changed an article: create 0, update 0, unchanged 3\n"
    write(docs, "shipping.md", "# Shipping\n\nWe ship within one day.\n")
    write(docs, "faq.md", "# FAQ\n\nAsk us.\n")
    report = out(db, "import", KB, docs).splitlines()
    assert report[-1] == "2 of 4 file(s) changed an article: create 1, update 1, unchanged 2"
    log = all_events(db, "--after", "3")
    assert [(e["type"], e["article_id"]) for e in log] == [
        ("article.published", imported(db)["faq.md"]["article_id"]),
        ("article.updated", first["shipping.md"]["article_id"])]


def test_an_agent_edit_survives_reimport_and_is_reported_exit_3(db, docs):
    out(db, "import", KB, docs)
    article = imported(db)["refunds.md"]["article_id"]
    version = as_json(db, "read", KB, article)["updated_at"]
    edited = as_json(db, "edit", KB, article, "--expected-version", version,
                     "--content", "Refunds take five working days. Agent: or ten in December.")
    write(docs, "refunds.md", "# Refund policy\n\nRefunds take six working days.\n")
    code, stdout, stderr = run(db, "import", KB, docs, ok=False)
    assert code == 3
    line = [l for l in stdout.splitlines() if l.startswith("conflict")][0]
    assert "refunds.md" in line and article in line
    assert version in line and edited["updated_at"] in line
    assert "--force" in stderr
    assert "Agent: or ten" in as_json(db, "read", KB, article)["content"]
    # Files beside the conflict are still synced.
    write(docs, "shipping.md", "# Shipping\n\nWe ship within one day.\n")
    code, stdout, _ = run(db, "import", KB, docs, ok=False)
    assert code == 3 and "update 1" in stdout.splitlines()[-1]
    out(db, "import", KB, docs, "--force")
    assert as_json(db, "read", KB, article)["content"] == "Refunds take six working days."
    assert out(db, "import", KB, docs).endswith("unchanged 3\n")


def test_a_person_who_saves_the_file_text_resolves_the_conflict(db, docs):
    out(db, "import", KB, docs)
    article = imported(db)["refunds.md"]["article_id"]
    out(db, "save", KB, article, "--content", "Edited by hand.")
    write(docs, "refunds.md", "# Refund policy\n\nEdited by hand.\n")
    assert out(db, "import", KB, docs).endswith("unchanged 3\n")
    write(docs, "refunds.md", "# Refund policy\n\nThen the file moved on.\n")
    assert "update 1" in out(db, "import", KB, docs)


def test_prune_unpublishes_articles_whose_file_is_gone(db, docs):
    out(db, "import", KB, docs)
    article = imported(db)["shipping.md"]["article_id"]
    (docs / "shipping.md").unlink()
    report = out(db, "import", KB, docs)
    assert "orphan    shipping.md -> %s" % article in report
    assert imported(db)["shipping.md"]["published"] == 1
    report = out(db, "import", KB, docs, "--prune")
    assert "unpublish shipping.md -> %s" % article in report
    assert imported(db)["shipping.md"]["published"] == 0
    assert all_events(db)[-1]["type"] == "article.unpublished"
    write(docs, "shipping.md", "# Shipping\n\nWe ship within two days.\n")
    assert "update    shipping.md -> %s" % article in out(db, "import", KB, docs)
    assert imported(db)["shipping.md"]["published"] == 1


def test_a_renamed_file_keeps_its_article(db, docs):
    out(db, "import", KB, docs)
    article = imported(db)["shipping.md"]["article_id"]
    (docs / "shipping.md").rename(docs / "delivery.md")
    head = len(all_events(db))
    report = out(db, "import", KB, docs, "--prune")
    assert "rename    delivery.md -> %s (was shipping.md)" % article in report
    assert imported(db)["delivery.md"]["article_id"] == article
    assert len(rows(db)) == 3 and len(all_events(db)) == head  # no duplicate, no event


def test_bom_front_matter_and_headings(db, tmp_path):
    folder = tmp_path / "notes"
    write(folder, "bom.md", "\ufeff# Heading after a BOM\n\nBody.\n")
    write(folder, "front.md", '---\ntitle: "Refunds: the rules"\ntags: [a, b]\n---\n\n'
                              "# A heading that stays\n\nBody text.\n")
    write(folder, "plain.md", "No heading at all.\n")
    out(db, "import", KB, folder)
    got = {r["source"]: r for r in rows(db)}
    assert got["bom.md"]["title"] == "Heading after a BOM"
    assert got["front.md"]["title"] == "Refunds: the rules"
    assert got["plain.md"]["title"] == "plain"
    with KBStore(str(db)) as store:
        assert store.get_article(KB, got["bom.md"]["article_id"])["content"] == "Body."
        assert store.get_article(KB, got["front.md"]["article_id"])["content"] == (
            "# A heading that stays\n\nBody text.")


@pytest.mark.parametrize("name,raw,needle", [
    ("empty.md", b"", "has no content"),
    ("blank.md", b"\n \n\t\n", "has no content"),
    ("heading.md", b"# Only a heading\n", "has no content below its title"),
    ("latin1.md", "# Caf\u00e9\n\nna\u00efve".encode("latin-1"), "is not UTF-8 text (byte 5"),
    ("front.md", b"---\ntitle: x\nno end\n", "no closing --- line"),
    ("long.md", ("# " + "t" * 300 + "\n\nbody").encode(), "at most 200 characters"),
])
def test_a_bad_file_is_named_and_nothing_is_written(db, docs, name, raw, needle):
    before = dump(db)
    write(docs, "zz/" + name, raw)
    stderr = fails(db, "import", KB, docs)
    assert str(docs / "zz" / name) in stderr and needle in stderr, stderr
    assert dump(db) == before


def test_dry_run_prints_the_plan_and_writes_nothing(db, docs):
    out(db, "import", KB, docs)
    article = imported(db)["refunds.md"]["article_id"]
    version = as_json(db, "read", KB, article)["updated_at"]
    out(db, "edit", KB, article, "--expected-version", version, "--content", "agent text")
    write(docs, "refunds.md", "# Refund policy\n\nNew file text.\n")
    write(docs, "shipping.md", "# Shipping\n\nChanged.\n")
    write(docs, "new.md", "# New\n\nNew.\n")
    (docs / "sub" / "returns.md").unlink()
    before = dump(db)
    code, stdout, _ = run(db, "import", KB, docs, "--dry-run", "--prune", ok=False)
    assert code == 3
    plan = stdout.splitlines()
    assert plan[-1].startswith("plan (nothing written): 2 of 3 file(s) would change an "
                               "article: create 1, update 1, unchanged 0, conflict 1, "
                               "unpublish 1")
    assert [l.split()[0] for l in plan[:-1]] == ["create", "conflict", "update", "unpublish"]
    assert dump(db) == before


def test_an_unreadable_folder_is_an_error(tmp_path, monkeypatch, clock):
    folder = tmp_path / "docs"
    write(folder, "ok.md", "# Ok\n\nok\n")
    (folder / "locked").mkdir()
    real_scandir = os.scandir

    def scandir(path="."):  # root reads any folder: the refusal is made here
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)
    monkeypatch.setattr(os, "scandir", scandir)
    with KBStore(":memory:", clock=clock) as store:
        store.create_knowledge_base(KB)
        with pytest.raises(kbcite.InvalidArgument) as info:
            store.folders.import_directory(KB, str(folder))
        assert "cannot read the folder" in info.value.message
        assert str(folder / "locked") in info.value.message
        assert store.list_articles(KB) == []


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True,
                    reason="root reads files whatever their mode")
def test_an_unreadable_file_is_an_error_naming_it(db, docs):
    locked = write(docs, "locked.md", "# L\n\nx")
    locked.chmod(0)
    assert str(locked) in fails(db, "import", KB, docs)


def test_import_reports_progress_on_stderr_for_long_imports(db, tmp_path):
    folder = tmp_path / "many"
    for i in range(150):
        write(folder, "doc%03d.md" % i, "# Doc %d\n\nBody %d.\n" % (i, i))
    code, stdout, stderr = run(db, "import", KB, folder, ok=False)
    assert code == 0
    assert "kb: read 150 of 150 files" in stderr and "kb: applied 150 of 150 changes" in stderr
    assert stdout.splitlines()[-1] == \
        "150 of 150 file(s) changed an article: create 150, update 0, unchanged 0"
    # Nothing to change: no line says anything was written.
    code, stdout, stderr = run(db, "import", KB, folder, ok=False)
    assert code == 0 and "applied" not in stderr
    assert stdout.splitlines()[-1].startswith("0 of 150 file(s) changed an article")


# A store as schema 1 made it (before import versions and token statistics): its tables, and
# its full-text index reading the articles table itself.
SCHEMA_1 = """
CREATE TABLE knowledge_bases (pk INTEGER PRIMARY KEY, kb_id TEXT NOT NULL UNIQUE, name TEXT,
    head_sequence INTEGER NOT NULL DEFAULT 0, published_count INTEGER NOT NULL DEFAULT 0,
    articles_created INTEGER NOT NULL DEFAULT 0);
CREATE TABLE articles (pk INTEGER PRIMARY KEY, kb_pk INTEGER NOT NULL REFERENCES
    knowledge_bases(pk), article_id TEXT NOT NULL, title TEXT NOT NULL, published INTEGER NOT
    NULL, version_us INTEGER NOT NULL, updated_at TEXT NOT NULL, source TEXT, content TEXT NOT
    NULL, UNIQUE (kb_pk, article_id), UNIQUE (kb_pk, source));
CREATE TABLE events (kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk), sequence INTEGER NOT
    NULL, type TEXT NOT NULL, article_id TEXT NOT NULL, updated_at TEXT NOT NULL,
    PRIMARY KEY (kb_pk, sequence)) WITHOUT ROWID;
CREATE TABLE idempotency (kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk), key TEXT NOT
    NULL, fingerprint TEXT NOT NULL, result TEXT NOT NULL, created_us INTEGER NOT NULL,
    PRIMARY KEY (kb_pk, key)) WITHOUT ROWID;
CREATE INDEX idempotency_age ON idempotency (created_us);
CREATE VIRTUAL TABLE fts_1 USING fts5(title, content, content='articles', content_rowid='pk',
    tokenize='unicode61 remove_diacritics 2');
"""


def make_schema_1_store(path, documents):
    """A schema-1 store holding ``documents`` (SourceDocuments) as imported, published articles."""
    conn = sqlite3.connect(str(path))
    conn.executescript(SCHEMA_1)
    conn.execute("INSERT INTO knowledge_bases (pk, kb_id, published_count, articles_created, "
                 "head_sequence) VALUES (1, ?, ?, ?, ?)", (KB, len(documents), len(documents),
                                                        len(documents)))
    for n, doc in enumerate(documents, 1):
        version = "2026-11-08T09:00:00.%06dZ" % n
        conn.execute("INSERT INTO articles (pk, kb_pk, article_id, title, published, version_us, "
                     "updated_at, source, content) VALUES (?, 1, ?, ?, 1, ?, ?, ?, ?)",
                     (n, "art-%06d" % n, doc.title, 1794128400000000 + n, version, doc.source,
                      doc.content))
        conn.execute("INSERT INTO fts_1 (rowid, title, content) VALUES (?, ?, ?)",
                     (n, doc.title, doc.content))
        conn.execute("INSERT INTO events VALUES (1, ?, 'article.published', ?, ?)",
                     (n, "art-%06d" % n, version))
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def test_an_old_store_is_upgraded_and_its_imports_are_kept_safe(tmp_path, docs):
    path = tmp_path / "old.db"
    make_schema_1_store(path, read_markdown_folder(str(docs)))
    before = path.read_bytes()
    assert "kb upgrade --db %s" % path in fails(path, "list", KB)
    assert path.read_bytes() == before
    assert out(path, "upgrade") == "upgraded %s from schema 1 to %d\n" % (
        path, kbcite.SCHEMA_VERSION)
    assert out(path, "upgrade") == "%s is already at schema %d\n" % (
        path, kbcite.SCHEMA_VERSION)
    assert out(path, "audit") == "audit: ok\n"
    found = as_json(path, "search", KB, "refund policy")["results"]
    assert found[0]["title"] == "Refund policy"
    # Unchanged files are adopted; a changed one is a conflict, since an edit cannot be ruled out.
    write(docs, "shipping.md", "# Shipping\n\nWe ship within one day.\n")
    code, stdout, _ = run(path, "import", KB, docs, ok=False)
    assert code == 3 and "conflict  shipping.md" in stdout
    assert out(path, "import", KB, docs, "--force").endswith("update 1, unchanged 2\n")
    assert out(path, "audit") == "audit: ok\n"


# -- the history: history, diff, revert, prune, and who did it ---------------------------------


def test_history_diff_and_revert_for_a_person(db):
    stdin = "Refunds take five days.\n\nAsk the desk.\n"
    aid = out(db, "add", KB, "--title", "Refunds", "--actor", "alice", stdin=stdin).strip()
    first, first_content = (as_json(db, "read", KB, aid)[k] for k in ("updated_at", "content"))
    edited = as_json(db, "edit", KB, aid, "--expected-version", first, "--actor", "bob",
                     "--summary", "December", "--content",
                     "Refunds take ten days in December.\n\nAsk the desk.\n")
    rows = as_json(db, "history", KB, aid)
    assert [(r["action"], r["actor"], r["summary"]) for r in rows] == [
        ("create", "alice", None), ("edit", "bob", "December")]
    listing = out(db, "history", KB, aid)
    assert listing.splitlines()[0].split() == ["VERSION", "ACTION", "ACTOR", "EVENT", "BYTES",
                                               "CHANGE", "SUMMARY"]
    assert "bob" in listing and "December" in listing and edited["updated_at"] + " *" in listing
    diff = out(db, "diff", KB, aid)
    assert "-Refunds take five days." in diff and "+Refunds take ten days in December." in diff
    assert "\x1b[" not in diff  # no colour when the output is not a terminal
    assert as_json(db, "diff", KB, aid, "--from", first, "--to", first)["diff"] == ""
    events = out(db, "events", KB)
    assert events.splitlines()[0].split()[-1] == "ACTOR"
    assert events.splitlines()[2].split()[-1] == "bob"
    # A revert names the version it starts from: a stale one is a conflict (exit 3).
    code, _, stderr = run(db, "revert", KB, aid, "--to", first, "--expected-version", first,
                          ok=False)
    assert code == 3 and "--expected-version %s" % edited["updated_at"] in stderr
    done = as_json(db, "revert", KB, aid, "--to", first, "--expected-version",
                   edited["updated_at"], "--summary", "undo the December rule")
    assert as_json(db, "read", KB, aid)["content"] == first_content
    assert done["event"]["type"] == "article.updated"
    assert as_json(db, "history", KB, aid)[-1]["action"] == "revert"
    assert out(db, "audit") == "audit: ok\n"


def test_history_prune_says_what_it_would_do_until_yes(db):
    aid = out(db, "add", KB, "--title", "T", "--content", "one").strip()
    version = as_json(db, "read", KB, aid)["updated_at"]
    as_json(db, "edit", KB, aid, "--expected-version", version, "--content", "two")
    before = dump(db)
    plan = out(db, "history", "prune", KB, "--keep-days", "0")
    assert plan.startswith("would prune 1 version(s) of %s" % KB) and "--yes" in plan
    assert dump(db) == before
    assert out(db, "history", "prune", KB, "--keep-days", "0", "--yes").startswith(
        "pruned 1 version(s)")
    assert [r["pruned"] for r in as_json(db, "history", KB, aid)] == [True, False]
    code, _, stderr = run(db, "diff", KB, aid, "--from", version, ok=False)
    assert code == 1 and "pruned" in stderr


@pytest.mark.parametrize("args,needle", [
    (["history", KB, "art-999999"], "art-999999"),
    (["history", "nokb", "art-000001"], "nokb"),
    (["history", "prune", KB, "--keep-days", "-1"], "--keep-days"),
    (["history", "prune", KB, "--keep-days", "99999"], "--keep-days"),
    (["history", KB, "art-000001", "--yes"], "--keep-days"),
    (["diff", KB, "art-000001", "--from", "yesterday"], "--from"),
    (["diff", KB, "art-000001", "--to", "2026-11-08T09:00:00.000009Z"], "version"),
    (["revert", KB, "art-000001", "--to", "soon", "--expected-version", "x"], "--expected-version"),
    (["revert", KB, "art-000001", "--to", "2026-11-08T09:00:00Z"], "--expected-version"),
    (["save", KB, "art-000001", "--content", "x", "--actor", ""], "--actor"),
    (["save", KB, "art-000001", "--content", "x", "--summary", "s" * 201], "--summary"),
])
def test_bad_history_commands_are_one_clear_line_and_write_nothing(db, args, needle):
    out(db, "add", KB, "--title", "T", "--content", "one")
    before = dump(db)
    code, stdout, stderr = run(db, *args, ok=False)
    assert code in (1, 2), (code, stderr)
    assert needle in stderr and "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    # One line, or a usage error's usage and then its one line.
    assert len(lines) == 1 if code == 1 else lines[-1].startswith("kb")
    assert dump(db) == before


# -- day two: every command's --json, formats, completion, delete, export --------------------


def test_every_writing_command_speaks_json_with_the_tools_names(db, tmp_path):
    other = tmp_path / "other.sqlite3"
    made = as_json(other, "init", KB, "--name", "Help")
    assert made == {"knowledge_base_id": KB, "name": "Help", "store": str(other)}
    added = as_json(db, "add", KB, "--title", "T", "--content", "x")
    assert added["published"] is True and set(added) >= {"knowledge_base_id", "article_id",
                                                         "updated_at", "title"}
    aid = added["article_id"]
    saved = as_json(db, "save", KB, aid, "--content", "y")
    assert saved["article_id"] == aid and VERSION_RE.match(saved["updated_at"])
    assert as_json(db, "unpublish", KB, aid)["published"] is False
    assert as_json(db, "publish", KB, aid)["published"] is True
    assert as_json(db, "upgrade")["upgraded"] is False
    run(db, "token", "create", "bot", "--grant", KB, ok=False)
    assert as_json(db, "token", "revoke", "bot")["name"] == "bot"
    listed = as_json(db, "list", KB)
    assert listed[0]["published"] is True  # a boolean, not 1
    assert as_json(db, "kbs")[0]["knowledge_base_id"] == KB


def test_a_missing_token_is_one_line_not_a_traceback(db):
    stderr = fails(db, "token", "revoke", "nobody")
    assert stderr.strip() == "kb: error: there is no token named nobody (kb token list lists them)"


def test_formats_and_fields_for_list_like_commands(db):
    for i in range(3):
        out(db, "add", KB, "--title", "Title, %d" % i, "--content", "text %d" % i)
    csv_text = out(db, "list", KB, "--format", "csv", "--fields", "article_id,title,published")
    assert csv_text.splitlines() == ["article_id,title,published",
                                     'art-000001,"Title, 0",true', 'art-000002,"Title, 1",true',
                                     'art-000003,"Title, 2",true']
    tsv = out(db, "events", KB, "--format", "tsv", "--fields", "sequence,type").splitlines()
    assert tsv[0] == "sequence\ttype" and tsv[1] == "1\tarticle.published"
    records = json.loads(out(db, "kbs", "--format", "json"))
    assert records[0]["knowledge_base_id"] == KB and records[0]["published"] == 3
    picked = out(db, "search", KB, "title", "--fields", "article_id,title").splitlines()
    assert picked[0].split() == ["ARTICLE", "TITLE"]
    history_rows = json.loads(out(db, "history", KB, "art-000001", "--format", "json",
                                  "--fields", "action,current"))
    assert history_rows == [{"action": "create", "current": True}]
    stderr = fails(db, "list", KB, "--fields", "article_id,nonsense")
    assert "--fields: nonsense is not a field here" in stderr and "article_id" in stderr
    assert "invalid choice" in fails(db, "list", KB, "--format", "xml", status=2)


def test_completion_scripts_are_valid_and_offer_the_commands(tmp_path):
    bash = out(None, "completion", "bash")
    assert subprocess.run(["bash", "-n"], input=bash, text=True).returncode == 0
    assert "complete -o default -F _kb kb" in bash and "export" in bash
    probe = bash + '\nCOMP_WORDS=(kb ex); COMP_CWORD=1; _kb; echo "${COMPREPLY[@]}"\n' \
        'COMP_WORDS=(kb import --sk); COMP_CWORD=2; _kb; echo "${COMPREPLY[@]}"\n' \
        'COMP_WORDS=(kb list --format c); COMP_CWORD=3; _kb; echo "${COMPREPLY[@]}"\n'
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True)
    assert done.stdout.splitlines() == ["export", "--skip-bad", "csv"], done.stderr
    zsh = out(None, "completion", "zsh")
    assert zsh.startswith("#compdef kb") and "bashcompinit" in zsh


def test_delete_needs_yes_and_then_is_for_good(db):
    aid = out(db, "add", KB, "--title", "Gone soon", "--content", "text").strip()
    before = dump(db)
    plan = out(db, "delete", KB, aid)
    assert plan.startswith("plan (nothing deleted)") and "--yes" in plan and "for good" in plan
    assert dump(db) == before
    assert out(db, "delete", KB, aid, "--yes").startswith("deleted %s, event 2" % aid)
    assert "there is no article %s" % aid in fails(db, "read", KB, aid)
    assert aid not in out(db, "list", KB)
    assert out(db, "events", KB).splitlines()[-1].split()[1] == "article.deleted"
    assert out(db, "audit") == "audit: ok\n"


def test_edit_with_a_title_alone_retitles(db):
    aid = out(db, "add", KB, "--title", "Old", "--content", "Kept text.").strip()
    version = as_json(db, "read", KB, aid)["updated_at"]
    as_json(db, "edit", KB, aid, "--expected-version", version, "--title", "New")
    article = as_json(db, "read", KB, aid)
    assert (article["title"], article["content"]) == ("New", "Kept text.")


def test_import_names_every_bad_file_then_skip_bad_imports_the_rest(db, docs):
    write(docs, "bad1.md", "")
    write(docs, "sub/bad2.md", "---\ntitle: x\n")
    write(docs, ".obsidian/workspace.md", "# Not mine\n\nx\n")
    before = dump(db)
    stderr = fails(db, "import", KB, docs, "--dry-run")
    assert "2 file(s) cannot be imported" in stderr
    assert str(docs / "bad1.md") in stderr and str(docs / "sub" / "bad2.md") in stderr
    assert "--skip-bad" in stderr and dump(db) == before
    report = out(db, "import", KB, docs, "--skip-bad")
    assert "bad       bad1.md: it has no content; not imported" in report
    assert "skipped   .obsidian/ (a dot-file or dot-folder)" in report
    assert report.splitlines()[-1].startswith("3 of 3 file(s) changed an article: create 3")


def test_import_guards_a_prune_from_the_wrong_folder(db, docs, tmp_path):
    out(db, "import", KB, docs)
    wrong = tmp_path / "wrongfolder"
    write(wrong, "x.md", "# X\n\nx\n")
    before = dump(db)
    stderr = fails(db, "import", KB, wrong, "--prune")
    assert "last imported from %s" % docs in stderr and "--yes" in stderr
    assert dump(db) == before
    plan = out(db, "import", KB, wrong, "--prune", "--dry-run")
    assert "warning: knowledge base %s was last imported from" % KB in plan
    assert "unpublish" in out(db, "import", KB, wrong, "--prune", "--yes")


def test_export_round_trip_and_the_way_out_of_a_conflict(db, docs, tmp_path):
    out(db, "import", KB, docs)
    aid = [r for r in rows(db) if r["source"] == "refunds.md"][0]["article_id"]
    version = as_json(db, "read", KB, aid)["updated_at"]
    as_json(db, "edit", KB, aid, "--expected-version", version, "--content",
            "Refunds take five working days.\n\nTen in December.")
    code, _, stderr = run(db, "import", KB, docs, ok=False)
    assert code == 3 and "kb export %s FOLDER --edited" % KB in stderr
    report = out(db, "export", KB, docs, "--edited")
    assert report.splitlines()[0] == "write     refunds.md <- %s" % aid
    assert out(db, "import", KB, docs).splitlines()[-1].startswith("0 of 3 file(s) changed")
    folder = tmp_path / "export"
    assert out(db, "export", KB, folder).splitlines()[-1] == "write 3, unchanged 0"
    text = (folder / "refunds.md").read_text(encoding="utf-8")
    assert text.startswith('---\ntitle: "Refund policy"\narticle_id: "%s"\n' % aid)
    write(folder, "shipping.md", "# Changed here\n\nby hand\n")
    stderr = fails(db, "export", KB, folder)
    assert "shipping.md" in stderr and "--yes" in stderr


def test_progress_updates_one_line_on_a_terminal():
    from kbcite.cli.output import Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    screen = Terminal()
    progress = Progress(screen)
    for done in range(1, 6):
        progress("read", done, 5)
    progress.finish()
    text = screen.getvalue()
    assert "\n" not in text and text.count("\r") >= 2
    assert "kb: read 5 of 5 files" in text and text.endswith("\r\x1b[K")


def test_ctrl_c_during_an_import_says_nothing_was_written(db, docs, monkeypatch, capsys):
    from kbcite.cli import main
    from kbcite.folders import Folders

    real = Folders.import_directory

    def interrupted(self, *args, **kwargs):
        def progress(phase, done, total):
            if phase == "write":
                raise KeyboardInterrupt
        kwargs["progress"] = progress
        return real(self, *args, **kwargs)
    monkeypatch.setattr(Folders, "import_directory", interrupted)
    before = dump(db)
    assert main(["--db", str(db), "import", KB, str(docs)]) == 130
    assert "interrupted: nothing was written" in capsys.readouterr().err
    assert dump(db) == before


def test_search_hits_name_the_file_they_came_from(db, tmp_path):
    """Two pages of one title in different folders, told apart by ``--fields source``."""
    write(tmp_path / "notes" / "linux", "route.md", "# route\n\nShow the IP routing table.\n")
    write(tmp_path / "notes" / "windows", "route.md", "# route\n\nPrint the route table.\n")
    out(db, "import", KB, str(tmp_path / "notes"))
    out(db, "add", KB, "--title", "route planner", "--content", "Plans a route.")
    rows = out(db, "search", KB, "route", "--format", "tsv",
               "--fields", "source,title").splitlines()
    assert rows[0] == "source\ttitle"
    # The one made by hand has no source.
    assert sorted(rows[1:]) == ["\troute planner", "linux/route.md\troute",
                                "windows/route.md\troute"]
    hits = as_json(db, "search", KB, "route")["results"]
    assert sorted(h["source"] or "" for h in hits) == ["", "linux/route.md", "windows/route.md"]
