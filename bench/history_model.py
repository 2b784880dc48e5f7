"""The history checker's long run: fresh random examples of ``tests/test_history_model.py``
(every entry point, the store's promises checked after every step), far past CI's budget.

    python bench/history_model.py                          # 2,000 examples on each engine
    python bench/history_model.py --examples 500 --engines sqlite
    python bench/history_model.py --quick                  # a smoke run: 5 examples each

CI runs the same test with a fixed budget and the same examples every time (200 on SQLite,
40 on PostgreSQL, 25 steps each); this draws new ones on every run. It prints, per engine,
the examples and steps run, the time, and whether the checker found a violation (then
hypothesis's shortest sequence of steps that shows it, and a line to replay it, are printed
above the table). PostgreSQL needs ``initdb`` and ``pg_ctl`` (or ``KB_TEST_POSTGRES_URL``),
as the suite does.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINES = ("sqlite", "postgresql")


def run(engine, examples, steps):
    """``(the counts the test wrote, pytest's exit status)`` of one engine's run."""
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "report.jsonl")
        env = dict(os.environ, KB_HISTORY_EXAMPLES=str(examples), KB_HISTORY_STEPS=str(steps),
                   KB_HISTORY_REPORT=report)
        status = subprocess.call(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
             "tests/test_history_model.py", "-k", engine], cwd=ROOT, env=env)
        counts = {"engine": engine, "examples": 0, "steps": 0, "seconds": 0.0}
        if os.path.exists(report):
            with open(report, encoding="utf-8") as fh:
                for line in fh:
                    counts = json.loads(line)
    return counts, status


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2000,
                        help="examples a run (default 2000)")
    parser.add_argument("--steps", type=int, default=40,
                        help="steps at most an example (default 40)")
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help="comma-separated: sqlite, postgresql")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 examples each")
    args = parser.parse_args()
    if args.quick:
        args.examples, args.steps = 5, 10
    rows, failed = [], False
    for engine in args.engines.split(","):
        counts, status = run(engine, args.examples, args.steps)
        failed |= status not in (0, 5)
        rows.append([engine, counts["examples"], counts["steps"], "%.1f" % counts["seconds"],
                     "none" if status == 0 else "skipped" if status == 5 else
                     "found (above)"])
    print(common.markdown_table(["engine", "examples", "steps", "seconds", "violations"], rows))
    facts = common.machine()
    print("load %s; %s CPUs (%s); Python %s; code %s" % (
        common.load(), facts["cpus"], facts["cpu"], facts["python"], common.code_version()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
