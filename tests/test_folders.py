"""A knowledge base and a folder, day two: an import that forgives (every bad file named,
ignore rules, links, front matter), a guarded prune, an export that round-trips, deletion,
and a store this process may only read."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import kbcite
from kbcite import KBStore
from kbcite.folder_scan import read_folder
from kbcite.markdown import format_document, parse_document
from support.commands import ROOT
from support.files import write

KB = "kb-docs"
GRANTED = frozenset({KB})


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    write(folder, "refunds.md", "# Refund policy\n\nRefunds take five working days.\n")
    write(folder, "shipping.md", "# Shipping\n\nWe ship within two days.\n")
    write(folder, "guides/returns.md", "# Returns\n\nReturn within thirty days.\n")
    write(folder, "guides/billing.md", "# Billing\n\nInvoices monthly.\n")
    return folder


def articles(store):
    """``{source: (title, content, published)}`` of the imported articles."""
    return {a["source"]: (a["title"], store.get_article(KB, a["article_id"])["content"],
                          a["published"]) for a in store.list_articles(KB) if a["source"]}


# -- reading a folder ---------------------------------------------------------------------------


def test_every_bad_file_is_named_in_one_run_and_skip_bad_imports_the_rest(kb, docs):
    write(docs, "empty.md", "")
    write(docs, "deep/blank.md", "# Only a title\n")
    (docs / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    write(docs, "open.md", "---\ntitle: never closed\n\nbody\n")
    before = kb.list_articles(KB)
    for dry_run in (True, False):
        with pytest.raises(kbcite.InvalidArgument) as info:
            kb.folders.import_directory(KB, str(docs), dry_run=dry_run)
        message = info.value.message
        assert message.startswith("4 file(s) cannot be imported")
        for name in ("empty.md", "deep/blank.md", "latin1.md", "open.md"):
            assert str(docs / name) in message
        assert sorted(b["source"] for b in info.value.details["bad"]) == [
            "deep/blank.md", "empty.md", "latin1.md", "open.md"]
    assert kb.list_articles(KB) == before
    result = kb.folders.import_directory(KB, str(docs), skip_bad=True)
    assert result["counts"]["create"] == 4 and len(result["bad"]) == 4
    assert set(articles(kb)) == {"refunds.md", "shipping.md", "guides/returns.md",
                                 "guides/billing.md"}


def test_dot_folders_node_modules_and_kbignore_are_left_out(tmp_path):
    folder = tmp_path / "docs"
    for name in ("a.md", "B.MD", "c.markdown", ".hidden/secret.md", ".github/CONTRIBUTING.md",
                 ".obsidian/notes.md", "node_modules/pkg/README.md", "drafts/wip.md",
                 "drafts/keep.md", "notes.txt", "sub/.dotfile.md", "build/out.md",
                 "sub/build/deeper.md"):
        write(folder, name, "# %s\n\ntext\n" % name)
    write(folder, ".kbignore", "# drafts are not published\ndrafts/*\n!drafts/keep.md\nbuild/\n")
    found = read_folder(str(folder))
    assert [d.source for d in found.documents] == ["B.MD", "a.md", "c.markdown",
                                                   "drafts/keep.md"]
    assert [d.title for d in found.documents if d.source == "c.markdown"] == ["c.markdown"]
    left = {item["source"] for item in found.skipped}
    assert {".hidden/", ".github/", ".obsidian/", "node_modules/", "drafts/wip.md",
            "sub/.dotfile.md", "build/", "sub/build/"} <= left
    assert found.bad == []


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_links_are_followed_once_and_never_round_a_loop(tmp_path):
    folder = tmp_path / "docs"
    write(folder, "real/page.md", "# Page\n\ntext\n")
    os.symlink(str(folder / "real" / "page.md"), str(folder / "alias.md"))
    os.symlink(str(folder / "real"), str(folder / "linked"))
    os.symlink(str(folder), str(folder / "real" / "loop"))
    os.symlink(str(folder / "nowhere.md"), str(folder / "broken.md"))
    found = read_folder(str(folder))
    assert [d.source for d in found.documents] == ["alias.md"]  # first in sorted order
    reasons = {item["source"]: item["reason"] for item in found.skipped}
    assert reasons["linked/page.md"] == "the same file as alias.md"
    assert reasons["real/"] == "a link back into a folder already read"  # reached twice
    assert reasons["linked/loop/"] == "a link back into a folder already read"
    assert [b["source"] for b in found.bad] == ["broken.md"]


@pytest.mark.skipif(not hasattr(os, "link"), reason="needs hard links")
def test_a_hard_linked_file_is_imported_once(tmp_path):
    folder = tmp_path / "docs"
    write(folder, "a/page.md", "# Page\n\ntext\n")
    os.makedirs(str(folder / "b"))
    os.link(str(folder / "a" / "page.md"), str(folder / "b" / "page.md"))
    found = read_folder(str(folder))
    assert [d.source for d in found.documents] == ["a/page.md"]
    assert found.skipped == [{"source": "b/page.md", "reason": "the same file as a/page.md"}]


def test_front_matter_yaml_block_scalars_and_toml():
    assert parse_document("---\ntitle: >\n  Refund\n  policy\n---\nbody", "f")[0] == \
        "Refund policy"
    assert parse_document("---\ntitle: |\n  Refund\n  policy\n---\nbody", "f")[0] == \
        "Refund policy"
    assert parse_document("---\ntitle: >-\n  Folded, stripped\n---\n\nbody", "f")[:2] == (
        "Folded, stripped", "body")
    assert parse_document('+++\ntitle = "Refund \\"policy\\""\ndate = 2026-11-08\n+++\n'
                          'body', "f")[:2] == ('Refund "policy"', "body")
    assert parse_document("+++\ntitle = 'literal'\n+++\nbody", "f")[0] == "literal"
    with pytest.raises(ValueError, match=r"\+\+\+"):
        parse_document("+++\ntitle = 'x'\nbody", "f")
    meta = {"article_id": "art-000007", "version": "2026-11-08T09:00:00.000000Z",
            "source": "a/b.md", "published": False}
    text = format_document('Quote "me" — ünïcode', "Line one.\n\nLine two.", meta)
    title, body, got = parse_document(text, "f")
    assert (title, body) == ('Quote "me" — ünïcode', "Line one.\n\nLine two.")
    assert got == dict(meta, published="false")


# -- the guarded prune ------------------------------------------------------------------------


def test_a_prune_from_another_folder_or_of_most_articles_needs_yes(kb, docs, tmp_path):
    kb.folders.import_directory(KB, str(docs))
    wrong = tmp_path / "wrongfolder"
    write(wrong, "other.md", "# Other\n\ntext\n")
    before = articles(kb)
    for folder in (wrong, docs / "guides"):
        with pytest.raises(kbcite.InvalidArgument) as info:
            kb.folders.import_directory(KB, str(folder), prune=True)
        assert "last imported from %s" % docs in info.value.message
        assert "yes" in info.value.message
        plan = kb.folders.import_directory(KB, str(folder), prune=True, dry_run=True)
        assert plan["warnings"] and plan["counts"]["unpublish"] >= 2
    assert articles(kb) == before
    # From the same folder: one file gone of four is fine; three of four is not.
    (docs / "shipping.md").unlink()
    assert kb.folders.import_directory(KB, str(docs), prune=True)["counts"]["unpublish"] == 1
    for name in ("refunds.md", "guides/returns.md", "guides/billing.md"):
        (docs / name).unlink()
    write(docs, "new.md", "# New\n\ntext\n")
    with pytest.raises(kbcite.InvalidArgument, match="unpublish 3 of the 3"):
        kb.folders.import_directory(KB, str(docs), prune=True)
    done = kb.folders.import_directory(KB, str(docs), prune=True, yes=True)
    assert done["counts"]["unpublish"] == 3 and kb.audit() == []


# -- export and back ------------------------------------------------------------------------


def test_an_export_imports_back_as_the_same_knowledge_base(kb, store, docs, tmp_path):
    kb.folders.import_directory(KB, str(docs))
    kb.create_article(KB, "Made in the store", "Not from a file.")
    kb.create_article(KB, "A draft", "Not yet.", published=False)
    out = tmp_path / "export"
    result = kb.folders.export_directory(KB, str(out), include_drafts=True)
    assert result["counts"]["write"] == 6
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.md")) == [
        "art-000005.md", "art-000006.md", "guides/billing.md", "guides/returns.md",
        "refunds.md", "shipping.md"]
    assert not list(out.rglob("*.tmp"))
    # Into a new knowledge base: the same articles, drafts as drafts.
    store.create_knowledge_base("copy")
    store.folders.import_directory("copy", str(out))
    def state(kb_id):
        return sorted((a["title"], store.get_article(kb_id, a["article_id"])["content"],
                       a["published"]) for a in store.list_articles(kb_id))
    assert state("copy") == state(KB)
    # Back into the same one: every file is its article's; the two made in the store are
    # adopted by their files (and the draft stays a draft), then nothing changes.
    again = kb.folders.import_directory(KB, str(out))
    assert (again["counts"]["unchanged"], again["counts"]["adopt"],
            again["counts"]["create"]) == (4, 2, 0)
    assert state(KB) == state("copy") and kb.audit() == []
    assert kb.folders.import_directory(KB, str(out))["counts"]["unchanged"] == 6
    # The adopted articles' files gain their source; then an export writes nothing.
    again = kb.folders.export_directory(KB, str(out), include_drafts=True)["counts"]
    assert (again["write"], again["unchanged"]) == (2, 4)
    assert kb.folders.export_directory(KB, str(out), include_drafts=True)["counts"]["unchanged"] == 6


def test_a_moved_exported_file_keeps_its_article(kb, docs, tmp_path):
    kb.folders.import_directory(KB, str(docs))
    out = tmp_path / "export"
    kb.folders.export_directory(KB, str(out))
    assert kb.folders.import_directory(KB, str(out))["counts"]["unchanged"] == 4  # the folder is out
    refund = [a for a in kb.list_articles(KB) if a["source"] == "refunds.md"][0]
    os.makedirs(str(out / "policies"))
    shutil.move(str(out / "refunds.md"), str(out / "policies" / "refund-policy.md"))
    result = kb.folders.import_directory(KB, str(out), prune=True)
    [moved] = [a for a in result["actions"] if a["source"] == "policies/refund-policy.md"]
    assert (moved["action"], moved["article_id"]) == ("rename", refund["article_id"])
    assert result["counts"]["create"] == 0 and result["counts"]["unpublish"] == 0


COUNT_PAGE = ("# Count\n\nReturns the number of substrings in a string.\n\n"
              "It takes the substring first, then the string.\n\n"
              "An empty substring counts the places between characters.\n\n"
              "See also strings.Contains and strings.Index.\n")


def test_a_file_renamed_and_edited_keeps_its_article_as_git_pairs_it(kb, tmp_path):
    docs = tmp_path / "docs"
    write(docs, "Count.md", COUNT_PAGE)
    write(docs, "other.md", "# Other\n\nSomething else entirely, of its own.\n")
    kb.folders.import_directory(KB, str(docs))
    [count] = [a for a in kb.list_articles(KB) if a["source"] == "Count.md"]
    # git mv Count.md count-substrings.md, and a title tweak: git calls it a rename.
    (docs / "Count.md").unlink()
    write(docs, "count-substrings.md", COUNT_PAGE.replace("# Count", "# Count substrings"))
    plan = kb.folders.import_directory(KB, str(docs), dry_run=True)
    [moved] = [a for a in plan["actions"] if a["source"] == "count-substrings.md"]
    assert (moved["action"], moved["article_id"], moved["previous_source"]) == (
        "rename", count["article_id"], "Count.md")
    assert 50 <= moved["similarity"] < 100
    result = kb.folders.import_directory(KB, str(docs), prune=True)
    assert (result["counts"]["rename"], result["counts"]["create"],
            result["counts"]["unpublish"]) == (1, 0, 0)
    now = kb.get_article(KB, count["article_id"])
    assert (now["source"], now["title"]) == ("count-substrings.md", "Count substrings")
    assert kb.folders.import_directory(KB, str(docs))["counts"]["unchanged"] == 2


def test_a_file_replaced_by_another_text_is_a_new_article(kb, tmp_path):
    docs = tmp_path / "docs"
    write(docs, "Count.md", COUNT_PAGE)
    kb.folders.import_directory(KB, str(docs))
    (docs / "Count.md").unlink()
    write(docs, "index.md", "# Index\n\nReturns the first place of a substring.\n")
    result = kb.folders.import_directory(KB, str(docs))
    assert (result["counts"]["create"], result["counts"]["orphan"]) == (1, 1)


def test_the_command_line_says_how_similar_a_rename_is(tmp_path):
    from support.cli import run_kb
    docs = tmp_path / "docs"
    where = str(tmp_path / "kb.db")
    write(docs, "Count.md", COUNT_PAGE)
    assert run_kb(["--db", where, "init", KB])[0] == 0
    assert run_kb(["--db", where, "import", KB, str(docs)])[0] == 0
    (docs / "Count.md").unlink()
    write(docs, "count-substrings.md", COUNT_PAGE.replace("# Count", "# Count substrings"))
    status, out, err = run_kb(["--db", where, "import", KB, str(docs), "--dry-run"])
    assert status == 0, err
    assert "rename    count-substrings.md -> art-000001 (was Count.md, " in out
    assert "% similar)" in out


def test_an_agents_edit_goes_back_to_its_file_and_the_next_import_is_clean(kb, docs, clock):
    kb.folders.import_directory(KB, str(docs))
    refund = [a for a in kb.list_articles(KB) if a["source"] == "refunds.md"][0]
    current = kb.call_tool("read_knowledge_article", {"knowledge_base_id": KB,
                                                      "article_id": refund["article_id"]},
                           granted=GRANTED)
    clock.advance(minutes=1)
    kb.call_tool("edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": refund["article_id"],
        "content": current["content"] + "\n\nTen in December.",
        "expected_version": current["updated_at"], "idempotency_key": "agent"},
        granted=GRANTED, actor="bot")
    assert kb.folders.import_directory(KB, str(docs))["counts"]["conflict"] == 1
    written = kb.folders.export_directory(KB, str(docs), edited=True)
    assert [(a["path"], a["action"]) for a in written["actions"]] == [("refunds.md", "write")]
    assert "Ten in December." in (docs / "refunds.md").read_text(encoding="utf-8")
    clean = kb.folders.import_directory(KB, str(docs))
    assert clean["counts"]["conflict"] == 0 and clean["counts"]["update"] == 0
    assert kb.folders.import_directory(KB, str(docs))["counts"]["unchanged"] == 4


def test_an_export_never_overwrites_a_changed_file_unasked(kb, docs, tmp_path, clock):
    kb.folders.import_directory(KB, str(docs))
    ids = {a["source"]: a["article_id"] for a in kb.list_articles(KB)}
    out = tmp_path / "export"
    kb.folders.export_directory(KB, str(out))
    write(out, "shipping.md", "# Mine\n\nI changed this file.\n")
    clock.advance(minutes=1)
    kb.save_article(KB, ids["refunds.md"], content="Changed in the store.")
    with pytest.raises(kbcite.InvalidArgument) as info:
        kb.folders.export_directory(KB, str(out))
    assert "shipping.md" in info.value.message and "refunds.md" not in info.value.message
    assert (out / "shipping.md").read_text(encoding="utf-8").startswith("# Mine")
    assert "Changed in the store." not in (out / "refunds.md").read_text(encoding="utf-8")
    plan = kb.folders.export_directory(KB, str(out), dry_run=True)
    assert {a["path"]: a["action"] for a in plan["actions"]}["shipping.md"] == "exists"
    assert kb.folders.export_directory(KB, str(out), yes=True)["counts"]["write"] == 2
    # Over the imported folder, a file changed since its import, as its article was: kept.
    write(docs, "shipping.md", "# Shipping\n\nA person's local change.\n")
    current = kb.call_tool("read_knowledge_article", {"knowledge_base_id": KB,
                                                      "article_id": ids["shipping.md"]},
                           granted=GRANTED)
    clock.advance(minutes=1)
    kb.call_tool("edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": ids["shipping.md"], "content": "An agent's.",
        "expected_version": current["updated_at"], "idempotency_key": "a2"}, granted=GRANTED)
    result = kb.folders.export_directory(KB, str(docs), edited=True)
    assert {a["path"]: a["action"] for a in result["actions"]}["shipping.md"] == "conflict"
    assert "local change" in (docs / "shipping.md").read_text(encoding="utf-8")


# -- deletion -----------------------------------------------------------------------------------


def test_a_deleted_article_is_gone_for_good_and_its_citations_say_so(kb, clock):
    aid = kb.create_article(KB, "Secret", "Text to forget.")
    cited = kb.call_tool("read_knowledge_article", {"knowledge_base_id": KB, "article_id": aid},
                         granted=GRANTED)["citation"]
    clock.advance(minutes=1)
    kb.save_article(KB, aid, content="Second version to forget.")
    draft = kb.create_article(KB, "Draft", "Never seen.", published=False)
    head = kb.head_sequence(KB)
    event = kb.delete_article(KB, aid, actor="alice")
    assert event["type"] == "article.deleted" and event["sequence"] == head + 1
    assert kb.delete_article(KB, draft) is None and kb.head_sequence(KB) == head + 1
    with pytest.raises(kbcite.NotFound):
        kb.get_article(KB, aid)
    [result] = kb.call_tool("check_citations", {"knowledge_base_id": KB, "citations": [cited]},
                            granted=GRANTED)["results"]
    assert result["status"] == "gone"
    dumped = "\n".join(kb._db.dump())
    assert "Text to forget." not in dumped and "Second version to forget." not in dumped
    assert kb.audit() == []
    assert kb.create_article(KB, "Next", "x") == "art-000003"  # an ID is never reused


# -- a store this process may only read -------------------------------------------------------


def test_a_read_only_store_opens_for_reads_and_refuses_writes_plainly(tmp_path):
    shared = tempfile.mkdtemp(prefix="kb-ro-")
    try:
        path = os.path.join(shared, "store.db")
        with KBStore(path, create=True) as store:
            store.create_knowledge_base(KB)
            store.create_article(KB, "Readable", "Still readable.")
        os.chmod(path, 0o444)
        # As root every file is writable: the check runs as an ordinary user where it can.
        prefix = []
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            if not shutil.which("runuser"):
                pytest.skip("as root a read-only file is writable, and runuser is missing")
            code = os.path.join(shared, "code")
            shutil.copytree(str(ROOT / "kbcite"), os.path.join(code, "kbcite"))
            for folder, dirs, files in os.walk(shared):
                os.chmod(folder, 0o755)
                for name in files:
                    os.chmod(os.path.join(folder, name), 0o444 if name == "store.db" else 0o644)
            python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
            prefix = ["runuser", "-u", "nobody", "--", "env", "PYTHONPATH=" + code, python]
        else:
            prefix = ["env", "PYTHONPATH=" + str(ROOT), sys.executable]

        def kb(*args):
            return subprocess.run(prefix + ["-m", "kbcite", "--db", path] + list(args),
                                  capture_output=True, text=True, timeout=60)
        for args in (["kbs"], ["list", KB], ["search", KB, "readable"], ["audit"],
                     ["read", KB, "art-000001"]):
            done = kb(*args)
            assert done.returncode == 0, (args, done.stderr)
        done = kb("add", KB, "--title", "New", "--content", "x")
        assert done.returncode == 1
        # Run as root, the file is another user's: the message says whose, not only its mode.
        assert ("cannot be written: the file belongs to another user" if prefix[0] == "runuser"
                else "cannot be written: the file is read only") in done.stderr
        assert "retry" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
        done = kb("init", "another")
        assert done.returncode == 1 and "cannot be written" in done.stderr, done.stderr
    finally:
        shutil.rmtree(shared, ignore_errors=True)
