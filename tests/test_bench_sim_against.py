"""bench/sim_against.py stays runnable: against this checkout's own commit, on a small day, it
prints its table and leaves no worktree behind."""

import subprocess
import sys

import pytest

from support.commands import ROOT, git


@pytest.mark.slow
def test_sim_against_prints_both_comparisons(tmp_path):
    if git("rev-parse", "HEAD").returncode != 0:
        pytest.skip("not a git checkout: nothing to compare against")
    before = git("worktree", "list").stdout
    done = subprocess.run(
        [sys.executable, "bench/sim_against.py", "--against", "HEAD", "--repeats", "1",
         "--sim-args", "--seeds 1 --articles 40 --questions 12 --saves 30 --hours 2",
         "--json", str(tmp_path / "out.json")],
        cwd=str(ROOT), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "| python sim.py --seeds 1 --articles 40" in done.stdout
    assert "| the same with --plots DIR |" in done.stdout
    assert (tmp_path / "out.json").exists()
    assert git("worktree", "list").stdout == before
