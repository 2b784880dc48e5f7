"""What the bad-input table (bench/bad_input.py) found, each mended: nothing replaces a device
or a pipe, an empty name is refused rather than taken as none, every refusal writes nothing
and says what is wrong in a person's words; and the table itself stays runnable."""

import hashlib
import json
import os
import sqlite3
import subprocess
import sys

import pytest

from kbcite import KBStore
from kbcite.exporter import write_atomically
from support.cli import run_kb
from support.commands import ROOT
from support.files import write

KB = "support"


def content_of(db):
    """A digest of every row of every table of the SQLite store (what 'nothing written'
    means), its virtual tables read through their shadow tables."""
    digest = hashlib.sha256()
    conn = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = "
                                      "'table' ORDER BY name").fetchall():
            digest.update(repr((name, sql)).encode())
            if not sql.upper().startswith("CREATE VIRTUAL"):
                for row in conn.execute('SELECT * FROM "%s" ORDER BY 1' % name):
                    digest.update(repr(row).encode())
    finally:
        conn.close()
    return digest.hexdigest()


@pytest.fixture
def db(tmp_path):
    """A store with knowledge base ``support``: one article imported, a token ``bot``."""
    path = str(tmp_path / "kb.sqlite3")
    docs = tmp_path / "docs"
    write(docs, "refunds.md", "# Refund policy\n\nRefunds take five working days.\n")
    for argv in (["init", KB], ["import", KB, str(docs)],
                 ["token", "create", "bot", "--grant", KB]):
        assert run_kb(["--db", path] + argv)[0] == 0
    return path


def refused(db, *argv, status=1, stdin=""):
    """Run ``kb --db DB ARGV``: it must fail with ``status``, one line (after argparse's usage
    lines), no traceback, and the store unchanged; returns that line."""
    before = content_of(db)
    code, _, err = run_kb(["--db", db] + [str(a) for a in argv], stdin=stdin)
    assert code == status, (code, err)
    lines = [line for line in err.splitlines() if line.strip()
             and not line.startswith(("usage: ", " "))]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert content_of(db) == before
    return lines[0]


def version(db):
    with KBStore(db) as store:
        return store.get_article(KB, "art-000001")["updated_at"]


# -- nothing replaces a device, a pipe or a link to one ---------------------------------------


def test_dump_yes_writes_to_a_device_and_never_replaces_it(db, tmp_path):
    link = tmp_path / "full"
    os.symlink("/dev/full", str(link))
    said = refused(db, "dump", KB, link, "--yes")
    assert "No space left on device" in said and "nothing was written" in said
    assert os.path.islink(str(link)) and os.readlink(str(link)) == "/dev/full"


def test_write_atomically_refuses_to_replace_a_pipe_and_writes_to_it_when_asked(tmp_path):
    pipe = str(tmp_path / "pipe")
    os.mkfifo(pipe)
    with pytest.raises(OSError) as info:
        write_atomically(pipe, "text")
    assert "no regular file" in str(info.value)
    reader = subprocess.Popen(["cat", pipe], stdout=subprocess.PIPE)
    write_atomically(pipe, "through the pipe\n", special=True)
    assert reader.communicate(timeout=10)[0] == b"through the pipe\n"
    assert not os.path.isfile(pipe)  # still the pipe


def test_merge_output_must_be_a_regular_file(db, tmp_path):
    said = refused(db, "merge", KB, "art-000001", "--file", tmp_path / "docs" / "refunds.md",
                   "--output", tmp_path / "docs", "--yes")
    assert "no regular file" in said


# -- an empty name is refused, never taken as no value or as the current folder ---------------


@pytest.mark.parametrize("argv", [
    ("export", KB, ""), ("import", KB, ""), ("dump", KB, ""), ("restore", ""),
    ("merge", KB, "art-000001", "--file", ""),
    ("edit", KB, "art-000001", "--expected-version", "2026-01-01T00:00:00Z", "--file", ""),
])
def test_an_empty_file_or_folder_name_is_a_usage_error(db, tmp_path, argv, monkeypatch):
    monkeypatch.chdir(str(tmp_path))

    def listed():  # the store's own files aside (a read leaves SQLite's -wal and -shm)
        return sorted(name for name in os.listdir(str(tmp_path))
                      if not name.startswith("kb.sqlite3"))

    before = listed()
    assert "an empty name" in refused(db, *argv, status=2)
    assert listed() == before


def test_merge_output_empty_writes_nothing(db, tmp_path):
    page = tmp_path / "docs" / "refunds.md"
    page.write_text("# Refund policy\n\nRefunds take six working days.\n")
    assert "an empty name" in refused(db, "merge", KB, "art-000001", "--file", page,
                                      "--output", "", status=2)
    assert "five" in json.loads(run_kb(["--db", db, "--json", "read", KB, "art-000001"])[1])[
        "content"]


def test_an_empty_db_is_refused_by_each_program(tmp_path):
    assert "an empty name" in run_kb(["--db", "", "list", KB])[2]
    for module, argv in (("kbcite.server", ["--db", "", "--grant", KB]),
                         ("kbcite.sim", ["--seeds", "1", "--json", ""]),
                         ("kbcite.sim", ["--seeds", "1", "--plots", ""])):
        done = subprocess.run([sys.executable, "-m", module] + argv, cwd=str(tmp_path),
                              capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert done.returncode == 2 and "an empty name" in done.stderr, done.stderr
        assert os.listdir(str(tmp_path)) == []


# -- refusals in a person's words, nothing written ---------------------------------------------


def test_an_empty_idempotency_key_is_refused_not_replaced_by_a_random_one(db):
    said = refused(db, "edit", KB, "art-000001", "--expected-version", version(db),
                   "--idempotency-key", "", "--content", "x")
    assert said == "kb: error: --idempotency-key must not be empty"
    assert refused(db, "edit", KB, "art-000001", "--expected-version", version(db),
                   "--content", "") == "kb: error: content must not be empty"


def test_token_link_refuses_what_is_no_servers_address(db):
    for url in ("notaurl", "ftp://host", "http://", "http://h:1/?x=1"):
        assert "is not the server's address" in refused(db, "token", "link", "bot", "--url",
                                                        url)


@pytest.mark.parametrize("argv", [
    ("save", KB, "art-999999", "--content", "x"), ("delete", KB, "art-999999", "--yes"),
    ("history", KB, "art-999999"), ("publish", KB, "bogus"),
])
def test_a_missing_article_on_the_peoples_side_is_not_called_unpublished(db, argv):
    said = refused(db, *argv)
    assert "there is no article" in said and "draft or published" in said
    assert "no published article" not in said


def test_a_dump_under_a_file_and_a_non_utf8_restore_say_what_is_wrong(db, tmp_path):
    page = tmp_path / "docs" / "refunds.md"
    assert "is not a folder" in refused(db, "dump", KB, page / "x.json")


def test_restore_reads_bytes_from_standard_input_by_their_position(db, tmp_path):
    code, _, err = subprocess_kb(db, ["restore", "-"], b"\xff\xfe{")
    assert code == 1 and "standard input (a kb dump) is not UTF-8 text (byte 0 is 0xff)" in err


def subprocess_kb(db, argv, stdin):
    done = subprocess.run([sys.executable, "-m", "kbcite", "--db", db] + argv, input=stdin,
                          capture_output=True, timeout=60, env=dict(os.environ,
                                                                     PYTHONPATH=str(ROOT)))
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def test_sim_db_dir_that_is_a_file_says_so(tmp_path):
    page = write(tmp_path, "page.md", "x")
    done = subprocess.run([sys.executable, "-m", "kbcite.sim", "--seeds", "1", "--db-dir",
                           str(page)], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 2 and "it is a file, not a folder" in done.stderr


def test_a_wrong_issuer_is_the_servers_only_line(db):
    pytest.importorskip("uvicorn")
    done = subprocess.run([sys.executable, "-m", "kbcite.server", "--db", db, "--http",
                           "127.0.0.1:0", "--oauth-issuer", "http://issuer.example"],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1, done.stderr
    assert lines[0].startswith("kb-server: error: argument --oauth-issuer")


# -- the table itself --------------------------------------------------------------------------


@pytest.mark.slow
def test_the_bad_input_table_runs_and_its_dump_cases_are_clear(tmp_path):
    out = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, "bench/bad_input.py", "--only", "dump", "--json",
                           str(out)], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    table = json.loads(out.read_text())
    assert table["summary"]["cases"] >= 5
    assert all(row["clear"] and row["unchanged"] for row in table["rows"])


def test_a_sqlite_address_with_four_slashes_names_the_absolute_path(db):
    code, out, err = run_kb(["--db", "sqlite:///" + db, "list", KB])  # sqlite:////tmp/...
    assert code == 0 and "art-000001" in out, err
    code, out, err = run_kb(["--db", "sqlite://" + db, "list", KB])  # the documented form
    assert code == 0 and "art-000001" in out, err
