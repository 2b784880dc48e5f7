"""bench/web_pages.py and bench/web_mcp_load.py stay runnable: a tiny store prints every
page's row (every round's), and a bad argument is refused before anything is built."""

import json
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


@pytest.mark.parametrize("script,args,needle", [
    ("web_pages", ["--articles", "0"], "argument --articles: must be at least 1"),
    ("web_pages", ["--articles", "5", "--edited", "6"],
     "argument --edited: must be at most --articles"),
    ("web_mcp_load", ["--browsers", "0"], "argument --browsers: must be at least 1"),
    ("web_mcp_load", ["--think", "-1"], "argument --think: must be 0 or more"),
    ("web_mcp_load", ["--articles", "5", "--edited", "6"],
     "argument --edited: must be at most --articles"),
])
def test_the_web_benchmarks_refuse_bad_arguments(script, args, needle):
    done = subprocess.run([sys.executable, "bench/%s.py" % script] + args, cwd=str(ROOT),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and needle in done.stderr, done.stderr


@pytest.mark.slow
def test_web_mcp_load_prints_a_round_and_its_verdict():
    done = subprocess.run([sys.executable, "bench/web_mcp_load.py", "--articles", "60",
                           "--edited", "3", "--agents", "1", "--browsers", "2", "--seconds",
                           "1", "--rounds", "1", "--json"],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    [one] = result["rounds_data"]
    assert one["alone"]["calls"] > 0 and one["with"]["calls"] > 0
    assert one["with"]["page_loads_per_s"] > 0 and "page_loads_per_s" not in one["alone"]
    assert one["alone"]["errors"] == one["with"]["errors"] == 0
    assert result["ratio"] == round(one["with"]["mcp_p99_ms"] / one["alone"]["mcp_p99_ms"], 3)
