"""How the simulation's headline figures move with its two modelling choices.

    python bench/sensitivity.py                # 20 seeds of each of the four combinations
    python bench/sensitivity.py --seeds 1-5 --json sensitivity.json
    python bench/sensitivity.py --seeds 1 --articles 40 --questions 20 --saves 30 --hours 2

Popularity is ``independent`` (one ranking shuffled without regard to titles: an article's
nearest text neighbour is usually unpopular) or ``topical`` (a subject's articles on
consecutive ranks, same Zipf shares). A question is its article's ``title`` words, or a
``paraphrase`` of its action and subject only. Each combination runs the full default day
(Zipf, control and edit experiment) for every seed, or a smaller one (``--articles``,
``--questions``, ``--saves``, ``--hours``, as ``sim.py`` takes them: a quick check that it
runs), and prints one Markdown row, with the article's figures last. The table in docs/simulation.md is this command's output.
"""

import argparse
import json
import sys

import common
from kbcite.sim import model, runner
from kbcite.sim.cli import bounded, file_error, parse_seeds
from kbcite.sim.report import seed_text

DEFAULT_SEEDS = "1-20"

# The article's figures, as shares: 369 of 1,200 stale citations, "four out of five"
# answers, 369 against the control's 167, 152 of 369 by title only, "nearly 4 in 10" at 1 h,
# 19 of 600 edits finding the article gone.
ARTICLE_ROW = ["the article", "-", "-", "-", "-", "30.8%", "80%", "2.21", "41.2%", "~40%",
               "3.2%"]

HEADER = ["popularity", "questions from", "top hit is the question's own article",
          "stale at position 1 (expected)", "stale at position 2 (expected)",
          "stale citations", "answers with a stale citation", "Zipf / uniform stale citations",
          "title-only share of stale distinct", "edits rejected at 1 h",
          "edits finding the article gone"]


def combinations():
    """Every (popularity, questions from) pair, the default first."""
    return [(p, q) for p in model.POPULARITY for q in model.QUESTIONS_FROM]


def figures(report):
    """The row's figures of one combination's report, as numbers (shares are fractions)."""
    z, u = report["staleness"]["zipf"][-1], report["staleness"]["uniform"][-1]
    positions = report["staleness"]["zipf_by_position"]
    expected = report["expected"]["zipf"]["by_position"]
    det = report["detection"]
    edits = report["edits"]
    hour = [e for e in edits if e["delay_s"] == 3600]
    return {
        "top_hit_is_own": _share(report["workload"]["first_hit_is_target"],
                                 report["workload"]["questions"]),
        "positions": [(_share(p["stale"], p["citations"]), _share(e["stale"], p["citations"]))
                      for p, e in zip(positions, expected)],
        "stale": _share(z["stale"], z["citations"]),
        "answers_with_stale": _share(z["answers_with_stale"], z["answers"]),
        "zipf_over_uniform": _share(_share(z["stale"], z["citations"]),
                                    _share(u["stale"], u["citations"])),
        "title_only_share": _share(det["title_only"]["stale_distinct"],
                                   det["ground_truth"]["stale_distinct"]),
        "rejected_1h": _share(hour[0]["rejected_changed"] + hour[0]["rejected_gone"],
                              hour[0]["edits"]) if hour else None,
        "gone": _share(sum(e["rejected_gone"] for e in edits), sum(e["edits"] for e in edits)),
        "mismatches": len(report["check_mismatches"]),
    }


def _share(n, d):
    return n / d if d else 0.0


# The day's size, as sim.py's options name it, each with its bounds.
DAY = {"articles": (2, model.MAX_ARTICLES), "questions": (1, model.MAX_QUESTIONS),
       "saves": (0, model.MAX_SAVES), "hours": (1, model.MAX_HOURS)}


def run(seeds, processes=None, day=None):
    """Every combination over ``seeds`` on the default day (or ``day``, some of ``DAY``'s
    sizes); returns {"rows": [...]} with each one's figures."""
    rows = []
    for popularity, questions_from in combinations():
        config = model.Config(popularity=popularity, questions_from=questions_from,
                              **(day or {}))
        report = runner.run(seeds, config, processes=processes)
        if report["check_mismatches"]:
            raise AssertionError("the simulation's checks failed: %s"
                                 % report["check_mismatches"][:3])
        rows.append({"popularity": popularity, "questions_from": questions_from,
                     "figures": figures(report)})
    return {"seeds": seeds, "rows": rows}


def render(result):
    """The combinations as one Markdown table, the article's figures last."""
    def pct(x):
        return "-" if x is None else "%.1f%%" % (100 * x)

    rows = []
    for row in result["rows"]:
        f = row["figures"]
        rows.append([row["popularity"], row["questions_from"], pct(f["top_hit_is_own"])]
                    + ["%s (%s)" % (pct(m), pct(e)) for m, e in f["positions"]]
                    + [pct(f["stale"]), pct(f["answers_with_stale"]),
                       "%.2f" % f["zipf_over_uniform"], pct(f["title_only_share"]),
                       pct(f["rejected_1h"]), pct(f["gone"])])
    rows.append(ARTICLE_ROW)
    return common.table(HEADER, rows)


def main(argv=None):
    """Run the four combinations and print the table; returns the exit status."""
    p = argparse.ArgumentParser(prog="bench/sensitivity.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds(DEFAULT_SEEDS),
                   help="N, A-B or a comma list (default %s)" % DEFAULT_SEEDS)
    p.add_argument("--processes", type=int, default=None,
                   help="worker processes (default: one per core)")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    default = model.Config()
    for name, (low, high) in DAY.items():
        p.add_argument("--" + name, type=bounded("--" + name, low, high), default=None,
                       help="the day's %s, as sim.py takes them (default %d)"
                            % (name, getattr(default, name)))
    args = p.parse_args(argv)
    if args.processes is not None and args.processes < 1:
        p.error("--processes must be at least 1, got %d" % args.processes)
    problem = args.json and file_error(args.json)
    if problem:
        p.error("--json: %s" % problem)
    day = {name: getattr(args, name) for name in DAY if getattr(args, name) is not None}
    result = run(args.seeds, args.processes, day)
    print("`python bench/sensitivity.py --seeds %s%s`: the Zipf day unless named, seeds summed.\n"
          % (seed_text(args.seeds), "".join(" --%s %d" % item for item in day.items())))
    print(render(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1, sort_keys=True)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
