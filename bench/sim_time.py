"""Wall and CPU time of the simulation's default run, ``python sim.py --seeds 1-5``, beside the
article's.

Each timed run is a fresh interpreter, as a person types it: start-up, imports, the worker pool
and the printed tables are all inside the time. CPU time is the run's whole process tree (the
workers included), user plus system. One more run, in this process and in one process, is
profiled to find the share of CPU spent inside SQLite's own calls.
"""

import contextlib
import cProfile
import io
import pstats
import subprocess
import sys
import time

import common

try:
    import resource
except ImportError:  # Windows: no rusage, so no CPU time for child processes
    resource = None

ARTICLE_SECONDS = 25.7  # the article's whole run: five seeds, Python 3.9.6 on an Apple M1
TARGET_SECONDS = 3.0
DEFAULT_ARGS = ("--seeds", "1-5")


def _children_cpu():
    """User plus system seconds of every finished child process so far (``None`` without it)."""
    if resource is None:
        return None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sqlite_share(sim_args=DEFAULT_ARGS):
    """Profile one in-process run of the simulation's ``main(sim_args)``; returns SQLite's
    share of its CPU.

    SQLite's share is the time inside the ``sqlite3`` module's methods (``execute``,
    ``fetchall`` and the like, where the database engine runs) over the profile's total. The
    profiler slows the Python side more than the C side, so the share is a lower bound.
    """
    from kbcite.sim.cli import main

    profile = cProfile.Profile()
    with contextlib.redirect_stdout(io.StringIO()):
        status = profile.runcall(main, list(sim_args) + ["--processes", "1"])
    if status != 0:
        raise RuntimeError("sim.py %s exited %d under the profiler" % (" ".join(sim_args), status))
    stats = pstats.Stats(profile)
    inside = sum(row[2] for (_, _, name), row in stats.stats.items() if "sqlite3." in name)
    return {"sqlite_s": round(inside, 3), "profiled_s": round(stats.total_tt, 3),
            "share": round(inside / stats.total_tt, 4) if stats.total_tt else 0.0}


def run(repeats=5, sim_args=DEFAULT_ARGS):
    """Run sim.py ``repeats`` times; returns wall and CPU times, their medians, SQLite's share."""
    if repeats < 1:
        raise ValueError("sim repeats must be at least 1, got %d" % repeats)
    command = [sys.executable, str(common.ROOT / "sim.py")] + list(sim_args)
    load_start = common.load()
    seconds, cpu = [], []
    for _ in range(repeats):
        cpu_before = _children_cpu()
        started = time.perf_counter()
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              cwd=str(common.ROOT))
        seconds.append(time.perf_counter() - started)
        if cpu_before is not None:
            cpu.append(_children_cpu() - cpu_before)
        if done.returncode != 0:
            raise RuntimeError("%s exited %d: %s" % (" ".join(command[1:]), done.returncode,
                                                     done.stderr.decode("utf-8", "replace")))
    return {"command": "python sim.py " + " ".join(sim_args),
            "default": tuple(sim_args) == DEFAULT_ARGS,
            "seconds": [round(s, 3) for s in seconds],
            "median_s": round(common.median(seconds), 3),
            "cpu_seconds": [round(c, 3) for c in cpu],
            "median_cpu_s": round(common.median(cpu), 3) if cpu else None,
            "sqlite": sqlite_share(sim_args),
            "load": [load_start, common.load()]}


def render(result):
    """The timing as a Markdown table beside the article's figure."""
    median = result["median_s"]
    cpu = result["median_cpu_s"]
    sqlite = result["sqlite"]
    rows = [[result["command"], len(result["seconds"]), "%.2f s" % median,
             "%.2f-%.2f s" % (min(result["seconds"]), max(result["seconds"])),
             "-" if cpu is None else "%.2f s" % cpu,
             "%.1f%% (%.2f of %.2f s)" % (100 * sqlite["share"], sqlite["sqlite_s"],
                                          sqlite["profiled_s"]),
             "%.1f s" % ARTICLE_SECONDS,
             "%.1fx" % (ARTICLE_SECONDS / median) if result["default"] else "-",
             # The target is for the default run only; a smaller day says nothing about it.
             "%.0f s: %s" % (TARGET_SECONDS, "met" if median <= TARGET_SECONDS else "missed")
             if result["default"] else "-"]]
    return common.table(["command", "runs", "median wall time", "range", "median CPU time",
                         "SQLite's share of CPU (profiled)", "article (M1)", "article / ours",
                         "target"], rows) + (
        "\n\nCPU time is user plus system of the run's whole process tree. SQLite's share is "
        "the time inside the `sqlite3` module's calls over all, in one profiled run in one "
        "process; the profiler slows Python more than SQLite, so it is a lower bound.")
