"""bench/folders.py stays runnable: a small folder against this checkout's own commit prints
every step and leaves no worktree behind."""

import json
import subprocess
import sys

import pytest

from support.commands import ROOT, git


@pytest.mark.slow
def test_folders_prints_every_step_beside_the_older_commit(tmp_path):
    if git("rev-parse", "HEAD").returncode != 0:
        pytest.skip("not a git checkout: nothing to compare against")
    before = git("worktree", "list").stdout
    done = subprocess.run(
        [sys.executable, "bench/folders.py", "--files", "150", "--against", "HEAD",
         "--repeats", "1", "--json", str(tmp_path / "out.json")],
        cwd=str(ROOT), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for step in ("| import |", "| import unchanged |", "| export |", "| import of the export |"):
        assert step in done.stdout, done.stdout
    steps = json.loads((tmp_path / "out.json").read_text())["steps"]
    assert set(steps["against"]) == {"import", "import unchanged"}
    assert all(t["wall"] > 0 for t in steps["this"].values())
    assert git("worktree", "list").stdout == before


def test_folders_refuses_a_bad_count():
    done = subprocess.run([sys.executable, "bench/folders.py", "--files", "0"], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "argument --files: must be at least 1" in done.stderr
