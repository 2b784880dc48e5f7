"""Wall time of the simulation's default run, ``python sim.py --seeds 1-5``, beside the article's.

Each run is a fresh interpreter, as a person types it: start-up, imports, the worker pool and
the printed tables are all inside the time.
"""

import subprocess
import sys
import time

import common

ARTICLE_SECONDS = 25.7  # the article's whole run: five seeds, Python 3.9.6 on an Apple M1
TARGET_SECONDS = 3.0
DEFAULT_ARGS = ("--seeds", "1-5")


def run(repeats=5, sim_args=DEFAULT_ARGS):
    """Run sim.py ``repeats`` times; returns the wall times and their median."""
    if repeats < 1:
        raise ValueError("sim repeats must be at least 1, got %d" % repeats)
    command = [sys.executable, str(common.ROOT / "sim.py")] + list(sim_args)
    load_start = common.load()
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              cwd=str(common.ROOT))
        seconds.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise RuntimeError("%s exited %d: %s" % (" ".join(command[1:]), done.returncode,
                                                     done.stderr.decode("utf-8", "replace")))
    return {"command": "python sim.py " + " ".join(sim_args),
            "default": tuple(sim_args) == DEFAULT_ARGS,
            "seconds": [round(s, 3) for s in seconds],
            "median_s": round(common.median(seconds), 3),
            "load": [load_start, common.load()]}


def render(result):
    """The timing as a Markdown table beside the article's figure."""
    median = result["median_s"]
    rows = [[result["command"], len(result["seconds"]), "%.2f s" % median,
             "%.2f-%.2f s" % (min(result["seconds"]), max(result["seconds"])),
             "%.1f s" % ARTICLE_SECONDS,
             "%.1fx" % (ARTICLE_SECONDS / median) if result["default"] else "-",
             # The target is for the default run only; a smaller day says nothing about it.
             "%.0f s: %s" % (TARGET_SECONDS, "met" if median <= TARGET_SECONDS else "missed")
             if result["default"] else "-"]]
    return common.table(["command", "runs", "median wall time", "range", "article (M1)",
                         "article / ours", "target"], rows)
