"""Running the day: each seed's plan and start of day prepared once, its three runs (the Zipf
day, the uniform control, the edit trial) spread over a process pool, and the seeds' results
summed into the report's structure.
"""

import multiprocessing
import os
import sys
import time
from dataclasses import asdict
from typing import Any

from ..store import KBStore
from .day import DayRun, start_of_day
from .expectations import model_expectations, rounded
from .model import CITATIONS_PER_ANSWER, SAVE_MIX, Start
from .plan import draw_plan, top_share, zipf_cumulative

# The three runs of a seed's day; each is one task, so a pool of two processes stays balanced.
PARTS = ("zipf", "uniform", "edits")
# The two with hourly checks.
CHECKED = ("zipf", "uniform")


def can_image():
    """Whether an in-memory store copies itself to bytes here (its engine's ``image``)."""
    with KBStore(":memory:", semantic=False) as probe:
        return "image" in probe.capabilities


def prepare(seed, config, image=True):
    """One seed's plan, drawn once for its three runs, and its start-of-day database image.

    The image (where the in-memory store has the ``image`` capability: sqlite3 serializes
    from Python 3.11) spares each run the build of the articles and their index; without it
    each run builds its own, with the same result.
    """
    plan = draw_plan(seed, config)
    if not image or not can_image():
        return Start(plan, None, None)
    return Start(plan, *start_of_day(plan))


def run_part(seed, config, part, db_dir=None, start=None, db_url=None):
    """One run of one seed's day: Zipf with checks, the uniform control, or the edit experiment.

    ``start`` is the seed's ``prepare()``d plan and image, shared by its three runs; without
    it the run draws its own. The store is in memory, a file in ``db_dir``, or a fresh schema
    of the PostgreSQL database at ``db_url``.
    """
    if start is None:
        start = prepare(seed, config, image=False)
    plan = start.plan
    db_path = None if db_dir is None else os.path.join(db_dir, "seed%d-%s.db" % (seed, part))
    if db_url is not None:
        # Imported here: PostgreSQL's driver loads only for a run that asks for it.
        from ..engines.postgres import schema_address

        db_path = schema_address(db_url, "sim_seed%d_%s" % (seed, part), fresh=True)
    result = DayRun(plan, config, uniform=(part == "uniform"), checks=(part != "edits"),
                    edits=(part == "edits"), db_path=db_path, start=start).run()
    if part == "zipf":
        top = set(plan.ranking[:10])
        result["workload"] = {
            "questions": len(plan.questions),
            "first_hit_is_target": result["first_hit_is_target"],
            "questions_top10": sum(1 for q in plan.questions if q.target in top),
            "saves": len(plan.saves),
            "saves_top10": sum(1 for s in plan.saves if s.zipf_article in top),
            "save_kinds": {kind: sum(1 for s in plan.saves if s.kind == kind)
                           for kind, _ in SAVE_MIX},
        }
    return result


def _seed_result(seed, parts):
    """A seed's three results as the report keeps them, the workload lifted out of Zipf's and
    the passages out of both checked days'; returns (result, passages)."""
    passages = dict(seed=seed, **{mode: parts[mode].pop("passages") for mode in CHECKED})
    return dict(seed=seed, workload=parts["zipf"].pop("workload"), **parts), passages


def _add(into, row):
    """Add ``row``'s counts into ``into``, nested dicts too (text, flags and lists left out)."""
    for key, value in row.items():
        if isinstance(value, float):
            into[key] = rounded(into.get(key, 0) + value)
        elif isinstance(value, int) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + value
        elif isinstance(value, dict):
            _add(into.setdefault(key, {}), value)
    return into


def _sum_rows(per_seed, rows_of, key, labels):
    """Row i of every seed's list ``rows_of(seed result)`` summed, labelled ``key: labels[i]``."""
    out = []
    for i, label in enumerate(labels):
        row: dict[str, Any] = {}
        for r in per_seed:
            _add(row, rows_of(r)[i])
        row[key] = label
        out.append(row)
    return out


def summarize_passages(per_seed, config):
    """Sum the seeds' passage figures: what the agent found, both expectations and the costs,
    an hour a row, per checked day; each seed's beside them."""
    out = {}
    hours = range(1, config.hours + 1)
    for mode in CHECKED:
        out[mode] = {key: _sum_rows(per_seed, lambda r, mode=mode, key=key: r[mode][key],
                                    "hour", hours)
                     for key in ("hourly", "expected_given_saves", "expected",
                                 "expected_by_hour")}
        out[mode]["cost"], out[mode]["unmarked"] = {}, 0
        for r in per_seed:
            _add(out[mode]["cost"], r[mode]["cost"])
            out[mode]["unmarked"] += r[mode]["unmarked"]
    out["per_seed"] = per_seed
    return out


def summarize(per_seed, config, passages=None):
    """Sum the seeds' results into the report's structure (everything but timing), and their
    passage figures (``_seed_result``'s second half), when given, under ``passages``."""
    workload: dict[str, Any] = {}
    for r in per_seed:
        _add(workload, r["workload"])
    staleness, expected = {}, {"model": model_expectations(config)}
    for mode in ("zipf", "uniform"):
        staleness[mode] = _sum_rows(per_seed, lambda r, mode=mode: r[mode]["hourly"], "hour",
                                    range(1, config.hours + 1))
        staleness[mode + "_by_position"] = _sum_rows(
            per_seed, lambda r, mode=mode: r[mode]["by_position"], "position",
            range(1, CITATIONS_PER_ANSWER + 1))
        expected[mode] = {}
        for r in per_seed:
            _add(expected[mode], r[mode]["expected"])
        expected[mode]["by_position"] = _sum_rows(
            per_seed, lambda r, mode=mode: r[mode]["expected"]["by_position"], "position",
            range(1, CITATIONS_PER_ANSWER + 1))
    detection: dict[str, Any] = {}
    cost: dict[str, Any] = {}
    for mode in ("zipf", "uniform"):
        detection[mode] = {}
        cost[mode] = {}
        for r in per_seed:
            _add(detection[mode], r[mode]["detection"])
            _add(cost[mode], r[mode]["cost"])
    edits = _sum_rows(per_seed, lambda r: r["edits"]["edits"], "delay_s", config.delays)
    expected["edits"] = _sum_rows(per_seed, lambda r: r["edits"]["expected"]["edits"],
                                  "delay_s", config.delays)
    idempotency: dict[str, Any] = {}
    for r in per_seed:
        _add(idempotency, r["edits"]["idempotency"])
    mismatches = [m for r in per_seed for part in PARTS for m in r[part]["mismatches"]]
    summary = {
        "config": dict(asdict(config), delays=list(config.delays)),
        "seeds": [r["seed"] for r in per_seed],
        "workload": dict(
            workload,
            top10_question_share=_ratio(workload["questions_top10"], workload["questions"]),
            top10_save_share=_ratio(workload["saves_top10"], workload["saves"]),
            top10_zipf_expected=round(top_share(zipf_cumulative(config.articles, config.zipf),
                                                10), 4),
        ),
        "staleness": staleness,
        # The article's detection and cost figures are for the Zipf day; the control's follow.
        "detection": detection["zipf"],
        "cost": cost["zipf"],
        "control": {"detection": detection["uniform"], "cost": cost["uniform"]},
        "edits": edits,
        "expected": expected,
        "idempotency": idempotency,
        "checks": {"zipf": len(per_seed) * config.hours, "uniform": len(per_seed) * config.hours},
        "check_mismatches": mismatches,
        "per_seed": per_seed,
    }
    if passages is not None:
        # The seventh table's figures and its expectations; those by hour of table 1's
        # figures, for the plots, beside them. New keys: the six tables' keys are as they were.
        summary["passages"] = summarize_passages(passages, config)
        summary["expected_by_hour"] = {mode: summary["passages"][mode].pop("expected_by_hour")
                                       for mode in CHECKED}
    return summary


def _ratio(n, d):
    return round(n / d, 4) if d else 0.0


def run(seeds, config, *, db_dir=None, processes=None, db_url=None):
    """Run every seed (across processes when there are several) and summarise."""
    started = time.perf_counter()
    # Longest runs first, so the short edit runs fill the gaps at the end.
    jobs = [(seed, part) for part in PARTS for seed in seeds]
    if processes is None:
        processes = min(len(jobs), os.cpu_count() or 1)
    # Each seed's plan (and image) is made once, then shared by its three runs.
    preparing = [(seed, config, db_dir is None and db_url is None) for seed in seeds]
    if processes > 1:
        with multiprocessing.get_context(_start_method()).Pool(processes) as pool:
            starts = dict(zip(seeds, pool.starmap(prepare, preparing, chunksize=1)))
            results = pool.starmap(run_part, [(seed, config, part, db_dir, starts[seed], db_url)
                                              for seed, part in jobs], chunksize=1)
    else:
        starts = {seed: prepare(*args) for seed, args in zip(seeds, preparing)}
        results = [run_part(seed, config, part, db_dir, starts[seed], db_url)
                   for seed, part in jobs]
    by_seed: dict[int, dict[str, Any]] = {seed: {} for seed in seeds}
    for (seed, part), result in zip(jobs, results):
        by_seed[seed][part] = result
    per_seed, passages = zip(*[_seed_result(seed, by_seed[seed]) for seed in seeds])
    report = summarize(list(per_seed), config, list(passages))
    report["timing"] = {"seconds": round(time.perf_counter() - started, 3),
                        "processes": processes, "python": sys.version.split()[0]}
    return report


def _start_method():
    # fork starts a worker in milliseconds where it is safe (Linux, before any threads run);
    # elsewhere the platform default.
    methods = multiprocessing.get_all_start_methods()
    return "fork" if sys.platform.startswith("linux") and "fork" in methods else None
