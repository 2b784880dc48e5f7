"""``kb merge``: an article and a Markdown file merged from their common base, on each engine;
conflicts marked in the file for a person, refused until resolved; the three-way merge itself;
and ``kb add``/``kb save --file`` reading Markdown as import does."""

import json
import os
import random

import pytest

from kbcite import KBStore
from kbcite.folders import Folders
from kbcite.threeway import conflict_left, merge, pending_path
from support.cli import run_kb
from support.files import write

KB = "docs"
GRANTED = frozenset({KB})
PAGE = "# Tar\n\nMake an archive.\n\nList an archive.\n\nExtract an archive.\n"


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request, tmp_path):
    """A store address for the command line on each engine."""
    if request.param == "sqlite":
        return str(tmp_path / "kb.sqlite3")
    return request.getfixturevalue("pg_url")


def kb(where, *args, status=0, stdin=""):
    """``kb --db WHERE ARGS``; asserts its exit status (and a clear message when it fails: one
    line, or an import's list of bad files under its line)."""
    code, out, err = run_kb(["--db", where] + [str(a) for a in args], stdin=stdin)
    assert code == status, (code, out, err)
    if status:
        assert err.startswith("kb: ") and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1 or args[0] == "import", err
    return out if not status else err


@pytest.fixture
def page(where, tmp_path):
    """A docs folder of one page imported into knowledge base ``docs``: ``(path, article)``."""
    folder = tmp_path / "docs"
    path = write(folder, "tar.md", PAGE)
    kb(where, "init", KB)
    kb(where, "import", KB, folder)
    with KBStore(where) as store:
        article = store.list_articles(KB)[0]["article_id"]
    return path, article


def agent_edit(where, article, old, new):
    """An agent's edit of the article: ``old`` replaced by ``new`` in its content."""
    with KBStore(where) as store:
        now = store.get_article(KB, article)
        store.call_tool("edit_knowledge_article", {
            "knowledge_base_id": KB, "article_id": article,
            "content": now["content"].replace(old, new), "expected_version": now["updated_at"],
            "idempotency_key": "agent-%s" % new}, granted=GRANTED, actor="bot")
        return store.get_article(KB, article)


def state(where):
    """Everything the store holds of the knowledge base (a dump)."""
    with KBStore(where) as store:
        return store.dump_knowledge_base(KB)


def current(where, article):
    with KBStore(where) as store:
        return store.get_article(KB, article)


# -- a clean merge -------------------------------------------------------------------------


def test_changes_that_do_not_overlap_are_merged_into_the_store_and_the_file(where, page):
    path, article = page
    agent_edit(where, article, "List an archive.", "List an archive with tar -t.")
    path.write_text(PAGE.replace("Make an archive.", "Make an archive with tar -c."))
    said = kb(where, "merge", KB, article, "--file", path, "--actor", "alice")
    assert "merged" in said and "updated" in said
    merged = current(where, article)
    assert merged["title"] == "Tar"
    assert merged["content"] == ("Make an archive with tar -c.\n\nList an archive with tar -t."
                                 "\n\nExtract an archive.")
    # The file holds it too, in its own form: the heading stays a heading.
    assert path.read_text() == "# Tar\n\n" + merged["content"] + "\n"
    with KBStore(where) as store:
        last = store.history(KB, article)[-1]
    assert (last["action"], last["actor"], last["summary"]) == ("edit", "alice", "merge of tar.md")
    # Both sides hold the merge: the import finds nothing to do, nor does export --edited.
    assert json.loads(kb(where, "--json", "import", KB, path.parent))["counts"]["unchanged"] == 1
    assert json.loads(kb(where, "--json", "export", KB, path.parent, "--edited"))["actions"] == []
    # Merging again changes nothing.
    before = state(where)
    assert "already" in kb(where, "merge", KB, article, "--file", path)
    assert state(where) == before


def test_a_merge_takes_a_title_changed_on_one_side(where, page):
    path, article = page
    path.write_text(PAGE.replace("# Tar", "# tar, the archiver"))
    kb(where, "merge", KB, article, "--file", path)
    assert current(where, article)["title"] == "tar, the archiver"


def test_dry_run_prints_the_merge_and_output_writes_it_elsewhere(where, page, tmp_path):
    path, article = page
    agent_edit(where, article, "List an archive.", "List it.")
    path.write_text(PAGE.replace("Make an archive.", "Make it."))
    before, file_before = state(where), path.read_text()
    shown = kb(where, "merge", KB, article, "--file", path, "--dry-run")
    assert shown == "# Tar\n\nMake it.\n\nList it.\n\nExtract an archive.\n"
    target = tmp_path / "merged.md"
    kb(where, "merge", KB, article, "--file", path, "--output", target)
    assert target.read_text() == shown
    assert "--yes" in kb(where, "merge", KB, article, "--file", path, "--output", target,
                         status=1)
    assert state(where) == before and path.read_text() == file_before


def test_an_exported_file_merges_from_the_version_its_front_matter_names(where, page, tmp_path):
    path, article = page
    out = tmp_path / "out"
    kb(where, "export", KB, out)
    exported = out / "tar.md"
    assert "version:" in exported.read_text()
    agent_edit(where, article, "Extract an archive.", "Extract it.")
    exported.write_text(exported.read_text().replace("Make an archive.", "Make it."))
    said = kb(where, "merge", KB, article, "--file", exported)
    assert "front matter" in said
    merged = current(where, article)
    assert "Make it." in merged["content"] and "Extract it." in merged["content"]
    # The file's front matter now names the merged version: the next merge starts there.
    assert '"%s"' % merged["updated_at"] in exported.read_text()


def test_an_article_with_no_import_needs_a_base(where, tmp_path):
    kb(where, "init", KB)
    article = kb(where, "add", KB, "--title", "Note", "--content", "One.\n\nTwo.").strip()
    version = current(where, article)["updated_at"]
    path = write(tmp_path, "note.md", "# Note\n\nOne, changed.\n\nTwo.\n")
    before = state(where)
    assert "--base" in kb(where, "merge", KB, article, "--file", path, status=1)
    assert "no version" in kb(where, "merge", KB, article, "--file", path, "--base",
                              "2020-01-01T00:00:00Z", status=1)
    assert "--base" in kb(where, "merge", KB, article, "--file", path, "--base", "yesterday",
                          status=1)
    assert state(where) == before
    kb(where, "merge", KB, article, "--file", path, "--base", version)
    assert current(where, article)["content"] == "One, changed.\n\nTwo."


# -- a conflict, resolved -------------------------------------------------------------------


def test_overlapping_changes_are_marked_in_the_file_and_nothing_is_written(where, page):
    path, article = page
    store_side = agent_edit(where, article, "List an archive.", "List with tar -t.")
    path.write_text(PAGE.replace("List an archive.", "List with tar --list."))
    before = state(where)
    said = kb(where, "merge", KB, article, "--file", path, status=3)
    assert "1 conflict(s)" in said and "kb merge %s %s --file %s again" % (KB, article, path) \
        in said and "nothing was written to the store" in said
    assert state(where) == before
    assert path.read_text() == (
        "# Tar\n\nMake an archive.\n\n<<<<<<< store %s\nList with tar -t.\n=======\n"
        "List with tar --list.\n>>>>>>> file %s\n\nExtract an archive.\n"
        % (store_side["updated_at"], path))
    # The markers are refused until resolved: by a merge, an import, an edit from the file.
    assert "line 5" in kb(where, "merge", KB, article, "--file", path, status=1)
    assert "still holds the conflict kb merge wrote" in kb(where, "import", KB, path.parent,
                                                           status=1)
    assert "still holds a merge conflict" in kb(
        where, "edit", KB, article, "--expected-version", store_side["updated_at"], "--file",
        path, status=1)
    assert state(where) == before


def test_rerunning_after_resolving_merges_from_the_conflicts_store_version(where, page):
    path, article = page
    agent_edit(where, article, "List an archive.", "List with tar -t.")
    path.write_text(PAGE.replace("List an archive.", "List with tar --list."))
    kb(where, "merge", KB, article, "--file", path, status=3)
    # Resolved by hand, while an agent changed another paragraph of the store's version.
    path.write_text(PAGE.replace("List an archive.", "List with tar -t (or --list)."))
    agent_edit(where, article, "Make an archive.", "Make one with tar -c.")
    said = kb(where, "merge", KB, article, "--file", path)
    assert "the conflict written into" in said
    merged = current(where, article)["content"]
    assert merged == ("Make one with tar -c.\n\nList with tar -t (or --list).\n\n"
                      "Extract an archive.")
    assert path.read_text() == "# Tar\n\n" + merged + "\n"
    assert not os.path.exists(pending_path(str(path)))
    assert json.loads(kb(where, "--json", "import", KB, path.parent))["counts"]["unchanged"] == 1


def test_a_title_changed_on_both_sides_is_marked_on_its_heading(where, page):
    path, article = page
    with KBStore(where) as store:
        store.save_article(KB, article, title="Tar (store)")
    path.write_text(PAGE.replace("# Tar", "# Tar (file)"))
    kb(where, "merge", KB, article, "--file", path, status=3)
    lines = path.read_text().splitlines()
    assert lines[:5] == ["<<<<<<< store %s" % current(where, article)["updated_at"],
                         "# Tar (store)", "=======", "# Tar (file)", ">>>>>>> file %s" % path]
    path.write_text(PAGE.replace("# Tar", "# Tar (both)"))
    kb(where, "merge", KB, article, "--file", path)
    assert current(where, article)["title"] == "Tar (both)"


def test_abort_puts_the_file_back_and_asks_before_losing_a_resolution(where, page):
    path, article = page
    agent_edit(where, article, "List an archive.", "List with tar -t.")
    mine = PAGE.replace("List an archive.", "List with tar --list.")
    path.write_text(mine)
    kb(where, "merge", KB, article, "--file", path, status=3)
    marked = path.read_text()
    path.write_text(marked.replace("=======", "=======\nhalf resolved"))
    assert "--yes" in kb(where, "merge", KB, article, "--file", path, "--abort", status=1)
    path.write_text(marked)
    assert "put" in kb(where, "merge", KB, article, "--file", path, "--abort")
    assert path.read_text() == mine
    assert "nothing to abort" in kb(where, "merge", KB, article, "--file", path, "--abort",
                                    status=1)


# -- stale: someone wrote meanwhile ---------------------------------------------------------


def test_a_write_between_the_merges_read_and_its_write_is_exit_3_and_writes_nothing(
        where, page, monkeypatch):
    path, article = page
    path.write_text(PAGE.replace("Make an archive.", "Make one."))
    file_before = path.read_text()
    real = Folders.merge_sides

    def then_someone_edits(self, *args, **kwargs):
        found = real(self, *args, **kwargs)
        agent_edit(where, article, "Extract an archive.", "Extract one.")
        return found

    monkeypatch.setattr(Folders, "merge_sides", then_someone_edits)
    said = kb(where, "merge", KB, article, "--file", path, status=3)
    assert "changed while the merge ran" in said and "run the same kb merge again" in said
    monkeypatch.undo()
    assert path.read_text() == file_before
    assert "Make an archive." in current(where, article)["content"]
    kb(where, "merge", KB, article, "--file", path)  # again: both changes now
    assert current(where, article)["content"] == "Make one.\n\nList an archive.\n\nExtract one."


def test_a_stale_expected_version_is_exit_3_with_the_error_as_json(where, page):
    path, article = page
    old = current(where, article)["updated_at"]
    agent_edit(where, article, "List an archive.", "List one.")
    path.write_text(PAGE.replace("Make an archive.", "Make one."))
    before = state(where)
    code, out, err = run_kb(["--db", where, "--json", "merge", KB, article, "--file",
                             str(path), "--expected-version", old])
    assert code == 3 and "--expected-version" in err
    assert json.loads(out)["error"]["code"] == "version_conflict"
    assert state(where) == before
    assert "not --expected-version" in kb(where, "merge", KB, article, "--file", path,
                                          "--expected-version", old, "--dry-run", status=3)
    # Nothing to write to the store: a stale --expected-version is still refused.
    kb(where, "merge", KB, article, "--file", path)
    assert "not --expected-version" in kb(where, "merge", KB, article, "--file", path,
                                          "--expected-version", old, status=3)


# -- the three-way merge itself -------------------------------------------------------------


BASE = "a\nb\nc\nd\ne"


@pytest.mark.parametrize("store, file, merged", [
    ("A\nb\nc\nd\ne", "a\nb\nc\nd\nE", "A\nb\nc\nd\nE"),  # far apart
    ("a\nB\nc\nd\ne", "a\nb\nC\nd\ne", "a\nB\nC\nd\ne"),  # adjacent lines
    ("a\nX\nc\nd\ne", "a\nX\nc\nd\ne", "a\nX\nc\nd\ne"),  # the same change on both sides
    ("a\nb\nc\nd\ne\nf", "z\na\nb\nc\nd\ne", "z\na\nb\nc\nd\ne\nf"),  # both ends added to
    ("a\nc\nd\ne", "a\nb\nc\nd\nE", "a\nc\nd\nE"),  # a line removed, another changed
])
def test_changes_apart_merge_cleanly(store, file, merged):
    result = merge(BASE, store, file, "store V", "file F")
    assert (result.text, result.conflicts) == (merged, 0)


@pytest.mark.parametrize("store, file", [
    ("a\nX\nc\nd\ne", "a\nY\nc\nd\ne"),  # one line, two ways
    ("a\nnew\nb\nc\nd\ne", "a\nother\nb\nc\nd\ne"),  # two insertions at one place
    ("a\nb and more\nc\nd\ne", "a\nc\nd\ne"),  # a line changed and removed
])
def test_changes_that_overlap_are_marked(store, file):
    result = merge(BASE, store, file, "store V", "file F")
    assert result.conflicts == 1
    lines = result.text.split("\n")
    assert lines[1] == "<<<<<<< store V" and "=======" in lines and ">>>>>>> file F" in lines
    assert conflict_left(result.text) == (2, "<<<<<<< store V")


def test_a_merge_with_one_side_unchanged_is_the_other_side_for_random_texts():
    rng = random.Random(7)
    for _ in range(200):
        base = "\n".join(rng.choice("abcde") for _ in range(rng.randint(0, 12)))
        other = "\n".join(rng.choice("abcdex") for _ in range(rng.randint(0, 12)))
        assert merge(base, base, other, "s", "f").text == other
        assert merge(base, other, base, "s", "f").text == other
        assert merge(base, other, other, "s", "f").text == other


def test_two_hundred_scattered_changes_a_side_still_merge_line_by_line():
    rng = random.Random(3)
    lines = ["line %d of a long page" % i for i in range(16000)]
    store_lines, file_lines = list(lines), list(lines)
    mine = set(rng.sample(range(16000), 200))
    for i in mine:
        store_lines[i] += " (store)"
    for i in set(rng.sample(range(16000), 200)) - mine:
        file_lines[i] += " (file)"
    result = merge("\n".join(lines), "\n".join(store_lines), "\n".join(file_lines), "s", "f")
    assert result.conflicts == 0
    assert result.text == "\n".join(
        s if s != line else f for s, f, line in zip(store_lines, file_lines, lines))


def test_a_merge_is_bounded_and_exact_past_the_diffs_budget():
    base = "\n".join("line %d" % i for i in range(20000))
    # Every other line changed on one side, the others on the other: far past the budget.
    store = "\n".join("store %d" % i if i % 2 else "line %d" % i for i in range(20000))
    file = "\n".join("file %d" % i if i % 2 == 0 else "line %d" % i for i in range(20000))
    result = merge(base, store, file, "store V", "file F")
    assert result.conflicts >= 1  # coarser, never wrong: both sides are kept whole
    assert "store 19999" in result.text and "file 0" in result.text


def test_conflict_markers_are_found_outside_code_and_ours_inside_it():
    git = "<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> branch\n"
    assert conflict_left("Intro.\n\n" + git) == (3, "<<<<<<< HEAD")
    assert conflict_left("How git shows it:\n\n```\n" + git + "```\n") is None
    assert conflict_left("    <<<<<<< HEAD\n    =======\n    >>>>>>> b\n") is None
    ours = "```\n<<<<<<< store V\nx\n=======\ny\n>>>>>>> file F\n```\n"
    assert conflict_left(ours) is None  # a page showing kb merge's markers, as docs/cli.md does
    assert conflict_left(ours, everywhere=True) == (2, "<<<<<<< store V")
    assert conflict_left("<<<<<<< not closed\n=======\n") is None


def test_a_page_that_shows_git_markers_in_code_is_imported(where, tmp_path):
    kb(where, "init", KB)
    folder = tmp_path / "docs"
    write(folder, "git.md", "# Conflicts\n\n```\n<<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n```\n")
    assert json.loads(kb(where, "--json", "import", KB, folder))["counts"]["create"] == 1


# -- kb add and kb save read Markdown as import does ------------------------------------------


def test_add_and_save_file_read_markdown_as_import_and_raw_keeps_it(where, tmp_path):
    kb(where, "init", KB)
    page = write(tmp_path, "tar.md", "---\ntitle: Tar archives\n---\n\n# Not the title\n\nMake.\n")
    article = kb(where, "add", KB, "--file", page).strip()
    added = current(where, article)
    assert (added["title"], added["content"]) == ("Tar archives", "# Not the title\n\nMake.")
    named = kb(where, "add", KB, "--file", write(tmp_path, "plain-name.md", "Just text.\n"))
    assert current(where, named.strip())["title"] == "plain-name"  # the file's name, as import
    piped = kb(where, "add", KB, "--file", "-", stdin="# From a pipe\n\nPiped.\n").strip()
    assert current(where, piped)["title"] == "From a pipe"
    assert "--title" in kb(where, "add", KB, "--file", "-", stdin="no heading\n", status=1)
    code, _, err = run_kb(["--db", where, "add", KB, "--content", "x"])
    assert code == 2 and err.startswith("usage: kb add") and "--title" in err
    kb(where, "save", KB, article, "--file", write(tmp_path, "v2.md", "# Tar\n\nMake more.\n"))
    saved = current(where, article)
    assert (saved["title"], saved["content"]) == ("Tar", "Make more.")
    kb(where, "save", KB, article, "--file", tmp_path / "v2.md", "--raw")
    saved = current(where, article)
    assert (saved["title"], saved["content"]) == ("Tar", "# Tar\n\nMake more.\n")
    raw = kb(where, "add", KB, "--title", "Raw", "--file", page, "--raw").strip()
    assert current(where, raw)["content"] == page.read_text()
    before = state(where)
    assert "no content" in kb(where, "save", KB, article, "--file",
                              write(tmp_path, "empty.md", "# Only a title\n"), status=1)
    assert state(where) == before


def test_import_and_export_name_kb_merge_for_a_change_on_both_sides(where, page):
    path, article = page
    agent_edit(where, article, "List an archive.", "List one.")
    path.write_text(PAGE.replace("Make an archive.", "Make one."))
    said = kb(where, "import", KB, path.parent, status=3)
    assert "kb merge %s ARTICLE --file F" % KB in said
    code, out, err = run_kb(["--db", where, "export", KB, str(path.parent), "--edited"])
    assert code == 3 and "kb merge %s ARTICLE --file F" % KB in err
    assert "kb merge %s %s --file %s" % (KB, article, path) in out
    kb(where, "merge", KB, article, "--file", path)
    assert json.loads(kb(where, "--json", "import", KB, path.parent))["counts"]["unchanged"] == 1


def test_a_pruned_history_still_merges_from_the_imports_version(where, page):
    path, article = page
    agent_edit(where, article, "List an archive.", "List one.")
    agent_edit(where, article, "List one.", "List two.")
    kb(where, "history", "prune", KB, "--keep-days", "0", "--yes")
    path.write_text(PAGE.replace("Make an archive.", "Make one."))
    kb(where, "merge", KB, article, "--file", path)
    assert current(where, article)["content"] == "Make one.\n\nList two.\n\nExtract an archive."


def test_a_conflict_inside_a_code_block_is_refused_while_its_merge_waits(where, tmp_path):
    kb(where, "init", KB)
    folder = tmp_path / "docs"
    page = write(folder, "cmd.md", "# Cmd\n\n```\nrun one\n```\n\nDone.\n")
    kb(where, "import", KB, folder)
    with KBStore(where) as store:
        article = store.list_articles(KB)[0]["article_id"]
    agent_edit(where, article, "run one", "run two")
    page.write_text("# Cmd\n\n```\nrun three\n```\n\nDone.\n")
    kb(where, "merge", KB, article, "--file", page, status=3)
    assert "```\n<<<<<<< store" in page.read_text()  # the markers are inside the fence
    assert "still holds the conflict kb merge wrote" in kb(where, "merge", KB, article,
                                                           "--file", page, status=1)
    assert "still holds the conflict kb merge wrote" in kb(where, "import", KB, folder,
                                                           status=1)
    page.write_text("# Cmd\n\n```\nrun two or three\n```\n\nDone.\n")
    kb(where, "merge", KB, article, "--file", page)
    assert current(where, article)["content"] == "```\nrun two or three\n```\n\nDone."


def test_this_projects_cli_page_with_its_conflict_example_imports(where, tmp_path):
    kb(where, "init", KB)
    folder = tmp_path / "docs"
    folder.mkdir()
    docs = os.path.join(os.path.dirname(__file__), "..", "docs", "cli.md")
    with open(docs, encoding="utf-8") as fh:
        text = fh.read()
    assert "<<<<<<< store" in text
    write(folder, "cli.md", text)
    assert json.loads(kb(where, "--json", "import", KB, folder))["counts"]["create"] == 1


# -- an export moves the file's base ---------------------------------------------------------


def test_a_merge_after_an_export_never_brings_back_a_reverted_line(where, tmp_path):
    # The team's week, nobody touching the file: an agent's edit goes back to the file (the
    # team commits it), a person reverts it in the store, the next export and a merge follow.
    folder = tmp_path / "notes"
    path = write(folder, "r.md", "# Refunds\n\nRefunds take five days.\n")
    kb(where, "init", KB)
    kb(where, "import", KB, folder)
    with KBStore(where) as store:
        [row] = store.list_articles(KB)
        article, first = row["article_id"], row["updated_at"]
    bad = "Wire money to account 12345 for faster refunds."
    agent_edit(where, article, "Refunds take five days.", "Refunds take five days.\n\n" + bad)
    kb(where, "export", KB, folder, "--edited")
    assert bad in path.read_text()
    now = current(where, article)["updated_at"]
    kb(where, "revert", KB, article, "--to", first, "--expected-version", now)
    reverted = current(where, article)
    # The file's base is the version the export wrote: only the store changed since, so the
    # next export writes the revert over the file (it used to be a conflict, exit 3).
    out = json.loads(kb(where, "--json", "export", KB, folder, "--edited"))
    assert [a["action"] for a in out["actions"]] == ["write"]
    assert bad not in path.read_text()
    with KBStore(where) as store:
        versions = len(store.history(KB, article))
    merged = json.loads(kb(where, "--json", "merge", KB, article, "--file", path))
    assert (merged["base"], merged["base_from"]) == (reverted["updated_at"], "the import")
    assert merged["event"] is None and bad not in current(where, article)["content"]
    with KBStore(where) as store:
        assert len(store.history(KB, article)) == versions


def test_a_merge_of_the_file_the_export_wrote_keeps_the_revert(where, tmp_path):
    folder = tmp_path / "notes"
    path = write(folder, "r.md", "# Refunds\n\nRefunds take five days.\n")
    kb(where, "init", KB)
    kb(where, "import", KB, folder)
    with KBStore(where) as store:
        [row] = store.list_articles(KB)
        article, first = row["article_id"], row["updated_at"]
    bad = "Wire money to account 12345 for faster refunds."
    agent_edit(where, article, "Refunds take five days.", "Refunds take five days.\n\n" + bad)
    kb(where, "export", KB, folder, "--edited")  # the file holds the agent's line now
    exported = path.read_text()
    now = current(where, article)["updated_at"]
    kb(where, "revert", KB, article, "--to", first, "--expected-version", now)
    with KBStore(where) as store:
        versions = len(store.history(KB, article))
    # The file is exactly what the export wrote: the store removed the line since, the file
    # did not add it, so the merge takes the store's side.
    said = kb(where, "merge", KB, article, "--file", path)
    assert "the store already held it" in said, said
    assert bad not in current(where, article)["content"]
    assert bad not in path.read_text() and path.read_text() != exported
    with KBStore(where) as store:
        assert len(store.history(KB, article)) == versions  # no new version either


def test_export_then_edit_then_export_is_no_conflict(where, page):
    path, article = page
    agent_edit(where, article, "List an archive.", "List an archive with tar -t.")
    kb(where, "export", KB, path.parent, "--edited")
    agent_edit(where, article, "Make an archive.", "Make an archive with tar -c.")
    out = json.loads(kb(where, "--json", "export", KB, path.parent, "--edited"))
    assert [a["action"] for a in out["actions"]] == ["write"]
    assert "tar -c" in path.read_text() and "tar -t" in path.read_text()
    # Nothing edited since: nothing to export, and the import finds the file as it is.
    assert json.loads(kb(where, "--json", "export", KB, path.parent, "--edited"))[
        "actions"] == []
    assert json.loads(kb(where, "--json", "import", KB, path.parent))["counts"][
        "unchanged"] == 1


def test_export_edited_into_another_folder_needs_to_new_folder(where, page, tmp_path):
    path, article = page
    agent_edit(where, article, "List an archive.", "List one.")
    elsewhere = tmp_path / "elsewhere"
    said = kb(where, "export", KB, elsewhere, "--edited", status=2)
    assert str(elsewhere) in said and "--to-new-folder" in said and str(path.parent) in said
    assert not elsewhere.exists()
    kb(where, "export", KB, elsewhere, "--edited", "--to-new-folder")
    assert "List one." in (elsewhere / "tar.md").read_text()
    # That folder is not the import's: the file's base did not move.
    out = json.loads(kb(where, "--json", "export", KB, path.parent, "--edited"))
    assert [a["action"] for a in out["actions"]] == ["write"]
