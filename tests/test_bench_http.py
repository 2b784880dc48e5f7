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


def test_the_summary_pairs_each_round_with_the_same_round_of_the_other_target(monkeypatch):
    # Drift between rounds moves the medians' ratio; the paired one compares each round's
    # figures with the same round's. Here the old server's last round ran on a slower machine.
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    http_load = importlib.import_module("http_load")

    def run(target, cpu):
        return {"target": target, "workers": 1, "engine": "sqlite", "clients": 1,
                "calls_per_s": 1.0 / cpu, "server_cpu_ms_per_call": cpu, "round_trips": None}
    results = [run(target, cpu) for new, old in ((1.0, 1.1), (3.0, 3.3), (1.2, 2.0))
               for target, cpu in (("new", new), ("old", old))]
    summary = http_load.summarize(results).splitlines()
    new = next(line for line in summary if line.startswith("new,"))
    assert "server CPU ms/call median 1.2 (1-3) (0.60x old [paired 0.91x, 0.60-0.91])" in new
    assert http_load.paired([results[0]], [results[1]], lambda r: None) is None
