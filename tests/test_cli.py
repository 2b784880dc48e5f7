"""The admin command line, ``python kb_store.py --db PATH COMMAND``, run as a real process."""

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kb_store import KBStore

SCRIPT = str(Path(__file__).resolve().parent.parent / "kb_store.py")
VERSION_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z\Z")
KB = "help"


def run(db, *args, ok=True):
    """Run the command line; returns (exit status, stdout, stderr)."""
    argv = [sys.executable, SCRIPT] + (["--db", str(db)] if db is not None else []) + [
        str(a) for a in args]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, encoding="utf-8", timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
    return proc.returncode, proc.stdout, proc.stderr


def out(db, *args):
    return run(db, *args)[1]


def fails(db, *args, status=1):
    """Run a command that must fail: non-zero status, a message on stderr, nothing on stdout."""
    code, stdout, stderr = run(db, *args, ok=False)
    assert code == status, (code, stdout, stderr)
    assert stdout == ""
    assert stderr.strip()
    return stderr


def events(db, *extra):
    return [line.split("\t") for line in out(db, "events", KB, *extra).splitlines()]


def listing(db):
    return [line.split("\t") for line in out(db, "list", KB).splitlines()]


@pytest.fixture
def db(tmp_path):
    """A database file with the knowledge base KB, made by ``init``."""
    path = tmp_path / "kb.db"
    assert out(path, "init", KB) == "created knowledge base %s\n" % KB
    assert path.exists()
    return path


def test_init_creates_and_refuses_a_duplicate(db):
    out(db, "init", "second", "--name", "Second KB")
    with KBStore(str(db)) as store:
        assert store.knowledge_base_exists(KB) and store.knowledge_base_exists("second")
    assert KB in fails(db, "init", KB)


def test_add_with_content_file_and_draft(db, tmp_path):
    text = "Line one\nहिंदी और 中文 🎉\n"
    source = tmp_path / "article.txt"
    source.write_text(text, encoding="utf-8")
    first = out(db, "add", KB, "--title", "From content", "--content", "Plain words").strip()
    second = out(db, "add", KB, "--title", "From file", "--file", source).strip()
    draft = out(db, "add", KB, "--title", "Not yet", "--content", "Hidden", "--draft").strip()
    assert len({first, second, draft}) == 3
    rows = listing(db)
    assert [(r[0], r[1], r[3]) for r in rows] == [
        (first, "published", "From content"), (second, "published", "From file"),
        (draft, "draft", "Not yet")]
    assert all(VERSION_RE.match(r[2]) for r in rows)
    with KBStore(str(db)) as store:
        assert store.get_article(KB, second)["content"] == text
        assert store.get_article(KB, first)["content"] == "Plain words"
    log = events(db)
    assert [(e[0], e[1], e[2]) for e in log] == [
        ("1", "article.published", first), ("2", "article.published", second)]
    assert [e[3] for e in log] == [rows[0][2], rows[1][2]]


def test_save_publish_unpublish_and_events_after(db, tmp_path):
    aid = out(db, "add", KB, "--title", "Doc", "--content", "v1").strip()
    saved = out(db, "save", KB, aid, "--content", "v2").strip()
    assert VERSION_RE.match(saved)
    retitled = out(db, "save", KB, aid, "--title", "Doc, renamed").strip()
    source = tmp_path / "v3.md"
    source.write_text("v3 from a file", encoding="utf-8")
    from_file = out(db, "save", KB, aid, "--file", source).strip()
    hidden = out(db, "unpublish", KB, aid).strip()
    assert listing(db)[0][1] == "draft"
    shown = out(db, "publish", KB, aid).strip()
    again = out(db, "publish", KB, aid).strip()  # already published: unchanged, no event
    assert again == shown
    versions = [saved, retitled, from_file, hidden, shown]
    assert versions == sorted(set(versions))
    log = events(db)
    assert [(e[1], e[3]) for e in log[1:]] == [
        ("article.updated", saved), ("article.updated", retitled),
        ("article.updated", from_file), ("article.unpublished", hidden),
        ("article.published", shown)]
    assert [e[0] for e in log] == [str(n) for n in range(1, 7)]
    assert events(db, "--after", "4") == log[4:]
    assert events(db, "--after", "6") == []
    with KBStore(str(db)) as store:
        article = store.get_article(KB, aid)
        assert (article["title"], article["content"]) == ("Doc, renamed", "v3 from a file")
    assert "6" in fails(db, "events", KB, "--after", "7")


def _write(directory, name, text):
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_import_titles_and_reimport_saves_only_changed_files(db, tmp_path):
    docs = tmp_path / "docs"
    _write(docs, "alpha.md", "Intro line\n# Alpha Title\n\nAlpha body.\n")
    _write(docs, "beta.md", "No heading here.\n## Not a title\n")
    _write(docs, "sub/gamma.md", "# Gamma\nGamma body.\n")
    _write(docs, "notes.txt", "# Not Markdown\n")
    assert out(db, "import", KB, docs) == "created 3, updated 0, unchanged 0\n"
    titles = {r[3]: r[0] for r in listing(db)}
    assert set(titles) == {"Alpha Title", "beta", "Gamma"}
    with KBStore(str(db)) as store:
        assert store.get_article(KB, titles["Alpha Title"])["content"] == (
            "Intro line\n\nAlpha body.")
        assert "No heading here." in store.get_article(KB, titles["beta"])["content"]
    head = len(events(db))
    assert head == 3

    assert out(db, "import", KB, docs) == "created 0, updated 0, unchanged 3\n"
    assert len(events(db)) == head

    _write(docs, "alpha.md", "# Alpha Title\n\nAlpha body, revised.\n")
    _write(docs, "delta.md", "# Delta\nNew one.\n")
    assert out(db, "import", KB, docs) == "created 1, updated 1, unchanged 2\n"
    log = events(db, "--after", str(head))
    titles = {r[3]: r[0] for r in listing(db)}
    assert [(e[1], e[2]) for e in log] == [
        ("article.updated", titles["Alpha Title"]), ("article.published", titles["Delta"])]
    with KBStore(str(db)) as store:
        assert store.get_article(KB, titles["Alpha Title"])["content"] == (
            "Alpha body, revised.")
        assert store.audit() == []


def test_commands_on_a_missing_database_fail_without_creating_it(tmp_path):
    path = tmp_path / "absent.db"
    for args in (("list", KB), ("add", KB, "--title", "T", "--content", "C"),
                 ("events", KB), ("publish", KB, "art-000001")):
        assert "no knowledge-base store" in fails(path, *args)
        assert not path.exists()


def test_unknown_article_and_knowledge_base_fail(db):
    for command in ("publish", "unpublish"):
        assert "art-000404" in fails(db, command, KB, "art-000404")
    assert "art-000404" in fails(db, "save", KB, "art-000404", "--content", "x")
    assert "nowhere" in fails(db, "list", "nowhere")
    assert "nowhere" in fails(db, "add", "nowhere", "--title", "T", "--content", "C")
    assert "nowhere" in fails(db, "events", "nowhere")
    assert listing(db) == [] and events(db) == []


def test_bad_values_fail_and_write_nothing(db, tmp_path):
    aid = out(db, "add", KB, "--title", "Doc", "--content", "v1").strip()
    before = (listing(db), events(db))
    fails(db, "save", KB, aid)  # nothing to save
    fails(db, "add", KB, "--title", "", "--content", "x")
    fails(db, "add", KB, "--title", "t" * 201, "--content", "x")
    fails(db, "add", KB, "--title", "T", "--content", "")
    fails(db, "add", KB, "--title", "T", "--file", tmp_path / "missing.md")
    fails(db, "import", KB, tmp_path / "no-such-dir")
    assert (listing(db), events(db)) == before


@pytest.mark.parametrize("args", [
    (),
    ("frobnicate", KB),
    ("add", KB, "--content", "no title"),
    ("add", KB, "--title", "no text"),
    ("add", KB, "--title", "T", "--content", "c", "--file", "f.md"),
    ("events", KB, "--after", "three"),
    ("save", KB),
    ("init",),
])
def test_bad_command_lines_are_usage_errors(db, args):
    before = (listing(db), events(db))
    assert "usage" in fails(db, *args, status=2)
    assert (listing(db), events(db)) == before


def test_db_option_is_required(tmp_path):
    assert "--db" in fails(None, "list", KB, status=2)


def test_a_foreign_database_is_refused(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(str(path))
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    assert "not a knowledge-base store" in fails(path, "list", KB)
    with open(str(tmp_path / "junk.db"), "wb") as fh:
        fh.write(b"junk" * 1000)
    assert fails(tmp_path / "junk.db", "list", KB)
    assert os.path.getsize(str(tmp_path / "junk.db")) == 4000
