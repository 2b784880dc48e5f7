"""What showing and reviewing a change costs: the approval question's diff on a large article,
proposing against editing, and listing a long review queue.

    python bench/review.py                  # all three, medians of --repeats runs
    python bench/review.py --only diff --mib 1
    python bench/review.py --quick          # tiny sizes: a smoke run

- **diff**: ``approval.question_text`` for an article of ``--mib`` MiB (about 60 characters a
  line) and three edits of it: a line appended at the end, a line inserted in the middle, and
  every line rewritten (the bounded worst case, shown as one replaced block). Target: under
  50 ms each.
- **propose**: an agent's edit (``edit_knowledge_article``) against the same call in writes
  mode ``review`` (a proposal), each on a store of ``--articles`` articles, ``--calls`` calls
  each, alternately. Target: proposing at most 1.2x an edit.
- **list**: ``KBStore.proposals.list`` of ``--pending`` pending proposals. Target: under 0.5 s.
"""

import argparse
import os
import sys
import tempfile
import time

import common
from kbcite import KBStore
from kbcite.server.approval import question_text

KB = "bench"
BENCHMARKS = ("diff", "propose", "list")


def timed(call, repeats):
    """The median wall time of ``call()`` over ``repeats`` runs, in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return common.median(times)


def bench_diff(mib, repeats):
    """Milliseconds to make the question for three edits of a ``mib`` MiB article."""
    line = "- step {0:06d}: run the command and check what it printed here.\n"
    page = "".join(line.format(n) for n in range(int(mib * 1024 * 1024 / len(line.format(0)))))
    middle = page.index("\n", len(page) // 2) + 1
    edits = {"a line appended at the end": page + "sudo rm -rf --no-preserve-root /\n",
             "a line inserted in the middle": page[:middle] + "inserted\n" + page[middle:],
             "every line rewritten": page.replace("step", "stage")}
    rows = []
    for name, new in edits.items():
        preview = {"knowledge_base_id": KB, "article_id": "art-000001", "title": "big",
                   "new_title": None, "current_version": "V", "current_bytes": len(page),
                   "new_bytes": len(new), "current_content": page, "new_content": new}
        rows.append([name, "%.2f" % (len(page) / 1048576), "%.1f" % timed(
            lambda: question_text(preview), repeats)])
    return common.markdown_table(["edit", "MiB", "question ms (median)"], rows)


def _edit_args(article, version, n):
    return {"knowledge_base_id": KB, "article_id": article, "content": "Text %d.\n" % n,
            "expected_version": version, "idempotency_key": "k-%d" % n}


def bench_propose(articles, calls, repeats):
    """Median milliseconds of an edit and of a proposal of the same edit, and their ratio."""
    edit_ms, propose_ms = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kb.db")
        with KBStore(path, create=True) as store:
            store.create_knowledge_base(KB)
            ids = store.create_articles(KB, [("Article %d" % n, "Body %d." % n)
                                             for n in range(articles)])
            for run in range(repeats):
                for kind, out in (("edit", edit_ms), ("propose", propose_ms)):
                    versions = {a: store.get_article(KB, a)["updated_at"] for a in ids[:calls]}
                    start = time.perf_counter()
                    for n, article in enumerate(ids[:calls]):
                        args = _edit_args(article, versions[article], run * 10 ** 6 + n)
                        args["idempotency_key"] += kind
                        if kind == "edit":
                            store.call_tool("edit_knowledge_article", args, granted=[KB],
                                            actor="agent")
                        else:
                            store.propose_edit(args, granted=[KB], actor="agent")
                    out.append((time.perf_counter() - start) * 1000 / calls)
    edit, propose = common.median(edit_ms), common.median(propose_ms)
    return common.markdown_table(
        ["articles", "calls", "edit ms", "propose ms", "propose / edit"],
        [[articles, calls, "%.2f" % edit, "%.2f" % propose, "%.2fx" % (propose / edit)]])


def bench_list(pending, repeats):
    """Milliseconds to list ``pending`` pending proposals."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kb.db")
        with KBStore(path, create=True) as store:
            store.create_knowledge_base(KB)
            ids = store.create_articles(KB, [("Article %d" % n, "Body %d." % n)
                                             for n in range(min(pending, 1000))])
            versions = {a: store.get_article(KB, a)["updated_at"] for a in ids}
            for n in range(pending):
                article = ids[n % len(ids)]
                store.propose_edit(_edit_args(article, versions[article], n), granted=[KB],
                                   actor="agent")
            ms = timed(lambda: store.proposals.list(KB), repeats)
            count = len(store.proposals.list(KB))
    return common.markdown_table(["pending", "listed", "list ms (median)"],
                                 [[pending, count, "%.1f" % ms]])


def main(argv=None):
    """Run the benchmarks named by ``--only`` (all by default) and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=BENCHMARKS, action="append")
    parser.add_argument("--mib", type=float, default=1.0)
    parser.add_argument("--articles", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.mib, args.articles, args.calls, args.pending, args.repeats = 0.05, 50, 20, 100, 1
    print("code: %s; load %s" % (common.code_version(), common.load()))
    for name in args.only or BENCHMARKS:
        if name == "diff":
            print("\n## The approval question's diff\n\n" + bench_diff(args.mib, args.repeats))
        elif name == "propose":
            print("\n## Proposing against editing (SQLite file)\n\n"
                  + bench_propose(args.articles, args.calls, args.repeats))
        else:
            print("\n## kb review list\n\n" + bench_list(args.pending, args.repeats))
    print("\nload at the end: %s" % common.load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
