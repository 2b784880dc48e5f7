"""What a folder or a stored path can do to an import or an export, and may not: an export
writes only inside its folder (a link ``sub -> ../outside`` is refused), with the mode a plain
``open`` gives or the replaced file's; a target that cannot be written is one error before any
file is; a source is checked where it is stored; ``.kbignore`` patterns match in linear time,
and a line that is no pattern is a bad line naming its file; an import reads at most a little
more than the limit of a file; a file name longer than a title gives a shortened title."""

import os
import stat
import subprocess
import time
import tracemalloc

import pytest

import kbcite
from kbcite import KBStore
from kbcite.limits import FILE_MAX_BYTES, SOURCE_COMPONENT_MAX, TITLE_MAX
from kbcite.markdown import read_utf8_file
from support.commands import child_env, module_argv
from support.files import write

KB = "kb-safe"
GRANTED = frozenset({KB})


def kb_command(db, *args):
    """``kb --db DB ARGS...`` as a process of its own; ``(status, stdout, stderr)``."""
    done = subprocess.run(module_argv("kbcite", "--db", db, *args), capture_output=True,
                          text=True, timeout=120, env=child_env())
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "kb.sqlite3"
    assert kb_command(path, "init", KB)[0] == 0
    return path


def files_below(folder):
    return sorted(os.path.relpath(os.path.join(top, name), str(folder))
                  for top, _, names in os.walk(str(folder)) for name in names)


# -- export: only inside the folder --------------------------------------------------------------


def test_an_export_through_a_folder_link_to_outside_is_refused_and_writes_nothing(db, tmp_path):
    docs = tmp_path / "docs"
    write(docs, "one.md", "# One\n\nFirst.\n")
    write(docs, "sub/four.md", "# Four\n\nFourth.\n")
    assert kb_command(db, "import", KB, docs)[0] == 0
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    os.symlink("../outside", str(out / "sub"))
    status, stdout, stderr = kb_command(db, "export", KB, out)
    assert status == 1, (stdout, stderr)
    assert "Traceback" not in stderr and "sub/four.md" in stderr and "outside" in stderr
    assert files_below(outside) == [] and files_below(out) == []


def test_exported_files_get_the_umask_mode_or_keep_the_mode_they_had(tmp_path, clock):
    with KBStore(":memory:", clock=clock, create=True) as store:
        store.create_knowledge_base(KB)
        store.create_article(KB, "One", "First.", source="one.md")
        store.create_article(KB, "Two", "Second.", source="two.md")
        out = tmp_path / "out"
        write(out, "two.md", "someone's own text\n").chmod(0o640)
        old = os.umask(0o022)
        try:
            store.folders.export_directory(KB, str(out), yes=True)
        finally:
            os.umask(old)
    assert stat.S_IMODE(os.stat(str(out / "one.md")).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(str(out / "two.md")).st_mode) == 0o640
    assert files_below(out) == ["one.md", "two.md"]


def test_an_export_into_a_folder_still_to_be_made_is_made(tmp_path, clock, monkeypatch):
    monkeypatch.chdir(str(tmp_path))
    with KBStore(":memory:", clock=clock, create=True) as store:
        store.create_knowledge_base(KB)
        store.create_article(KB, "Two", "Second.", source="deep/two.md")
        for target in ("exported/", "more/nested"):
            result = store.folders.export_directory(KB, target)
            assert result["counts"]["write"] == 1
            assert (tmp_path / target / "deep" / "two.md").is_file()


def exporting(tmp_path, clock, target):
    """The refusal of exporting two articles to ``target``, with what it left on disk."""
    with KBStore(":memory:", clock=clock, create=True) as store:
        store.create_knowledge_base(KB)
        store.create_article(KB, "One", "First.", source="one.md")
        store.create_article(KB, "Two", "Second.", source="deep/two.md")
        with pytest.raises(kbcite.InvalidArgument) as info:
            store.folders.export_directory(KB, str(target))
    return info.value


def test_an_export_into_a_file_or_a_device_is_one_clear_error(tmp_path, clock):
    write(tmp_path, "plain", "not a folder\n")
    assert "is not a folder" in exporting(tmp_path, clock, tmp_path / "plain").message
    assert (tmp_path / "plain").read_text() == "not a folder\n"
    if os.path.exists("/dev/full"):
        assert "is not a folder" in exporting(tmp_path, clock, "/dev/full").message


def test_a_file_where_a_folder_must_go_is_named_before_anything_is_written(tmp_path, clock):
    out = tmp_path / "out"
    write(out, "deep", "a file where the folder deep/ would go\n")
    error = exporting(tmp_path, clock, out)
    assert "deep/two.md" in error.message and "nothing was written" in error.message
    assert files_below(out) == ["deep"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a folder of mode 555")
def test_a_folder_without_write_permission_is_named_before_anything_is_written(tmp_path, clock):
    out = tmp_path / "out"
    (out / "deep").mkdir(parents=True)
    (out / "deep").chmod(0o555)
    try:
        error = exporting(tmp_path, clock, out)
    finally:
        (out / "deep").chmod(0o755)
    assert "permission denied" in error.message and files_below(out) == []


# -- sources are checked where they are stored ------------------------------------------------


@pytest.mark.parametrize("source", ["a\x00b.md", "../up.md", "sub/../../up.md", "/abs.md",
                                    "a//b.md", "x" * (SOURCE_COMPONENT_MAX + 1) + ".md",
                                    "a/" * 600 + "b.md"])
def test_a_source_an_export_could_not_write_is_refused_where_it_is_stored(store, source):
    store.create_knowledge_base(KB)
    with pytest.raises(kbcite.InvalidArgument) as info:
        store.create_article(KB, "T", "Body.", source=source)
    assert info.value.details["argument"] == "source"
    doc = kbcite.markdown.SourceDocument(source, "T", "Body.")
    with pytest.raises(kbcite.InvalidArgument):
        store.folders.sync_articles(KB, [doc])
    assert store.list_articles(KB) == []


# -- .kbignore ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_kbignore_pattern_built_to_backtrack_matches_in_linear_time(db, tmp_path):
    docs = tmp_path / "docs"
    name = "a" * 200 + ".md"
    write(docs, name, "# Long\n\nA long name.\n")
    write(docs, "b.md", "# B\n\nIgnored.\n")
    write(docs, ".kbignore", "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b\n")
    started = time.monotonic()
    status, stdout, stderr = kb_command(db, "--json", "import", KB, docs)
    # Generous: the backtracking matcher took over ten minutes on this folder.
    assert time.monotonic() - started < 60
    assert status == 0, stderr
    assert "skipped   b.md" not in stdout and '"b.md"' in stdout


@pytest.mark.parametrize("line", ["[]x", "[z-a]", "[!]"])
def test_a_kbignore_line_that_is_no_pattern_is_a_bad_line_naming_its_file(db, tmp_path, line):
    docs = tmp_path / "docs"
    write(docs, "one.md", "# One\n\nFirst.\n")
    write(docs, "sub/two.md", "# Two\n\nSecond.\n")
    write(docs, "sub/.kbignore", "# fine\ndrafts/\n%s\n" % line)
    status, stdout, stderr = kb_command(db, "import", KB, docs)
    assert status == 1 and "Traceback" not in stderr
    assert "sub/.kbignore" in stderr and "line 3" in stderr
    status, stdout, stderr = kb_command(db, "import", "--skip-bad", KB, docs)
    assert status == 0 and "Traceback" not in stderr, stderr
    assert "sub/.kbignore" in stdout and "line 3" in stdout


# -- import: reads at most a little past the limit ------------------------------------------


def test_a_file_past_the_limit_is_refused_without_being_read_whole(tmp_path):
    big = tmp_path / "big.md"
    with open(str(big), "wb") as fh:
        fh.truncate(200 * 1024 * 1024)  # sparse: 200 MB that take no disk
    tracemalloc.start()
    try:
        with pytest.raises(kbcite.InvalidArgument) as info:
            read_utf8_file(str(big), "big.md", "directory")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "big.md" in info.value.message and str(FILE_MAX_BYTES) in info.value.message
    assert peak < 2 * FILE_MAX_BYTES


def test_a_file_name_longer_than_a_title_gives_a_shortened_title(tmp_path, clock):
    docs = tmp_path / "docs"
    stem = "n" * 240
    write(docs, stem + ".md", "Only a body, no heading.\n")
    with KBStore(":memory:", clock=clock, create=True) as store:
        store.create_knowledge_base(KB)
        result = store.folders.import_directory(KB, str(docs))
        assert result["bad"] == []
        title = store.list_articles(KB)[0]["title"]
    assert len(title) == TITLE_MAX and stem.startswith(title[:-1]) and title.endswith("\u2026")
