"""A big folder of Markdown through `kb import` and `kb export`, side by side with an older commit.

    python bench/folders.py                            # 20,000 files, against 3246b0d, 5 runs
    python bench/folders.py --files 2000 --against HEAD~ --repeats 3

One folder of ``--files`` Markdown files in folders of a hundred (a title line and three to five
paragraphs each, drawn from one seed) is imported into a fresh store by a fresh ``kb`` process
of this checkout and of ``--against`` (a ``git worktree`` of it), alternately, ``--repeats``
times each; then imported again unchanged. This checkout also exports the knowledge base to a
new folder and imports that export into a fresh store. Each step is timed whole, as a person
runs it (the interpreter's start included): the median wall and CPU seconds of each, and the
ratios. The default ``--against`` is the commit before the forgiving import (ignore rules,
links, every bad file, front matter, the guarded prune) and the export.
"""

import argparse
import json
import os
import random
import shutil
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

# The commit before the day-two import and the export, whose import took 3.2 s for 20,000 files.
AGAINST = "3246b0d"
KB = "docs"
WORDS = ("account billing invoice refund password reset export import token grant policy "
         "workspace member role audit search article version citation agent team admin "
         "webhook limit plan trial upgrade downgrade cancel renew receipt tax region").split()


def make_folder(root, files, seed=1):
    """``files`` Markdown files under ``root``, a hundred a folder, drawn from ``seed``."""
    rng = random.Random(seed)
    for i in range(files):
        folder = os.path.join(root, "section-%03d" % (i // 100))
        if i % 100 == 0:
            os.makedirs(folder)
        title = " ".join(rng.choice(WORDS) for _ in range(4)).capitalize() + " %d" % i
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(25, 60))) + "."
                      for _ in range(rng.randint(3, 5))]
        with open(os.path.join(folder, "page-%05d.md" % i), "w", encoding="utf-8") as fh:
            fh.write("# %s\n\n%s\n" % (title, "\n\n".join(paragraphs)))


def timed(tree, *args):
    """``(wall, cpu)`` seconds of ``kb ARGS`` run from ``tree``; it must exit 0."""
    env = dict(common.child_env(), PYTHONPATH=tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN) if resource else None
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kbcite"] + list(args), cwd=tree, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit("kb %s failed in %s: %s" % (" ".join(args), tree,
                                                     done.stderr.decode("utf-8", "replace")))
    if before is None:
        return wall, wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def one_run(tree, source, work, with_export):
    """The steps of one run of ``tree``: name -> (wall, cpu)."""
    store = os.path.join(work, "store.db")
    timed(tree, "--db", store, "init", KB)
    steps = {"import": timed(tree, "--db", store, "import", KB, source),
             "import unchanged": timed(tree, "--db", store, "import", KB, source)}
    if with_export:
        exported, again = os.path.join(work, "exported"), os.path.join(work, "again.db")
        steps["export"] = timed(tree, "--db", store, "export", KB, exported)
        timed(tree, "--db", again, "init", KB)
        steps["import of the export"] = timed(tree, "--db", again, "import", KB, exported)
    return steps


def measure(against, files, repeats):
    """Medians of every step for this checkout and ``against``, run alternately."""
    folder = tempfile.mkdtemp(prefix="kb-bench-folders-")
    old_tree, remove = worktree(against)
    runs = {"this": [], "against": []}
    try:
        source = os.path.join(folder, "source")
        make_folder(source, files)
        for i in range(repeats):
            for side, tree in (("against", old_tree), ("this", str(common.ROOT))):
                work = os.path.join(folder, "%s-%d" % (side, i))
                os.makedirs(work)
                runs[side].append(one_run(tree, source, work, side == "this"))
                shutil.rmtree(work, ignore_errors=True)
    finally:
        remove()
        shutil.rmtree(folder, ignore_errors=True)
    result = {}
    for side, side_runs in runs.items():
        result[side] = {step: {"wall": common.median([r[step][0] for r in side_runs]),
                               "cpu": common.median([r[step][1] for r in side_runs])}
                        for step in side_runs[0]}
    return result


def render(result):
    """The results as a Markdown table."""
    this, old = result["steps"]["this"], result["steps"]["against"]
    commit = (result["code"] or {}).get("commit", "this checkout")
    lines = ["%s files, medians of %d runs each, alternately; %s against %s"
             % ("{:,}".format(result["files"]), result["repeats"], commit, result["against"]), "",
             "| step | this wall / CPU | %s wall / CPU | wall ratio | CPU ratio |"
             % result["against"], "|---|---:|---:|---:|---:|"]
    for step, t in this.items():
        o = old.get(step)
        lines.append("| %s | %.2f / %.2f s | %s | %s | %s |" % (
            step, t["wall"], t["cpu"],
            "%.2f / %.2f s" % (o["wall"], o["cpu"]) if o else "-",
            "%.2fx" % (t["wall"] / o["wall"]) if o else "-",
            "%.2fx" % (t["cpu"] / o["cpu"]) if o else "-"))
    return "\n".join(lines)


def main(argv=None):
    """Run the measurement and print it."""
    p = argparse.ArgumentParser(prog="bench/folders.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=20000, metavar="N",
                   help="Markdown files in the folder (default 20000)")
    p.add_argument("--against", default=AGAINST, metavar="REV",
                   help="the commit to compare the import with (default %s)" % AGAINST)
    p.add_argument("--repeats", type=int, default=5, metavar="N",
                   help="runs of each checkout (default 5)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = p.parse_args(argv)
    for name in ("files", "repeats"):
        if getattr(args, name) < 1:
            p.error("argument --%s: must be at least 1" % name)
    result = {"code": common.code_version(), "machine": common.machine(), "files": args.files,
              "repeats": args.repeats, "against": args.against,
              "steps": measure(args.against, args.files, args.repeats)}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
