"""bench/notify_latency.py stays runnable: a few saves on SQLite print every transport's row
within the bound, and a bad argument is refused before anything starts."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("uvicorn") is None, reason="needs the [http] extra")
def test_notify_latency_prints_every_transport():
    done = subprocess.run([sys.executable, "bench/notify_latency.py", "--edits", "3"],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| sqlite, ")]
    assert [row.split(" | ")[0] for row in rows] == [
        "| sqlite, stdio, resources/subscribe", "| sqlite, HTTP (1 worker(s)), session GET stream",
        "| sqlite, HTTP (1 worker(s)), subscriptions/listen"]
    assert all(row.split(" | ")[1] == "3" for row in rows)


@pytest.mark.parametrize("args,needle", [
    (["--edits", "0"], "argument --edits: must be at least 1"),
    (["--engines", "mysql"], "argument --engines"),
])
def test_notify_latency_refuses_bad_arguments(args, needle):
    done = subprocess.run([sys.executable, "bench/notify_latency.py"] + args, cwd=str(ROOT),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and needle in done.stderr, done.stderr
