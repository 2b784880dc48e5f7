"""The worst case of the change between two versions: content built to make a diff slow.

    python bench/diff_worst.py                        # this checkout, SQLite and PostgreSQL
    python bench/diff_worst.py --tree /other/checkout --timeout 30   # another commit's code

For each family of content (one-letter paragraphs ``a``/``b`` drawn at random: many equal
paragraphs, which made the unbounded diff super-quadratic; ``x``/``y`` alternating against
``y``/``x``; a scattered change in thousands of equal paragraphs; empty paragraphs) and each
size up to the 1 MiB limit, a fresh store holds an article written twice; timed are one
``check_citations`` of 100 citations of the older version, and one edit with that stale
``expected_version`` (its ``version_conflict`` carries the same change). Each measurement
runs in a child process with ``--tree``'s package (this checkout's by default), killed past
``--timeout``; the table gives the median over ``--runs`` and the largest of every call.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

# The package measured is the one on PYTHONPATH: a measurement's child process imports it
# alone, before anything of this checkout (bench/common.py puts this checkout first).
BENCH = os.path.dirname(os.path.abspath(__file__))

SIZES = (6 * 1024, 24 * 1024, 256 * 1024, 1024 * 1024 - 64)
FAMILIES = ("letters", "alternating", "scattered", "empties")


def content(family, seed, size):
    """``size`` bytes or a little fewer of one family's content, version ``seed`` (1 or 2)."""
    rng = random.Random(seed)
    if family == "letters":
        return "\n\n".join(rng.choice("ab") for _ in range(size // 3))
    if family == "alternating":
        pair = ["x", "y"] if seed == 1 else ["y", "x"]
        return "\n\n".join(pair * (size // 6))
    if family == "scattered":
        para = "The same paragraph, over and over."
        count = size // (len(para) + 2)
        return "\n\n".join("changed %d" % i if seed == 2 and i % 97 == 0 else para
                           for i in range(count))
    return "\n\n" * (size // 2 - 1) + ("" if seed == 1 else "x")


def measure_one(engine, address, family, size):
    """``{"check_s", "conflict_s"}`` of one store and one content, in this process."""
    from kbcite import KBStore, ToolError

    granted = {"kb"}
    with KBStore(address, create=True) as store:
        store.create_knowledge_base("kb")
        aid = store.create_article("kb", "Worst", content(family, 1, size))
        old = store.get_article("kb", aid)["updated_at"]
        store.save_article("kb", aid, content=content(family, 2, size))
        cited = {"knowledge_base_id": "kb", "article_id": aid, "updated_at": old}
        started = time.perf_counter()
        store.call_tool("check_citations", {"knowledge_base_id": "kb",
                                            "citations": [cited] * 100}, granted=granted)
        check_s = time.perf_counter() - started
        started = time.perf_counter()
        try:
            store.call_tool("edit_knowledge_article", {
                "knowledge_base_id": "kb", "article_id": aid, "content": "mine",
                "expected_version": old, "idempotency_key": "k"}, granted=granted)
        except ToolError as exc:
            assert exc.code == "version_conflict", exc.code
        conflict_s = time.perf_counter() - started
    return {"check_s": check_s, "conflict_s": conflict_s}


def child(args, common):
    """One measurement in a process with ``args.tree``'s package; None past the timeout."""
    argv = [sys.executable, os.path.abspath(__file__), "--one", args.engine_now, args.address,
            args.family, str(args.size)]
    env = dict(os.environ, PYTHONPATH=args.tree)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout,
                              env=env, cwd=args.tree)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise SystemExit("measurement failed:\n" + done.stderr)
    return json.loads(done.stdout)


def main():
    if sys.argv[1:2] == ["--one"]:
        engine, address, family, size = sys.argv[2:6]
        print(json.dumps(measure_one(engine, address, family, int(size))))
        return 0
    sys.path.insert(0, BENCH)
    import common

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default=str(common.ROOT),
                        help="the checkout whose package is measured (default: this one)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a measurement may take before it is killed")
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--postgres", help="a PostgreSQL URL (default: a throwaway cluster)")
    args = parser.parse_args()
    engines = args.engines.split(",")
    url, cleanup = None, lambda: None
    if "postgresql" in engines:
        url, cleanup, reason = common.server_for(args.postgres)
        if url is None:
            print("PostgreSQL left out: %s" % reason)
            engines.remove("postgresql")
    print("tree %s; %s" % (args.tree, json.dumps(common.code_version())))
    rows, worst = [], 0.0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for engine in engines:
                for family in FAMILIES:
                    for size in (int(s) for s in args.sizes.split(",")):
                        checks, conflicts = [], []
                        for run in range(args.runs):
                            name = "diff_%s_%d_%d" % (family, size, run)
                            args.engine_now, args.family, args.size = engine, family, size
                            args.address = common.store_address(engine, tmp, name, url)
                            got = child(args, common)
                            common.drop_store(engine, args.address, url)
                            if got is None:
                                checks.append(float("inf"))
                                conflicts.append(float("inf"))
                                break
                            checks.append(got["check_s"])
                            conflicts.append(got["conflict_s"])
                        worst = max(worst, max(checks), max(conflicts))
                        shown = [("> %.0f" % args.timeout) if common.median(v) == float("inf")
                                 else "%.3f" % common.median(v) for v in (checks, conflicts)]
                        rows.append([engine, family, common.n(size)] + shown)
                        print("  %s %s %s: check_citations %s s, stale edit %s s"
                              % tuple(rows[-1]), flush=True)
    finally:
        cleanup()
    print(common.table(["engine", "content", "bytes", "check_citations (100) s",
                        "stale edit s"], rows))
    print("largest call: %s s" % ("> %.0f" % args.timeout if worst == float("inf")
                                  else "%.3f" % worst))
    return 0 if worst < 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
