"""What keeping every version costs: writes side by side with an older commit, the store's size
and the bytes each version takes, and what a delta encoding would save.

    python bench/history.py                      # write costs against HEAD~, sizes, deltas
    python bench/history.py --against REV --articles 100000 --saves 3

- **Writes.** A person's save and an agent's edit (read, then edit with the version read) on a
  store of ``--articles`` articles, timed call by call in a fresh process of this checkout and
  of ``--against`` (a ``git worktree`` of it), alternately, ``--repeats`` times each: the
  median per-call time of each, and the ratio.
- **Size.** The store file after the article's day (seed 1, Zipf, on a file) and after every
  article of ``--articles`` is saved ``--saves`` times (each save rewriting one paragraph, as
  the day's saves do): versions, texts, bytes on disk per version beyond the articles alone.
- **Deltas.** Over the same saves: the bytes a paragraph-level delta (the changed paragraphs
  only) and zlib would store, against whole texts.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import zlib

import common
import corpus
from kbcite import KBStore
from kbcite.sim.model import Config
from kbcite.sim.runner import run_part

KB = "bench"
SEED = 20261108

# One process's timing of saves and edits, run with the root of the code to measure first on
# its path: the same script for this checkout and for the older commit.
DRIVER = r"""
import json, random, shutil, sys, tempfile, time, os
sys.path.insert(0, sys.argv[1])
from kb_store import KBStore
folder = tempfile.mkdtemp(prefix="kb-bench-hist-")
path = os.path.join(folder, "s.db")
n, calls = int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(int(sys.argv[4]))
with KBStore(path, create=True) as store:
    store.create_knowledge_base("bench")
    ids = store.create_articles("bench", [("Title %d" % i, "\n\n".join(
        "Paragraph %d of article %d, with some words to index." % (p, i) for p in range(4)))
        for i in range(n)])
    saves, edits = [], []
    for i in range(calls):
        aid = ids[int(rng.random() * n)]
        content = store.get_article("bench", aid)["content"].split("\n\n")
        content[int(rng.random() * len(content))] = "Rewritten %d by a person." % i
        started = time.perf_counter()
        store.save_article("bench", aid, content="\n\n".join(content))
        saves.append(time.perf_counter() - started)
    for i in range(calls):
        aid = ids[int(rng.random() * n)]
        current = store.call_tool("read_knowledge_article", {"knowledge_base_id": "bench",
                                  "article_id": aid}, granted={"bench"})
        args = {"knowledge_base_id": "bench", "article_id": aid,
                "content": current["content"] + "\n\nNote %d." % i,
                "expected_version": current["updated_at"], "idempotency_key": "k%d" % i}
        started = time.perf_counter()
        store.call_tool("edit_knowledge_article", args, granted={"bench"})
        edits.append(time.perf_counter() - started)
shutil.rmtree(folder, ignore_errors=True)
saves.sort(); edits.sort()
print(json.dumps({"save": saves[len(saves) // 2], "edit": edits[len(edits) // 2]}))
"""


def worktree(rev):
    """A checkout of ``rev`` in a temporary folder; returns (its root, how to remove it)."""
    folder = tempfile.mkdtemp(prefix="kb-bench-rev-")
    target = os.path.join(folder, "tree")
    subprocess.run(["git", "worktree", "add", "--detach", "-q", target, rev],
                   cwd=str(common.ROOT), check=True, capture_output=True)

    def remove():
        subprocess.run(["git", "worktree", "remove", "--force", target], cwd=str(common.ROOT),
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
    return target, remove


def write_costs(against, articles, calls, repeats):
    """Median per-call save and edit seconds of this checkout and of ``against``, alternately."""
    root, remove = worktree(against)
    runs = {"new": [], "old": []}
    try:
        for i in range(repeats):
            for label, tree in (("old", root), ("new", str(common.ROOT))):
                done = subprocess.run([sys.executable, "-c", DRIVER, tree, str(articles),
                                       str(calls), str(SEED + i)], capture_output=True,
                                      text=True, timeout=1800)
                if done.returncode != 0:
                    raise RuntimeError("the %s driver failed: %s" % (label, done.stderr[-2000:]))
                runs[label].append(json.loads(done.stdout))
    finally:
        remove()
    out = {"against": against, "articles": articles, "calls": calls, "repeats": repeats}
    for kind in ("save", "edit"):
        new = common.median([r[kind] for r in runs["new"]])
        old = common.median([r[kind] for r in runs["old"]])
        out[kind] = {"new_ms": round(new * 1000, 3), "old_ms": round(old * 1000, 3),
                     "ratio": round(new / old, 3)}
    return out


def counts(store):
    """Versions, texts and the texts' UTF-8 bytes of a store."""
    db = store._db
    with db.read():
        return {"versions": db.value("SELECT count(*) FROM versions"),
                "texts": db.value("SELECT count(*) FROM texts"),
                "text_bytes": db.value("SELECT coalesce(sum(bytes), 0) FROM texts")}


def day_size(directory):
    """The article's day (seed 1, Zipf) on a file: its size, versions and bytes per version."""
    run_part(1, Config(), "zipf", db_dir=directory)
    path = os.path.join(directory, "seed1-zipf.db")
    with KBStore(path) as store:
        found = counts(store)
        articles = len(store.list_articles("support"))
    return dict(found, articles=articles, file_bytes=os.path.getsize(path))


def saved_size(directory, articles, saves):
    """Every article saved ``saves`` times, one paragraph each: sizes, bytes per version, and
    what a paragraph delta or zlib would store instead of whole texts."""
    rng = random.Random(SEED)
    rows = corpus.articles(rng, articles)
    path = os.path.join(directory, "saved.db")
    whole = delta = packed = 0
    with KBStore(path, create=True) as store:
        store.create_knowledge_base(KB)
        ids = store.create_articles(KB, rows)
        start = os.path.getsize(path)
        before = counts(store)
        for round_ in range(saves):
            for aid, (title, content) in zip(ids, rows):
                paragraphs = store.get_article(KB, aid)["content"].split("\n\n")
                at = int(rng.random() * len(paragraphs))
                paragraphs[at] = "Round %d rewrote this paragraph of %s." % (round_, title)
                text = "\n\n".join(paragraphs)
                store.save_article(KB, aid, content=text)
                whole += len(text.encode("utf-8"))
                delta += len(paragraphs[at].encode("utf-8")) + 8  # the paragraph, its place
                packed += len(zlib.compress(text.encode("utf-8")))
        after = counts(store)
    size = os.path.getsize(path)
    added = after["versions"] - before["versions"]
    return {"articles": articles, "saves_each": saves, "versions": after["versions"],
            "texts": after["texts"], "file_bytes_start": start, "file_bytes": size,
            "bytes_per_added_version": round((size - start) / added) if added else None,
            "text_bytes_per_added_version": round(whole / added) if added else None,
            "paragraph_delta_bytes_per_version": round(delta / added) if added else None,
            "zlib_bytes_per_version": round(packed / added) if added else None}


def render(result):
    """The results as Markdown tables."""
    out = []
    w = result.get("writes")
    if w:
        out.append(common.table(["call", "this checkout ms", "%s ms" % w["against"], "ratio"], [
            [kind, w[kind]["new_ms"], w[kind]["old_ms"], "%.2fx" % w[kind]["ratio"]]
            for kind in ("save", "edit")]))
        out.append("\nMedian per call over %d calls on %s articles, %d runs each, alternately."
                   % (w["calls"], common.n(w["articles"]), w["repeats"]))
    d = result["day"]
    out.append("\n" + common.table(["store", "articles", "versions", "texts", "text bytes",
                                    "file bytes"], [
        ["the article's day (seed 1, Zipf)", d["articles"], d["versions"], d["texts"],
         common.n(d["text_bytes"]), common.n(d["file_bytes"])]]))
    s = result["saved"]
    out.append("\n" + common.table(
        ["articles", "saves each", "versions", "file bytes before", "file bytes after",
         "bytes on disk per added version", "text bytes per version",
         "paragraph delta bytes", "zlib bytes"],
        [[common.n(s["articles"]), s["saves_each"], common.n(s["versions"]),
          common.n(s["file_bytes_start"]), common.n(s["file_bytes"]),
          s["bytes_per_added_version"], s["text_bytes_per_added_version"],
          s["paragraph_delta_bytes_per_version"], s["zlib_bytes_per_version"]]]))
    return "\n".join(out)


def main(argv=None):
    """Run the measurements and print them."""
    p = argparse.ArgumentParser(prog="bench/history.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--against", default="HEAD~", metavar="REV",
                   help="the commit to compare writes with (default HEAD~)")
    p.add_argument("--articles", type=int, default=10000, metavar="N",
                   help="articles for the write costs and the size (default 10000)")
    p.add_argument("--saves", type=int, default=3, metavar="K",
                   help="saves of each article for the size (default 3)")
    p.add_argument("--calls", type=int, default=300, metavar="N",
                   help="saves and edits timed per run (default 300)")
    p.add_argument("--repeats", type=int, default=5, metavar="N",
                   help="runs of each checkout (default 5)")
    p.add_argument("--no-writes", action="store_true", help="skip the write costs")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = p.parse_args(argv)
    for name in ("articles", "saves", "calls", "repeats"):
        if getattr(args, name) < 1:
            p.error("--%s must be at least 1" % name)
    folder = tempfile.mkdtemp(prefix="kb-bench-history-")
    try:
        result = {"code": common.code_version(), "machine": common.machine()}
        if not args.no_writes:
            result["writes"] = write_costs(args.against, args.articles, args.calls,
                                           args.repeats)
        result["day"] = day_size(folder)
        result["saved"] = saved_size(folder, args.articles, args.saves)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
