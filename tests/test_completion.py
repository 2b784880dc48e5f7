"""Shell completion as gh's: ``kb completion SHELL --install`` writes the script where the shell
looks for it, and the scripts complete knowledge-base and article IDs from the store through
``kb __complete``, which takes no write lock and offers a bounded number."""

import os
import shutil
import subprocess
import sys

import pytest

import kbcite
from kbcite.cli.completing import CANDIDATES_MAX
from support.cli import run_kb
from support.commands import ROOT, child_env

BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"

# The variables that move the shells' completion folders: each test sets its own.
FOLDERS = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "BASH_COMPLETION_USER_DIR", "ZDOTDIR")


@pytest.fixture
def db(tmp_path):
    """A store with knowledge bases ``support`` (three articles, one a draft) and
    ``internal`` (named)."""
    path = tmp_path / "kb.sqlite3"
    with kbcite.KBStore(str(path), create=True) as store:
        store.create_knowledge_base("support", name="Support desk")
        store.create_knowledge_base("internal", name="Internal\tnotes")
        for title in ("Reset a password", "Refunds"):
            store.create_article("support", title, "Text.")
        store.create_article("support", "A draft", "Text.", published=False)
    return path


def complete(db, *words, env=None):
    """The lines ``kb __complete WORDS`` prints (``--db`` from $KB_DB)."""
    status, out, err = run_kb(["__complete"] + list(words), env=dict({"KB_DB": str(db)},
                                                                       **(env or {})))
    assert status == 0 and err == ""
    return out.splitlines()


def home_env(tmp_path):
    """An environment whose home is the test's, the folder variables unset."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return dict({name: "" for name in FOLDERS}, HOME=str(home))


@pytest.fixture
def kb_on_path(tmp_path):
    """An environment for a shell with ``kb`` (this checkout) on its PATH."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "kb").write_text('#!/bin/sh\nexec "%s" -m kbcite "$@"\n' % sys.executable)
    (folder / "kb").chmod(0o755)
    env = child_env(home_env(tmp_path))
    env["PATH"] = os.pathsep.join([str(folder), env.get("PATH", "")])
    for name in FOLDERS:
        env.pop(name, None)
    return env


# -- kb __complete --------------------------------------------------------------------------------


def test_ids_are_completed_from_the_store_where_the_line_wants_one(db):
    assert complete(db, "read", "") == ["internal\tInternal notes", "support\tSupport desk"]
    assert complete(db, "read", "su") == ["support\tSupport desk"]
    assert complete(db, "read", "support", "") == [
        "art-000001\tReset a password", "art-000002\tRefunds", "art-000003\tA draft"]
    assert complete(db, "edit", "support", "art-000002") == ["art-000002\tRefunds"]
    assert complete(db, "token", "create", "bot", "--grant", "i") == ["internal\tInternal notes"]
    assert complete(db, "grant", "add", "--subject", "a@example.com", "--kb", "") == [
        "internal\tInternal notes", "support\tSupport desk"]
    assert complete(db, "review", "show", "support", "") == []  # a proposal number, not an ID
    assert complete(db, "search", "support", "--limit", "") == []
    assert complete(db, "read", "support", "art-000001", "") == []  # every argument given
    assert complete(db, "read", "--") == []  # options are the script's own
    assert complete(db, "") == []  # a command, also the script's own


def test_the_store_is_the_lines_db_as_bash_splits_it(db, tmp_path):
    other = tmp_path / "other.sqlite3"
    with kbcite.KBStore(str(other), create=True) as store:
        store.create_knowledge_base("elsewhere")
    assert complete(db, "--db", str(other), "read", "") == ["elsewhere"]
    assert complete(db, "read", "--db", "=", str(other), "") == ["elsewhere"]
    assert complete(db, "read", "--db=%s" % other, "") == ["elsewhere"]


def test_a_missing_store_or_another_file_offers_nothing_and_says_nothing(db, tmp_path):
    (tmp_path / "notes.txt").write_text("not a store")
    for path in (tmp_path / "missing.sqlite3", tmp_path / "notes.txt", tmp_path):
        assert complete(path, "read", "") == []
    assert not (tmp_path / "missing.sqlite3").exists()
    status, out, err = run_kb(["__complete", "read", ""])
    assert (status, out, err) == (0, "", "")


def test_completion_takes_no_write_lock_and_offers_a_bounded_number(db, hold_write_lock):
    with kbcite.KBStore(str(db)) as store:
        for i in range(CANDIDATES_MAX + 20):
            store.create_article("support", "Page %d" % i, "Text.")
    with hold_write_lock(str(db)):
        lines = complete(db, "read", "support", "art-")
    assert len(lines) == CANDIDATES_MAX
    assert lines[0] == "art-000001\tReset a password" and lines[-1].startswith("art-000100\t")


# -- the scripts, in the shells ------------------------------------------------------------------


BASH_PROBE = """
source "$1"
complete -p kb
probe() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _kb;
          echo "${COMPREPLY[*]}"; }
probe kb read ''
probe kb read support art-00000
probe kb --db "$2" read in
probe kb token create bot --grant s
probe kb list --format c
probe kb ex
"""


@pytest.mark.slow
def test_bash_completes_commands_options_and_the_stores_ids(db, tmp_path, kb_on_path):
    status, script, _ = run_kb(["completion", "bash"])
    path = tmp_path / "kb.bash"
    path.write_text(script)
    env = dict(kb_on_path, KB_DB=str(db))
    done = subprocess.run(["bash", "-c", BASH_PROBE, "probe", str(path), str(db)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "complete -o default -F _kb kb", "internal support",
        "art-000001 art-000002 art-000003", "internal", "support", "csv", "export"]


@pytest.mark.slow
def test_fish_completes_the_stores_ids_with_their_titles(db, tmp_path, kb_on_path):
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed (Debian package fish; .ci/run installs it)")
    env = dict(kb_on_path, KB_DB=str(db), XDG_CONFIG_HOME=str(tmp_path / "config"))
    done = subprocess.run(["kb", "completion", "fish", "--install"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    done = subprocess.run(["fish", "-c", "complete -C 'kb read support '; "
                                         "complete -C 'kb token create bot --grant '"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["art-000001\tReset a password", "art-000002\tRefunds",
                         "art-000003\tA draft"], done.stdout
    assert lines[3:] == ["internal\tInternal notes", "support\tSupport desk"], done.stdout


# -- --install -----------------------------------------------------------------------------------


@pytest.mark.parametrize("shell, where", [
    ("bash", ".local/share/bash-completion/completions/kb"),
    ("zsh", ".zfunc/_kb"),
    ("fish", ".config/fish/completions/kb.fish"),
])
def test_install_writes_the_shells_own_place_and_never_overwrites_another_file(
        tmp_path, shell, where):
    env = home_env(tmp_path)
    path = tmp_path / "home" / where
    script = run_kb(["completion", shell])[1]
    status, out, err = run_kb(["completion", shell, "--install"], env=env)
    assert status == 0, err
    assert out.startswith("installed %s completion at %s; " % (shell, path))
    assert path.read_text() == script and oct(path.stat().st_mode & 0o777) == "0o644"
    assert run_kb(["completion", shell, "--install"], env=env)[1].startswith(
        "unchanged %s completion at %s" % (shell, path))
    path.write_text("# my own completion, by hand\n")
    status, out, err = run_kb(["completion", shell, "--install"], env=env)
    assert status == 1 and out == ""
    assert err.strip() == ("kb: error: %s holds another file; kb completion %s --install --yes "
                           "replaces it" % (path, shell))
    assert path.read_text() == "# my own completion, by hand\n"
    path.write_text(script.replace("kb", "kb ", 1))
    status, _, err = run_kb(["completion", shell, "--install"], env=env)
    assert status == 1 and "holds an earlier kb's completion script" in err
    status, out, _ = run_kb(["completion", shell, "--install", "--yes"], env=env)
    assert status == 0 and out.startswith("replaced %s completion at %s" % (shell, path))
    assert path.read_text() == script
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_install_follows_the_xdg_and_bash_completion_folders(tmp_path):
    env = dict(home_env(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    assert run_kb(["completion", "bash", "--install"], env=env)[0] == 0
    assert (tmp_path / "data/bash-completion/completions/kb").is_file()
    assert run_kb(["completion", "fish", "--install"], env=env)[0] == 0
    assert (tmp_path / "config/fish/completions/kb.fish").is_file()
    env["BASH_COMPLETION_USER_DIR"] = str(tmp_path / "mine")
    assert run_kb(["completion", "bash", "--install"], env=env)[0] == 0
    assert (tmp_path / "mine/completions/kb").is_file()


@pytest.mark.slow
def test_bash_completion_loads_the_installed_script_by_itself(db, tmp_path, kb_on_path):
    if not os.path.isfile(BASH_COMPLETION):
        pytest.skip("bash-completion is not installed (Debian package bash-completion; "
                    ".ci/run installs it)")
    done = subprocess.run(["kb", "completion", "bash", "--install"], capture_output=True,
                          text=True, env=kb_on_path, timeout=60)
    assert done.returncode == 0, done.stderr
    probe = ('source %s; __load_completion kb; complete -p kb; COMP_WORDS=(kb read ""); '
             'COMP_CWORD=2; _kb; echo "${COMPREPLY[*]}"' % BASH_COMPLETION)
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True,
                          env=dict(kb_on_path, KB_DB=str(db)), timeout=60, cwd=str(ROOT))
    assert done.stdout.splitlines() == ["complete -o default -F _kb kb", "internal support"], \
        done.stderr
