"""The store's own CPU for bench/http_load.py's mix of calls, in process (no server, no HTTP),
side by side with an older commit: what of the one-client server's CPU a call is the store's.

    python bench/store_mix.py --against bc177a3                 # 3 rounds of 3,000 calls
    python bench/store_mix.py --against bc177a3 --calls 1000 --rounds 5

Each round runs a fresh process of this checkout and one of ``--against`` (a ``git worktree``
of it), in turn. Each builds a store of the same ``--articles`` articles with its own code,
then makes the calls one http_load client makes (search 40%, read 30%, poll 15%, edit 15%: a
read, then an edit with the version read), planned here so that both make the same ones, and
times each tool call's CPU (``time.thread_time``). The summary gives each tool's CPU a call
and a call of the mix, medians over the rounds with their spread, and their ratio.
"""

import argparse
import json
import random
import subprocess
import sys

import common
import corpus
from history import worktree
from http_load import HOT, KB, MIX, SEED
from kbcite.sim.plan import draw_kind

TOOLS = ("search_knowledge_base", "read_knowledge_article", "poll_resource_events",
         "edit_knowledge_article")

# One process's run, with the root of the code to measure first on its path (the store is
# imported before anything of this checkout's, so each side runs its own): the articles and
# the planned calls on stdin, each tool's CPU seconds and calls on stdout.
DRIVER = r"""
import json, os, shutil, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
if os.path.isdir(os.path.join(sys.argv[1], "kbcite")):
    from kbcite import KBStore
else:  # a commit from before the package
    from kb_store import KBStore
given = json.loads(sys.stdin.read())
kb, granted = given["kb"], {given["kb"]}
folder = tempfile.mkdtemp(prefix="kb-bench-mix-")
spent = {}
try:
    with KBStore(os.path.join(folder, "s.db"), create=True) as store:
        store.create_knowledge_base(kb)
        store.create_articles(kb, [tuple(row) for row in given["articles"]])

        def call(name, arguments):
            started = time.thread_time()
            result = store.call_tool(name, arguments, granted=granted)
            seconds, calls = spent.get(name, (0.0, 0))
            spent[name] = (seconds + time.thread_time() - started, calls + 1)
            return result
        for kind, value, key in given["plan"]:
            if kind == "search":
                call("search_knowledge_base", {"knowledge_base_id": kb, "query": value})
            elif kind == "read":
                call("read_knowledge_article", {"knowledge_base_id": kb, "article_id": value})
            elif kind == "poll":
                call("poll_resource_events", {"resource_type": "knowledge_base",
                                              "resource_id": kb, "limit": 100})
            else:
                current = call("read_knowledge_article", {"knowledge_base_id": kb,
                                                          "article_id": value})
                call("edit_knowledge_article", {
                    "knowledge_base_id": kb, "article_id": value,
                    "content": current["content"] + "\n" + key,
                    "expected_version": current["updated_at"], "idempotency_key": key})
finally:
    shutil.rmtree(folder, ignore_errors=True)
print(json.dumps(spent))
"""


def plan(calls, titles):
    """The calls one http_load client makes, as ``(kind, query or article ID, edit key)``:
    an edit is two calls (its read, then itself)."""
    rng = random.Random("client-0-%d" % SEED)
    steps, n = [], 0
    while n < calls:
        kind = draw_kind(MIX, rng.random())
        if kind == "search":
            steps.append((kind, corpus.question(titles[int(rng.random() * len(titles))]), None))
        elif kind == "read":
            steps.append((kind, "art-%06d" % (1 + int(rng.random() * len(titles))), None))
        elif kind == "poll":
            steps.append((kind, None, None))
        else:
            steps.append((kind, "art-%06d" % (1 + int(rng.random() * HOT)), "edit %d" % n))
            n += 1
        n += 1
    return steps


def run(tree, articles, steps):
    """``{tool: (CPU seconds, calls)}`` of one process of the code at ``tree``."""
    done = subprocess.run([sys.executable, "-c", DRIVER, tree], input=json.dumps(
        {"kb": KB, "articles": articles, "plan": steps}), capture_output=True, text=True,
        timeout=1800)
    if done.returncode != 0:
        raise RuntimeError("the driver of %s failed: %s" % (tree, done.stderr[-2000:]))
    return {name: tuple(figures) for name, figures in json.loads(done.stdout).items()}


def measure(against, articles, calls, rounds):
    """``{"new" | "old": [one {tool: (seconds, calls)} a round]}``, the two in turn."""
    rows = corpus.articles(random.Random(SEED), articles)
    steps = plan(calls, [title for title, _ in rows])
    root, remove = worktree(against)
    runs = {"new": [], "old": []}
    try:
        for _ in range(rounds):
            for label, tree in (("new", str(common.ROOT)), ("old", root)):
                runs[label].append(run(tree, rows, steps))
    finally:
        remove()
    return runs


def per_call_ms(spent, tool=None):
    """CPU milliseconds a call: of ``tool``, or of every call of the mix."""
    if tool is not None:
        seconds, calls = spent.get(tool, (0.0, 0))
    else:
        seconds = sum(s for s, _ in spent.values())
        calls = sum(c for _, c in spent.values())
    return seconds * 1000.0 / calls if calls else 0.0


def render(runs, against):
    """The summary table: medians (lowest-highest) of each side, and new/old of the medians."""
    lines = ["| tool | this checkout, CPU ms a call | %s | ratio |" % against,
             "|---|---:|---:|---:|"]
    for tool in TOOLS + (None,):
        figures = {label: [per_call_ms(spent, tool) for spent in runs[label]]
                   for label in ("new", "old")}
        medians = {label: common.median(values) for label, values in figures.items()}
        ratio = medians["new"] / medians["old"] if medians["old"] else float("nan")
        lines.append("| %s | %s | %s | %.2fx |" % (
            tool or "a call of the mix",
            *("%.3f (%.3f-%.3f)" % (medians[label], min(figures[label]), max(figures[label]))
              for label in ("new", "old")), ratio))
    return "\n".join(lines)


def main(argv=None):
    """Run the comparison and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to compare with")
    parser.add_argument("--articles", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    # Edits go to the first HOT articles.
    for name, least in (("articles", HOT), ("calls", 1), ("rounds", 1)):
        if getattr(args, name) < least:
            parser.error("argument --%s: at least %d" % (name, least))
    runs = measure(args.against, args.articles, args.calls, args.rounds)
    print("%d calls of the mix on %d articles, %d rounds, load %s\n" % (
        args.calls, args.articles, args.rounds, common.load()))
    print(render(runs, args.against))


if __name__ == "__main__":
    main()
