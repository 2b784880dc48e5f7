"""The article's run of this checkout beside an older commit's, and what drawing the figures adds.

    python bench/sim_against.py --against REV           # five runs of each, alternately
    python bench/sim_against.py --against REV --repeats 9 --json out.json
    python bench/sim_against.py --against REV --sim-args "--seeds 1 --hours 2"

Each run is a fresh ``python sim.py --seeds 1-5`` (start-up, the worker pool and the printed
tables included), started alternately from a ``git worktree`` of ``--against`` and from this
checkout, so a machine whose speed drifts moves both alike. CPU time is user plus system of the
run's whole process tree; the ratio is taken run pair by run pair, and its median reported.
Then the same alternation for this checkout with and without ``--plots DIR``: the figures'
cost is the median difference of CPU time.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import common
from history import worktree

try:
    import resource
except ImportError:  # Windows: no rusage for child processes
    resource = None

# The article's run, unless --sim-args names another.
ARGS = "--seeds 1-5"


def timed(command):
    """``(wall, cpu)`` seconds of one run of ``command``; it must exit 0."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(command), done.returncode,
                                                 done.stderr.decode("utf-8", "replace")[-2000:]))
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def alternate(a, b, repeats):
    """Run commands ``a`` and ``b`` in turn ``repeats`` times; their times and the ratios."""
    runs = {"a": [], "b": []}
    for _ in range(repeats):
        for label, command in (("b", b), ("a", a)):
            runs[label].append(timed(command))
    ratio = [ra[1] / rb[1] for ra, rb in zip(runs["a"], runs["b"])]
    out = {}
    for label in ("a", "b"):
        walls, cpus = zip(*runs[label])
        out[label] = {"wall_s": [round(w, 3) for w in walls], "cpu_s": [round(c, 3) for c in cpus],
                      "median_wall_s": round(common.median(walls), 3),
                      "median_cpu_s": round(common.median(cpus), 3)}
    out["cpu_ratio"] = round(common.median(ratio), 3)
    out["cpu_difference_s"] = round(common.median(
        [ra[1] - rb[1] for ra, rb in zip(runs["a"], runs["b"])]), 3)
    return out


def measure(against, repeats, sim_args=ARGS):
    """This checkout against ``against``, then with and without ``--plots``."""
    if resource is None:
        raise SystemExit("sim_against.py needs resource.getrusage (not on Windows)")
    root, remove = worktree(against)
    load_start = common.load()
    try:
        new = [sys.executable, str(common.ROOT / "sim.py")] + sim_args.split()
        old = [sys.executable, os.path.join(root, "sim.py")] + sim_args.split()
        versus = alternate(new, old, repeats)
    finally:
        remove()
    with tempfile.TemporaryDirectory(prefix="kb-bench-plots-") as folder:
        plots = alternate(new + ["--plots", folder], new, repeats)
    return {"against": against, "repeats": repeats, "sim_args": sim_args,
            "code": common.code_version(),
            "machine": common.machine(), "load": [load_start, common.load()],
            "versus": versus, "plots": plots}


def render(result):
    """The two comparisons as one Markdown table."""
    v, p = result["versus"], result["plots"]
    command = "python sim.py " + result["sim_args"]
    rows = [["%s, %s" % (command, result["against"]), result["repeats"],
             "%.2f s" % v["b"]["median_wall_s"], "%.2f s" % v["b"]["median_cpu_s"], "-"],
            ["%s, this checkout" % command, result["repeats"],
             "%.2f s" % v["a"]["median_wall_s"], "%.2f s" % v["a"]["median_cpu_s"],
             "%.3fx" % v["cpu_ratio"]],
            ["the same with --plots DIR", result["repeats"], "%.2f s" % p["a"]["median_wall_s"],
             "%.2f s" % p["a"]["median_cpu_s"],
             "%+.3f s (%.3fx)" % (p["cpu_difference_s"], p["cpu_ratio"])]]
    return common.table(["command", "runs", "median wall", "median CPU",
                         "CPU against the row above (median of pairs)"], rows) + (
        "\n\nRuns alternate; CPU time is user plus system of each run's process tree; load "
        "average %s at the start, %s at the end." % tuple(result["load"]))


def main(argv=None):
    """Measure, print the table, and write the JSON if asked."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--against", required=True, help="the older commit (any git revision)")
    p.add_argument("--repeats", type=int, default=5, help="runs of each command (default 5)")
    p.add_argument("--sim-args", default=ARGS,
                   help="the run's arguments, one string (default %r)" % ARGS)
    p.add_argument("--json", metavar="PATH", help="also write every number as JSON")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    result = measure(args.against, args.repeats, args.sim_args)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1, sort_keys=True)
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
