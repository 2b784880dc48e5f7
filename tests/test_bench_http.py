"""The HTTP benchmarks and stress scripts stay runnable: each on a small load, exiting 0 with its
figures printed (their full runs are in docs/performance.md and docs/server.md)."""

import importlib.util
import subprocess
import sys

import pytest

from support.commands import ROOT, child_env

# Each starts servers and runs clients for seconds.
pytestmark = pytest.mark.slow


def bench(script, *args, timeout=300):
    return subprocess.run([sys.executable, str(ROOT / "bench" / script)] + list(args),
                          capture_output=True, text=True, timeout=timeout, cwd=str(ROOT),
                          env=child_env())


def test_the_load_benchmark_runs_the_new_server_and_the_sdk_twin():
    targets = "new,sdk" if importlib.util.find_spec("mcp") else "new"
    done = bench("http_load.py", "--targets", targets, "--workers", "1,2", "--clients", "2",
                 "--calls", "10", "--rounds", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| new | 2 | sqlite | 2 x 10 |" in done.stdout
    assert "median" in done.stdout and ("| sdk | 1 |" in done.stdout or targets == "new")


@pytest.mark.py39  # the guarded server on Python 3.9's uvicorn too
def test_slowloris_serves_a_client_while_sockets_trickle():
    done = bench("slowloris.py", "--attackers", "30", "--seconds", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "under attack:" in done.stdout and "PASS" in done.stdout


@pytest.mark.py39  # the guarded server on Python 3.9's uvicorn too
def test_head_memory_refuses_huge_heads_and_bounds_endless_ones():
    done = bench("head_memory.py", "--connections", "4", "--hold-seconds", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "answered {'431': 4}" in done.stdout and "PASS" in done.stdout
