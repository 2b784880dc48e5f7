"""bench/web_pages.py stays runnable: a tiny store prints every page's row, and a bad argument
is refused before anything is built."""

import subprocess
import sys

import pytest

from support.commands import ROOT

pytest.importorskip("jinja2")
pytest.importorskip("uvicorn")


@pytest.mark.slow
def test_web_pages_prints_every_page_row():
    done = subprocess.run([sys.executable, "bench/web_pages.py", "--articles", "200",
                           "--edited", "10", "--requests", "5", "--repeats", "1"],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split(" | ")[0] for line in done.stdout.splitlines() if line.startswith("| ")]
    assert rows[1:] == ["| list", "| article", "| history", "| diff", "| search page", "| search tool"]
    assert "Search page / search tool, p50:" in done.stdout


@pytest.mark.parametrize("args,needle", [
    (["--articles", "0"], "argument --articles: must be at least 1"),
    (["--articles", "5", "--edited", "6"], "argument --edited: must be at most --articles"),
])
def test_web_pages_refuses_bad_arguments(args, needle):
    done = subprocess.run([sys.executable, "bench/web_pages.py"] + args, cwd=str(ROOT),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and needle in done.stderr, done.stderr
