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
    kb.folders.import_directory(KB, str(docs))
    ids = source_ids(kb)
    agent_edit(kb, ids["refunds.md"], "Refunds take five working days.\n\nTen in December.",
               clock)
    agent_edit(kb, ids["refunds.md"], "Refunds take six working days.\n\nTen in December.",
               clock, key="agent-2")
    clock.advance(days=2)
    pruned = kb.prune_history(KB, 0)
    assert pruned["pruned"] == 1  # the agent's first edit; the import's base is kept
    assert kb.prune_history(KB, 0, dry_run=True)["pruned"] == 0
    written = kb.folders.export_directory(KB, str(docs), edited=True)
    assert [(a["path"], a["action"]) for a in written["actions"]] == [("refunds.md", "write")]
    assert "six working days" in (docs / "refunds.md").read_text(encoding="utf-8")
    again = kb.folders.import_directory(KB, str(docs))
    assert again["counts"]["conflict"] == 0 and again["counts"]["update"] == 0
    assert kb.folders.import_directory(KB, str(docs))["counts"]["unchanged"] == 2
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


# -- 3. the small ones ------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path):
    """A store file with the knowledge base KB."""
    path = tmp_path / "kb.sqlite3"
    ok(path, "init", KB)
    return path


def test_an_import_summary_counts_files_apart_from_unpublished_articles(db, docs):
    ok(db, "import", KB, docs)
    (docs / "shipping.md").unlink()
    write(docs, "refunds.md", "# Refund policy\n\nRefunds take six working days.\n")
    last = ok(db, "import", KB, docs, "--prune").splitlines()[-1]
    assert last == ("1 of 1 file(s) changed an article: create 0, update 1, unchanged 0, "
                    "unpublish 1"), last


def test_reimporting_an_export_changes_no_text_as_the_docs_say(kb, docs, tmp_path):
    kb.folders.import_directory(KB, str(docs))
    kb.create_article(KB, "Made in the store", "Not from a file.")
    before = {a["article_id"]: kb.get_article(KB, a["article_id"])["content"]
              for a in kb.list_articles(KB)}
    out = tmp_path / "export"
    kb.folders.export_directory(KB, str(out))
    counts = kb.folders.import_directory(KB, str(out))["counts"]
    assert {name for name in counts if counts[name]} == {"unchanged", "adopt"}
    assert before == {a["article_id"]: kb.get_article(KB, a["article_id"])["content"]
                      for a in kb.list_articles(KB)}
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "cli.md"),
              encoding="utf-8") as fh:
        page = " ".join(fh.read().split())
    assert "changes nothing" not in page and "adopted by its file (`adopt`" in page


def test_messages_name_the_command_lines_flags_not_python_keywords(db, docs, tmp_path):
    write(docs, "empty.md", "")
    message = fails(db, "import", KB, docs)
    assert "--skip-bad" in message and "skip_bad" not in message
    ok(db, "import", KB, docs, "--skip-bad")
    other = tmp_path / "other"
    write(other, "a.md", "# A\n\ntext\n")
    message = fails(db, "import", KB, other, "--prune")
    assert "--yes" in message and "yes=True" not in message
    out = tmp_path / "export"
    ok(db, "export", KB, out)
    write(out, "refunds.md", "# Mine\n\nchanged\n")
    ok(db, "add", KB, "--title", "New", "--content", "x")
    with KBStore(str(db)) as store:
        store.save_article(KB, source_ids(store)["refunds.md"], content="store change")
    message = fails(db, "export", KB, out)
    assert "--yes" in message and "yes=True" not in message
    with KBStore(str(db)) as store, pytest.raises(Exception) as info:
        store.folders.export_directory(KB, str(out))
    assert "yes=True" in info.value.message  # the Python API names its own keyword


def test_a_page_named_dot_dot_md_is_imported_when_kbignore_takes_it_back(kb, tmp_path):
    folder = tmp_path / "docs"
    write(folder, "..md", "# Dot dot\n\nA real page name.\n")
    write(folder, ".hidden.md", "# Hidden\n\nstays out\n")
    assert kb.folders.import_directory(KB, str(folder))["counts"]["create"] == 0
    write(folder, ".kbignore", "!..md\n")
    result = kb.folders.import_directory(KB, str(folder))
    assert [(a["source"], a["action"]) for a in result["actions"]] == [("..md", "create")]
    assert {s["source"] for s in result["skipped"]} == {".hidden.md"}
    out = tmp_path / "export"
    kb.folders.export_directory(KB, str(out))
    assert (out / "..md").is_file()


def test_kb_save_takes_piped_content_and_a_title_alone_still_retitles(db):
    aid = ok(db, "add", KB, "--title", "Piped", "--content", "old").strip()
    ok(db, "save", KB, aid, stdin="new text from a pipe\n")
    article = json.loads(ok(db, "--json", "read", KB, aid))
    assert article["content"].strip() == "new text from a pipe"
    ok(db, "save", KB, aid, "--title", "Renamed", stdin="")
    article = json.loads(ok(db, "--json", "read", KB, aid))
    assert (article["title"], article["content"].strip()) == ("Renamed", "new text from a pipe")


def test_non_utf8_standard_input_is_named_by_its_byte_position(db):
    aid = ok(db, "add", KB, "--title", "Bytes", "--content", "old").strip()
    stdin = io.TextIOWrapper(io.BytesIO("caf\xe9 au lait".encode("latin-1")), encoding="utf-8")
    message = fails(db, "save", KB, aid, "--file", "-", stdin=stdin)
    assert "standard input is not UTF-8 text (byte 3 is 0xe9)" in message
    assert "surrogate" not in message


@pytest.mark.parametrize("title", ["two\nlines", "a\ttab", "bell\x07"])
def test_titles_with_a_line_break_or_tab_are_refused(kb, title):
    with pytest.raises(Exception) as info:
        kb.create_article(KB, title, "text")
    assert info.value.code == "invalid_argument" and "one line" in info.value.message
    aid = kb.create_article(KB, "Fine", "text")
    with pytest.raises(Exception):
        kb.save_article(KB, aid, title=title)
    assert [a["title"] for a in kb.list_articles(KB)] == ["Fine"]


@pytest.mark.parametrize("kb_id", ["bad id", "a/b", "-x", "ünïcødé", "", "x" * 65, "a\nb"])
def test_knowledge_base_ids_are_checked_when_made(store, kb_id):
    with pytest.raises(Exception) as info:
        store.create_knowledge_base(kb_id)
    assert info.value.code == "invalid_argument"
    assert store.list_knowledge_bases() == []


@pytest.mark.parametrize("kb_id", ["support", "a.b_c-d", "X" * 64, "2026", "_x", ".x"])
def test_good_knowledge_base_ids_are_made(store, kb_id):
    store.create_knowledge_base(kb_id)
    assert [k["knowledge_base_id"] for k in store.list_knowledge_bases()] == [kb_id]


def test_an_existing_odd_knowledge_base_id_keeps_working(store):
    with store._db.write():
        store._db.kbs.insert("odd id/ü", None)  # made before IDs were checked
    aid = store.create_article("odd id/ü", "Still here", "Works.")
    assert store.get_article("odd id/ü", aid)["title"] == "Still here"
    assert store.events("odd id/ü")["head_sequence"] == 1


def test_kb_init_refuses_a_bad_id_plainly(tmp_path):
    message = fails(tmp_path / "kb.sqlite3", "init", "bad id")
    assert "not a knowledge-base ID" in message and "letters, digits" in message


def test_db_naming_a_folder_says_so(tmp_path):
    for args in (("list", KB), ("init", KB)):
        message = fails(tmp_path, *args)
        assert "is a folder, not a store" in message and "kb.sqlite3" in message


def test_fields_empty_is_refused(db):
    message = fails(db, "list", KB, "--fields", "", status=2)
    assert "--fields" in message and "at least one field" in message
    fails(db, "list", KB, "--fields", " , ", status=2)


def test_tsv_is_tab_separated_without_csv_quoting(db):
    ok(db, "add", KB, "--title", 'He said "hi", then left', "--content", "x")
    rows = ok(db, "list", KB, "--format", "tsv", "--fields", "article_id,title").splitlines()
    assert rows == ["article_id\ttitle", 'art-000001\tHe said "hi", then left']
    csv_rows = ok(db, "list", KB, "--format", "csv", "--fields", "title").splitlines()
    assert csv_rows[1] == '"He said ""hi"", then left"'


def test_tsv_escapes_tabs_and_line_breaks_in_a_cell():
    from kbcite.cli.output import tsv_cell
    assert tsv_cell("a\tb\nc\\d\re") == "a\\tb\\nc\\\\d\\re"


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_snippets_are_bold_on_a_terminal_and_marked_when_piped(monkeypatch):
    from kbcite.cli.output import marked
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert marked("the **refund** window", Terminal()) == "the \x1b[1mrefund\x1b[0m window"
    assert marked("the **refund** window", io.StringIO()) == "the **refund** window"
    monkeypatch.setenv("NO_COLOR", "1")
    assert marked("the **refund** window", Terminal()) == "the refund window"
    assert marked("odd ** mark", Terminal()) == "odd ** mark"


def test_kb_search_on_a_terminal_prints_no_asterisks(db, monkeypatch):
    ok(db, "add", KB, "--title", "Window", "--content", "The refund window is five days.")
    assert "**refund**" in ok(db, "search", KB, "refund")  # piped: the marks are kept
    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli_main(["--db", str(db), "search", KB, "refund"]) == 0
    shown = sys.stdout.getvalue()
    monkeypatch.undo()
    assert "The refund window" in shown and "**" not in shown


def test_delete_without_yes_prints_a_plan_and_warns_of_an_imported_article(db, docs):
    ok(db, "import", KB, docs)
    with KBStore(str(db)) as store:
        aid = source_ids(store)["refunds.md"]
    run = kb_cli(db, "delete", KB, aid)
    assert run.status == 0 and run.stderr == ""
    assert run.stdout.startswith("plan (nothing deleted)") and "--yes" in run.stdout
    assert "refunds.md" in run.stdout and "new article ID" in run.stdout
    assert json.loads(ok(db, "--json", "delete", KB, aid))["deleted"] is False
    run = kb_cli(db, "delete", KB, aid, "--yes")
    assert run.status == 0 and run.stdout.startswith("deleted %s" % aid)
    assert "warning" in run.stderr and "new article ID" in run.stderr
    made = ok(db, "add", KB, "--title", "Store only", "--content", "x").strip()
    assert "new article ID" not in ok(db, "delete", KB, made)


def test_kb_sim_help_explains_every_size():
    from kbcite.sim.cli import _parser
    helps = {action.dest: action.help for action in _parser("kb-sim")._actions}
    for name in ("articles", "questions", "saves", "hours"):
        assert helps[name] and "default" in helps[name], name


def test_kb_server_suggests_the_near_knowledge_base_and_checks_origins(db, capsys):
    from kbcite.server.cli import main as server_main
    with pytest.raises(SystemExit) as info:
        server_main(["--db", str(db), "--grant", KB[:-1] + "x"])
    assert "did you mean %s?" % KB in str(info.value.code)
    with pytest.raises(SystemExit) as info:
        server_main(["--db", str(db), "--grant", "zzzzzz"])
    assert "kb knowledge-bases" in str(info.value.code)
    for origin in ("notanorigin", "https://app.example/path", "ftp://x", "https://h:no"):
        with pytest.raises(SystemExit) as info:
            server_main(["--db", str(db), "--http", "127.0.0.1:0", "--allow-origin", origin])
        assert info.value.code == 2
        assert "--allow-origin" in capsys.readouterr().err


def test_a_store_of_another_user_says_whose_it_is(tmp_path, monkeypatch):
    from kbcite.engines import sqlite as sqlite_engine
    path = tmp_path / "kb.sqlite3"
    ok(path, "init", KB)
    monkeypatch.setattr(sqlite_engine.os, "access",
                        lambda p, mode: mode != os.W_OK or not str(p).endswith("kb.sqlite3"))
    if not hasattr(os, "geteuid"):
        pytest.skip("no user IDs here")
    monkeypatch.setattr(sqlite_engine.os, "geteuid", lambda: os.stat(str(path)).st_uid + 1)
    reason = sqlite_engine.read_only_reason(str(path))
    assert "belongs to another user" in reason and "mode" in reason
    message = fails(path, "init", "other")
    assert "cannot be written" in message and "not a knowledge-base store" not in message


# -- 4. an export in the form each file was imported in ---------------------------------------

FORMS = [
    "# git commit\n\nRecord changes to the repository.\n\n## Options\n\n- `-m`: the message.\n",
    "# Closed heading #\n\nBody.\n",
    "---\ntitle: Shipping\ntags: [a, b]\n---\nWe ship.\n",
    "---\ntitle: >\n  A long\n  title\nauthor: me\n---\n\nBody here.\n\nMore.\n",
    "---\nlayout: page\n---\n\n# Heading under front matter\n\nText.\n",
    "+++\ntitle = \"Toml\"\nweight = 3\n+++\n\nToml body.\n",
    "<!-- a badge -->\n# Below a comment\n\nText.\n",
    "\ufeff# With a BOM\r\n\r\nWindows lines.\r\n",
    "No title at all, only text.\n",
    "# Two trailing newlines\n\nText.\n\n\n",
    "# No final newline\n\nText.",
    "---\ntitle: Exported\narticle_id: \"art-000007\"\nversion: \"2026-11-08T09:00:00.000000Z\"\n"
    "source: \"x.md\"\n---\n\nOnce exported.\n",
]


@pytest.mark.parametrize("original", FORMS)
def test_format_like_gives_back_the_file_unchanged_and_reads_back_an_edit(original):
    from kbcite.markdown import format_like, parse_document
    title, body, meta = parse_document(original, "fallback")
    fields = {"article_id": meta.get("article_id", "art-000007"),
              "version": meta.get("version", "2026-11-08T09:00:00.000000Z"),
              "source": "x.md", "published": True}
    assert format_like(original, title, body, fields) == original
    edited = body + "\n\nOne line more."
    text = format_like(original, title, edited, fields)
    assert parse_document(text, "fallback")[:2] == (title, edited)
    renamed = format_like(original, "A new title", body, fields)
    if parse_document(original, None)[0] is not None:  # a title of its own, not the name's
        assert parse_document(renamed, "fallback")[:2] == ("A new title", body)


def test_format_like_updates_only_the_keys_the_front_matter_had():
    from kbcite.markdown import format_like
    original = ("---\ntitle: Exported\narticle_id: \"art-000007\"\n"
                "version: \"2026-11-08T09:00:00.000000Z\"\nowner: docs-team\n---\n\nText.\n")
    text = format_like(original, "Exported", "Text, edited.", {
        "article_id": "art-000007", "version": "2026-11-09T10:00:00.000000Z",
        "source": "x.md", "published": True})
    assert text == ("---\ntitle: Exported\narticle_id: \"art-000007\"\n"
                    "version: \"2026-11-09T10:00:00.000000Z\"\nowner: docs-team\n---\n\n"
                    "Text, edited.\n")


def diff_lines(before, after):
    """The lines a unified diff of two texts removes and adds."""
    import difflib
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(),
                                                  lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


# Every form but an earlier export's, whose version key an edit must change too.
PAGES = FORMS[:-1]


def test_export_edited_writes_the_imported_form_and_the_diff_is_the_edit(kb, tmp_path, clock):
    folder = tmp_path / "docs"
    for i, original in enumerate(PAGES):
        write(folder, "page-%02d.md" % i, original)
    kb.folders.import_directory(KB, str(folder))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    ids = source_ids(kb)
    for i, original in enumerate(PAGES):
        article = kb.get_article(KB, ids["page-%02d.md" % i])
        lines = article["content"].split("\n")
        lines[-1] = lines[-1] + " Edited."  # one line changed by an agent
        agent_edit(kb, article["article_id"], "\n".join(lines), clock, key="e%d" % i)
    result = kb.folders.export_directory(KB, str(folder), edited=True)
    assert result["counts"]["write"] == len(PAGES)
    for i in range(len(PAGES)):
        name = "page-%02d.md" % i
        now = (folder / name).read_bytes()
        changed = diff_lines(before[name].decode("utf-8"), now.decode("utf-8"))
        assert len(changed) == 2 and changed[1].endswith(" Edited."), (name, changed)
        assert b"article_id" not in now or b"article_id" in before[name]
    again = kb.folders.import_directory(KB, str(folder))
    assert again["counts"]["conflict"] == 0 and again["counts"]["update"] == 0
    assert kb.folders.import_directory(KB, str(folder))["counts"]["unchanged"] == len(PAGES)
    assert kb.folders.export_directory(KB, str(folder), edited=True)["counts"]["write"] == 0


def test_export_edited_front_matter_asks_for_the_full_form(db, docs):
    ok(db, "import", KB, docs)
    with KBStore(str(db)) as store:
        agent_edit(store, source_ids(store)["refunds.md"], "Refunds take a day.", None)
    ok(db, "export", KB, docs, "--edited", "--front-matter")
    text = (docs / "refunds.md").read_text(encoding="utf-8")
    assert text.startswith("---\ntitle: \"Refund policy\"\narticle_id: ") and "version: " in text
    assert json.loads(ok(db, "--json", "import", KB, docs))["counts"]["conflict"] == 0


def test_a_one_line_agent_edit_is_a_one_line_git_diff(tmp_path, clock):
    import shutil
    import subprocess
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    write(repo, "docs/git-commit.md", FORMS[0])
    write(repo, "docs/setup.md", "---\ntitle: Setup\nsidebar_position: 2\n---\n\n"
          "Install it.\n\nThen run it.\n")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")

    def git(*args):
        return subprocess.run(["git", "-C", str(repo)] + list(args), env=env, check=True,
                              capture_output=True, text=True).stdout
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "docs")
    db = tmp_path / "kb.sqlite3"
    ok(db, "init", KB)
    ok(db, "import", KB, repo / "docs")
    with KBStore(str(db)) as store:
        ids = source_ids(store)
        for source, old, new in (("git-commit.md", "Record changes", "Record a change"),
                                 ("setup.md", "Then run it.", "Then run it twice.")):
            content = store.get_article(KB, ids[source])["content"].replace(old, new)
            agent_edit(store, ids[source], content, None, key=source)
    ok(db, "export", KB, repo / "docs", "--edited")
    stat = git("diff", "--numstat")
    assert sorted(stat.split("\n")[:-1]) == ["1\t1\tdocs/git-commit.md", "1\t1\tdocs/setup.md"]
    assert json.loads(ok(db, "--json", "import", KB, repo / "docs"))["counts"]["update"] == 0


MARKDOWNLINT = "markdownlint-cli@0.50.0"


@pytest.mark.slow
def test_the_round_trip_adds_no_markdownlint_violation(tmp_path, clock):
    import shutil
    import subprocess
    if shutil.which("npx") is None:
        if os.environ.get("CI"):
            pytest.fail("npx is missing: .ci/run installs Node.js")
        pytest.skip("markdownlint-cli runs through npx, which is not installed")
    folder = tmp_path / "docs"
    pages = [f for f in FORMS if not f.startswith("\ufeff")]
    for i, original in enumerate(pages):
        write(folder, "page-%02d.md" % i, original)

    # A docs repository's rules: markdownlint's defaults, and every page starts with its
    # heading (front matter's title does not count), as many such repositories ask.
    config = tmp_path / "markdownlint.json"
    config.write_text(json.dumps({"default": True, "MD041": {"front_matter_title": ""}}))

    def lint():
        done = subprocess.run(["npx", "-y", "-p", "node@22", "-p", MARKDOWNLINT, "--",
                               "markdownlint", "--json", "--config", str(config), str(folder)],
                              capture_output=True, text=True, timeout=600)
        if done.returncode not in (0, 1) and not os.environ.get("CI") and any(
                word in done.stderr for word in ("ENOTFOUND", "E404", "ETIMEDOUT")):
            pytest.skip("markdownlint-cli could not be fetched from the npm registry")
        # Exit 1 and its findings as JSON on stderr (after whatever npm warned of), or 0.
        assert done.returncode in (0, 1), done.stderr[-2000:]
        lines = done.stderr.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("[")), None)
        found = json.loads("\n".join(lines[start:])) if done.returncode else []
        return {(os.path.basename(v["fileName"]), v["ruleNames"][0]) for v in found}
    before = lint()
    kb = KBStore(":memory:", clock=clock, create=True)
    kb.create_knowledge_base(KB)
    kb.folders.import_directory(KB, str(folder))
    ids = source_ids(kb)
    for i in range(len(pages)):
        article = kb.get_article(KB, ids["page-%02d.md" % i])
        agent_edit(kb, article["article_id"], article["content"] + "\n\nAn agent's line.",
                   clock, key="l%d" % i)
    kb.folders.export_directory(KB, str(folder), edited=True)
    kb.close()
    after = lint()
    assert after <= before, sorted(after - before)


# -- 5. dump and restore: a knowledge base moved with its IDs ---------------------------------


def history_of(store, kb_id):
    """Everything a move must keep: articles, their versions and texts, the event log."""
    articles = []
    for row in store.list_articles(kb_id):
        article = store.get_article(kb_id, row["article_id"])
        versions = store.history(kb_id, row["article_id"])
        texts = store.version_texts(kb_id, row["article_id"],
                                   [v["updated_at"] for v in versions if not v["pruned"]])
        articles.append((article, versions, texts))
    log, after = [], 0
    while True:
        page = store.events(kb_id, after)
        log += page["events"]
        if not page["has_more"]:
            return articles, log, page["head_sequence"]
        after = page["next_after_sequence"]


def busy_history(store, docs, clock):
    """A knowledge base with imports, an agent's edit, a draft, a deletion and a prune."""
    store.folders.import_directory(KB, str(docs))
    ids = source_ids(store)
    agent_edit(store, ids["refunds.md"], "Refunds take a day.\n", clock)
    clock.advance(minutes=1)
    store.save_article(KB, ids["shipping.md"], content="We ship the same day.\n\n")
    draft = store.create_article(KB, "A draft", "Not yet.\n", published=False)
    gone = store.create_article(KB, "Gone", "Deleted later.")
    store.delete_article(KB, gone)
    store.create_article(KB, "Latest", "Made after the deletion.")
    clock.advance(days=3)
    store.save_article(KB, draft, content="Still not yet.")
    store.prune_history(KB, 1)
    return ids


def test_a_dump_restores_with_its_ids_versions_history_and_events(kb, docs, clock, tmp_path):
    busy_history(kb, docs, clock)
    before = history_of(kb, KB)
    data = json.loads(json.dumps(kb.dump_knowledge_base(KB)))
    made = kb.restore_knowledge_base(data, as_id="moved")
    assert made["knowledge_base_id"] == "moved"
    assert history_of(kb, "moved") == before
    assert kb.audit() == []
    found = kb.call_tool("search_knowledge_base", {"knowledge_base_id": "moved",
                                                   "query": "refunds"}, granted={"moved"})
    assert [hit["article_id"] for hit in found["results"]] == [source_ids(kb)["refunds.md"]]
    # The next article made in the copy takes the number after the deleted one's, as here.
    assert kb.create_article("moved", "Next", "x") == kb.create_article(KB, "Next", "x")
    # Refused plainly: the same ID again, a bad --as, a file that is not a dump.
    for bad, as_id, word in ((data, "moved", "already exists"), (data, "bad id", "--as"),
                             ({"format": "other"}, "x", "not a knowledge-base dump"),
                             (dict(data, version=99), "y", "format version 99")):
        with pytest.raises(Exception) as info:
            kb.restore_knowledge_base(bad, as_id=as_id)
        assert word in info.value.message
    assert len(kb.list_knowledge_bases()) == 2


def test_kb_dump_and_restore_move_a_knowledge_base_to_another_engine(
        tmp_path, docs, clock, pg_url):
    source = tmp_path / "kb.sqlite3"
    with KBStore(str(source), clock=clock, create=True) as store:
        store.create_knowledge_base(KB)
        busy_history(store, docs, clock)
        before = history_of(store, KB)
    dump = tmp_path / "kb-docs.json"
    assert ok(source, "dump", KB, dump).startswith("dumped %s to %s" % (KB, dump))
    assert "there already" in fails(source, "dump", KB, dump)
    ok(source, "dump", KB, dump, "--yes")
    assert ok(pg_url, "restore", dump).startswith("restored %s: 4 article(s)" % KB)
    with KBStore(pg_url) as store:
        assert history_of(store, KB) == before
        assert store.audit() == []
        content = store.get_article(KB, source_ids(store)["refunds.md"])["content"]
        assert content == "Refunds take a day.\n"  # byte for byte, its newline kept
    # And back from PostgreSQL to SQLite through a pipe, under another ID.
    piped = kb_cli(pg_url, "dump", KB, "-").stdout
    ok(source, "restore", "-", "--as", "back", stdin=piped)
    with KBStore(str(source)) as store:
        assert history_of(store, "back") == before
    assert "not a kb dump" in fails(source, "restore", docs / "refunds.md")


# -- 6. a merge path: diff against a file, edit from a Markdown file -------------------------


def test_kb_diff_compares_an_article_with_a_file_read_as_import_reads_it(db, docs):
    ok(db, "import", KB, docs)
    with KBStore(str(db)) as store:
        aid = source_ids(store)["refunds.md"]
    assert ok(db, "diff", KB, aid, "--file", docs / "refunds.md") == ""
    write(docs, "refunds.md", "# Refund policy\n\nRefunds take six working days.\n")
    shown = ok(db, "diff", KB, aid, "--file", docs / "refunds.md").splitlines()
    assert "-Refunds take five working days." in shown
    assert "+Refunds take six working days." in shown
    assert not any(line.startswith(("+# ", "-# ")) for line in shown)  # the heading is a title
    assert json.loads(ok(db, "--json", "diff", KB, aid, "--file", docs / "refunds.md"))["to"] \
        == str(docs / "refunds.md")
    assert "cannot read" in fails(db, "diff", KB, aid, "--file", docs / "missing.md")


def test_kb_edit_file_parses_markdown_as_import_does_and_raw_keeps_it(db, docs, tmp_path):
    ok(db, "import", KB, docs)
    with KBStore(str(db)) as store:
        aid = source_ids(store)["refunds.md"]
    edited = write(tmp_path, "edited.md", "# Refund rules\n\nRefunds take a day.\n")
    version = json.loads(ok(db, "--json", "read", KB, aid))["updated_at"]
    ok(db, "edit", KB, aid, "--expected-version", version, "--file", edited)
    article = json.loads(ok(db, "--json", "read", KB, aid))
    assert (article["title"], article["content"]) == ("Refund rules", "Refunds take a day.")
    ok(db, "edit", KB, aid, "--expected-version", article["updated_at"], "--file", edited,
       "--raw")
    article = json.loads(ok(db, "--json", "read", KB, aid))
    assert article["content"].startswith("# Refund rules\n")
    assert article["title"] == "Refund rules"


# -- 9. completion for fish -------------------------------------------------------------------


def test_fish_completion_offers_the_commands_and_options(tmp_path):
    import shutil
    import subprocess
    script = ok(None, "completion", "fish")
    assert script.startswith("# fish completion for kb")
    assert "'__fish_seen_subcommand_from dump'" in script
    assert "-l format -xa 'table json csv tsv'" in script
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed: the script's text is checked, not run")
    path = tmp_path / "kb.fish"
    path.write_text(script, encoding="utf-8")
    assert subprocess.run(["fish", "-n", str(path)], capture_output=True).returncode == 0

    def complete(line):
        done = subprocess.run(["fish", "--no-config", "-c", "source %s; complete -C %s"
                               % (path, "'%s'" % line)], capture_output=True, text=True,
                              timeout=60)
        return {row.split("\t")[0] for row in done.stdout.splitlines()}
    assert {"dump", "diff"} <= complete("kb d")
    assert {"--front-matter", "--edited"} <= complete("kb export KB F --")
    assert complete("kb list KB --format ") == {"table", "json", "csv", "tsv"}
