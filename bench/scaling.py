"""How checking old citations grows: re-read everything cited versus poll the event log.

Runs the simulated day's Zipf run (``run_part(seed, config, "zipf")``: the one with the
hourly checks; the control and the edit runs add nothing here) at growing scales, starting
from the article's 400 articles, 120 questions and 300 saves, and reports each strategy's
calls and bytes of article text per hourly check. Re-reading costs one call per distinct cited
article, so it grows with citations; polling costs a page per 100 events plus a read per cited
article that changed, so it grows with changes.
"""

import time

import common
from kbcite.sim.model import Config
from kbcite.sim.runner import run_part

BASE = (400, 120, 300)  # articles, questions, saves: the article's day


def config_for(scale):
    """The day ``scale`` times the article's (at least 2 articles, 1 question)."""
    articles, questions, saves = (max(1, int(round(x * scale))) for x in BASE)
    return Config(articles=max(articles, 2), questions=questions, saves=saves)


def measure(config, seed):
    """One Zipf day's checking cost per hourly check, as a row."""
    started = time.perf_counter()
    result = run_part(seed, config, "zipf")
    seconds = time.perf_counter() - started
    if result["mismatches"]:
        raise AssertionError("the simulation's checks failed: %s" % result["mismatches"][:3])
    checks = len(result["hourly"])
    end = result["hourly"][-1]
    cost = result["cost"]
    row = {"articles": config.articles, "questions": config.questions, "saves": config.saves,
           "checks": checks, "seconds": round(seconds, 2), "citations": end["citations"],
           "distinct_citations": end["distinct"], "changes": cost["poll"]["events"]}
    for name in ("reread", "poll"):
        row[name + "_calls_per_check"] = round(cost[name]["calls"] / checks, 1)
        row[name + "_bytes_per_check"] = round(cost[name]["bytes_read"] / checks)
    row["poll_pages_per_check"] = round(cost["poll"]["pages"] / checks, 1)
    return row


def factor_configs(scale):
    """The day at ``scale`` with one factor, questions or saves, a tenth and ten times."""
    base = config_for(scale)
    configs = []
    for m in (0.1, 1, 10):
        configs.append(("questions x%g" % m, Config(
            articles=base.articles, questions=max(1, int(round(base.questions * m))),
            saves=base.saves)))
    for m in (0.1, 10):
        configs.append(("saves x%g" % m, Config(
            articles=base.articles, questions=base.questions,
            saves=max(1, int(round(base.saves * m))))))
    return configs


def run(scales=(1, 10), seed=1, factor_scale=3):
    """The day at each scale, then one factor at a time at ``factor_scale``; returns rows."""
    if not scales or min(scales) <= 0:
        raise ValueError("scaling scales must be positive numbers, got %r" % (scales,))
    if factor_scale is not None and factor_scale <= 0:
        raise ValueError("scaling factor scale must be positive, got %r" % (factor_scale,))
    load_start = common.load()
    rows = [dict(measure(config_for(scale), seed), scale=scale) for scale in scales]
    factors = []
    if factor_scale is not None:
        factors = [dict(measure(config, seed), label=label)
                   for label, config in factor_configs(factor_scale)]
    return {"seed": seed, "rows": rows, "factors": factors, "factor_scale": factor_scale,
            "load": [load_start, common.load()]}


def _cells(r):
    ratio = r["reread_bytes_per_check"] / r["poll_bytes_per_check"] \
        if r["poll_bytes_per_check"] else float("inf")
    return [common.n(r["citations"]), common.n(r["changes"]),
            common.n(r["reread_calls_per_check"]), common.n(r["reread_bytes_per_check"]),
            common.n(r["poll_calls_per_check"]), r["poll_pages_per_check"],
            common.n(r["poll_bytes_per_check"]), "%.1fx" % ratio, "%.1f s" % r["seconds"]]


HEADER = ["citations at end", "changes (events)", "re-read calls/check", "re-read bytes/check",
          "poll calls/check", "of which event pages", "poll bytes/check",
          "re-read / poll bytes", "run time"]


def render(result):
    """The scaling rows, and the one-factor rows, as Markdown tables."""
    def day(r):
        return "%s / %s / %s" % (common.n(r["articles"]), common.n(r["questions"]),
                                 common.n(r["saves"]))

    text = common.table(["articles / questions / saves"] + HEADER,
                        [[day(r)] + _cells(r) for r in result["rows"]])
    if result["factors"]:
        text += "\n\nOne factor at a time (%s articles):\n\n" % common.n(
            result["factors"][0]["articles"])
        text += common.table(["day", "articles / questions / saves"] + HEADER,
                             [[r["label"], day(r)] + _cells(r) for r in result["factors"]])
    checks = result["rows"][0]["checks"] if result["rows"] else 0
    return text + (
        "\n\nSeed %d, Zipf day, %d hourly checks each; calls and bytes of article text "
        "are averages over the checks. Re-read: one read per distinct cited article. Poll: "
        "event pages of up to 100, plus one read per cited article that changed."
        % (result["seed"], checks))
