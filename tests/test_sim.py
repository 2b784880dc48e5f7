"""The simulated day: its golden counts, its workload, its oracle (and a store it catches), its
closed-form expectations over many seeds, and each check strategy on a known timeline.

The golden file is the default run's JSON. After a deliberate change to the simulation,
regenerate it with ``python sim.py --seeds 1-5 --json tests/golden/sim-seeds-1-5.json`` and
explain the change of counts in the commit message.
"""

import hashlib
import json
import math
import random
import sqlite3
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbcite.sim import cli as sim_cli, day as sim_day, plan as sim_plan
from kbcite.sim.agent import Agent
from kbcite.sim.cli import main, parse_delays, parse_seeds
from kbcite.sim.day import DayRun, fill_store
from kbcite.sim.expectations import p_touched, p_touched_by_end, zipf_weights
from kbcite.sim.model import (ACTIONS, CHECK_STEP, CITATIONS_PER_ANSWER, EDIT_STEP, HOUR_US, KB_ID,
                              MAX_ARTICLES, QUESTION_STEP, SAVE_STEP, Change, Config, Save,
                              SimClock)
from kbcite.sim.oracle import Oracle
from kbcite.sim.plan import (draw_plan, draw_rank, make_titles, people_saves, shuffled, top_share,
                             zipf_cumulative)
from kbcite.sim.runner import PARTS, prepare, run, run_part
from kbcite.store import KBStore

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden" / "sim-seeds-1-5.json"
SMALL = Config(articles=60, questions=24, saves=60, hours=4)

# The golden file's keys for the six tables, and those the seventh table (the passages) and the
# figures added beside them. The file only gains keys: without the new ones and timing it
# hashes, as sorted JSON, to what the whole file hashed to before them (commit f0f4330). After
# a deliberate change to the six tables' figures, put the new hash here and say why.
SIX_TABLES_KEYS = {"config", "seeds", "workload", "staleness", "detection", "cost", "control",
                   "edits", "expected", "idempotency", "checks", "check_mismatches",
                   "per_seed"}
ADDED_KEYS = {"passages", "expected_by_hour"}
SIX_TABLES_SHA256 = "51b0fd9c65c155030056063b44e2a2258451ab81697fe9f3ef0aa21954dc0ff2"


def without_timing(report):
    return {k: v for k, v in report.items() if k != "timing"}


# -- the default run ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """The README's command, run once for this module, with its JSON and its exit status, as
    docs/reproducing.md runs it (``--json run.json --per-seed``); in a shell that exports
    KB_DB for the quick start, which the run must not pick up."""
    folder = tmp_path_factory.mktemp("sim")
    out = folder / "run.json"
    proc = subprocess.run(
        [sys.executable, "sim.py", "--seeds", "1-5", "--json", str(out), "--per-seed"],
        cwd=str(ROOT), capture_output=True, text=True, timeout=600,
        env=dict(os.environ, KB_DB=str(folder / "kb.sqlite3")),
    )
    return proc, json.loads(out.read_text(encoding="utf-8"))


# The default run takes seconds: its tests are slow, and Python 3.9's CI leg runs them (py39).
@pytest.mark.slow
@pytest.mark.py39
def test_default_run_matches_golden_counts(default_run):
    proc, report = default_run
    assert proc.returncode == 0, proc.stderr
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert without_timing(report) == without_timing(golden)


def test_the_golden_file_only_gained_keys():
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert set(golden) == SIX_TABLES_KEYS | ADDED_KEYS | {"timing"}
    six = {k: v for k, v in golden.items() if k in SIX_TABLES_KEYS}
    assert hashlib.sha256(json.dumps(six, sort_keys=True).encode("utf-8")).hexdigest() == \
        SIX_TABLES_SHA256


@pytest.mark.slow
@pytest.mark.py39
def test_default_run_checks_hold_and_tables_print(default_run):
    proc, report = default_run
    assert report["check_mismatches"] == []
    assert report["checks"] == {"zipf": 40, "uniform": 40}
    for heading in ("## 1. Staleness by hour", "## 2. Detection", "## 3. Cost",
                    "## 4. Edits", "## 5. Idempotency", "## 6. The article beside us",
                    "| figure | article | ours | expected (model) |", "| zipf expected |",
                    "| expected rejected |", "would need about",
                    "## 7. Do stale citations still say what the answer used?",
                    "| zipf expected given the saves |", "| check_citations calls |",
                    "## Per seed", "| figure | all | seed 1 | seed 2 | seed 3 | seed 4 | seed 5 |"):
        assert heading in proc.stdout
    assert proc.stdout.index("## 6.") < proc.stdout.index("## 7.") < proc.stdout.index(
        "## Per seed")
    # The report's own invariants, whatever the counts are.
    gt = report["detection"]["ground_truth"]
    for strategy in ("reread", "poll"):
        assert report["detection"][strategy] == gt
    title = report["detection"]["title_only"]
    assert title["content_only"] == 0 and title["false_stale"] == 0
    assert title["stale_distinct"] == gt["retitled"] + gt["gone"]
    end = report["staleness"]["zipf"][-1]
    assert end["citations"] == 1200 and end["answers"] == 600
    assert gt["stale"] == end["stale"] and gt["stale_distinct"] == end["stale_distinct"]
    idem = report["idempotency"]
    assert idem["replays"] == idem["replays_marked"] == idem["successful_edits"] > 0
    assert idem["new_events_from_replays"] == 0
    assert [e["edits"] for e in report["edits"]] == [150, 150, 150, 150]


@pytest.mark.slow
@pytest.mark.py39
def test_default_run_passages_add_up(default_run):
    """The seventh table's invariants, whatever its counts are."""
    _, report = default_run
    passages = report["passages"]
    for mode in ("zipf", "uniform"):
        p = passages[mode]
        for found, given, staleness in zip(p["hourly"], p["expected_given_saves"],
                                           report["staleness"][mode]):
            verdicts = ("intact", "rewritten", "retitled_intact", "retitled_rewritten", "gone")
            assert found["stale"] == sum(found[v] for v in verdicts) == staleness["stale"]
            # Stale and gone given the saves are the schedule's own counts.
            assert given["stale"] == found["stale"] and given["gone"] == found["gone"]
            assert abs(sum(given[v] for v in verdicts) - given["stale"]) < 1e-3
        end = report["expected_by_hour"][mode][-1]
        assert abs(end["stale"] - report["expected"][mode]["stale"]) < 1e-3
        assert abs(end["answers_with_stale"]
                   - report["expected"][mode]["answers_with_stale"]) < 1e-3
        assert abs(p["expected"][-1]["stale"] - report["expected"][mode]["stale"]) < 1e-3
        cost = p["cost"]
        own = report["cost"] if mode == "zipf" else report["control"]["cost"]
        for name, base in (("reread", "reread"), ("poll_reread", "poll")):
            assert (cost[name]["calls"], cost[name]["bytes_read"]) == (own[base]["calls"],
                                                                      own[base]["bytes_read"])
        assert cost["poll_check"]["calls"] == own["poll"]["pages"] + cost["poll_check"][
            "check_calls"]
        if mode == "zipf":  # 100 citations a call: one call a check, or a few more
            assert 40 <= cost["check_all"]["check_calls"] <= 40 + cost["check_all"][
                "citations_sent"] // 100
    assert len(passages["per_seed"]) == 5


@pytest.mark.slow
@pytest.mark.py39
def test_json_has_the_documented_keys(default_run):
    _, report = default_run
    for key in ("config", "seeds", "workload", "staleness", "detection", "cost", "edits",
                "expected", "idempotency", "checks", "check_mismatches", "timing"):
        assert key in report
    for mode in ("zipf", "uniform"):
        assert set(report["expected"][mode]) >= {
            "by_position", "stale", "stale_distinct", "answers_with_stale",
            "title_only_distinct", "gone_distinct"}
    assert [e["delay_s"] for e in report["expected"]["edits"]] == report["config"]["delays"]
    assert report["detection"]["schedule"] == report["detection"]["ground_truth"]
    assert 0 < report["workload"]["top10_question_share"] < 1
    assert 0 < report["workload"]["top10_save_share"] < 1
    row = report["staleness"]["uniform"][0]
    assert set(row) >= {"hour", "citations", "stale", "distinct", "stale_distinct", "answers",
                        "answers_with_stale"}
    for strategy in ("ground_truth", "title_only", "reread", "poll"):
        assert set(report["detection"][strategy]) >= {
            "stale", "stale_distinct", "changed", "gone", "content_only", "retitled"}
    for strategy in ("title_only", "reread", "poll"):
        assert set(report["cost"][strategy]) >= {"calls", "articles_read", "bytes_read",
                                                 "events"}
    for mode in ("zipf", "uniform"):
        p = report["passages"][mode]
        for key in ("hourly", "expected_given_saves", "expected"):
            assert [r["hour"] for r in p[key]] == list(range(1, 9))
            assert set(p[key][0]) == {"hour", "stale", "intact", "rewritten", "retitled_intact",
                                      "retitled_rewritten", "gone"}
        assert set(p["cost"]) == {"reread", "check_all", "poll_check", "poll_reread"} - (
            {"check_all"} if mode == "uniform" else set())
        for c in p["cost"].values():
            assert set(c) == {"calls", "check_calls", "citations_sent", "articles_read",
                              "bytes_read"}
        assert set(report["expected_by_hour"][mode][0]) == {"hour", "stale",
                                                            "answers_with_stale"}
    assert set(report["edits"][0]) >= {"delay_s", "edits", "accepted_first_try",
                                       "rejected_changed", "rejected_gone",
                                       "retries_succeeded"}


# -- determinism -------------------------------------------------------------------------------


@pytest.mark.slow  # two seeds' days, twice
def test_same_counts_in_one_process_and_in_two():
    one = run([3, 4], SMALL, processes=1)
    two = run([3, 4], SMALL, processes=2)
    assert without_timing(one) == without_timing(two)


@pytest.mark.slow  # each part of a day, twice
def test_a_copied_start_of_day_runs_as_a_built_one():
    start = prepare(2, SMALL)
    if hasattr(sqlite3.Connection, "serialize"):  # Python 3.11 on: the image is used
        assert start.image and len(start.article_ids) == SMALL.articles
    for part in PARTS:
        assert run_part(2, SMALL, part, start=start) == run_part(2, SMALL, part)


def test_steps_that_share_a_microsecond_run_in_the_days_order(monkeypatch):
    """Steps at one time run by (rank, index) on every Python: sched alone keeps the order of
    entry on a tie from 3.10 on, and on 3.9 none."""
    config = Config(articles=60, questions=40, saves=120, hours=2, delays=(600, 1200))
    plan = draw_plan(3, config)
    for event in plan.saves + plan.questions:  # ten-minute times: many steps share one
        event.t_us -= event.t_us % (600 * 1000000)
    ran, enter = [], sim_day._enter

    def recording(day, step, action, *argument):
        def act(*args):
            ran.append(step)
            return action(*args)
        enter(day, step, act, *argument)

    monkeypatch.setattr(sim_day, "_enter", recording)
    for kind in (dict(checks=True), dict(checks=False, edits=True)):
        ran.clear()
        result = DayRun(plan, config, **kind).run()
        assert result["mismatches"] == []
        assert len({step[:2] for step in ran}) < len(ran) and ran == sorted(ran)


def test_plan_draws_only_through_random(monkeypatch):
    """Only .random() is guaranteed the same across Python versions; nothing else may be used."""
    used = []

    class Recording(random.Random):
        def __getattribute__(self, name):
            if not name.startswith("_") and name not in ("random", "seed", "getstate",
                                                         "setstate"):
                used.append(name)
            return super().__getattribute__(name)

    monkeypatch.setattr(sim_plan.random, "Random", Recording)
    plan = draw_plan(7, SMALL)
    assert used == []
    assert len(plan.questions) == SMALL.questions and len(plan.saves) == SMALL.saves


# -- the workload ------------------------------------------------------------------------------


def test_zipf_top10_share_is_the_articles_36_7_percent():
    cumulative = zipf_cumulative(400, 0.9)
    assert round(top_share(cumulative, 10), 3) == 0.367
    rng = random.Random(12345)
    n = 200000
    top = sum(1 for _ in range(n) if draw_rank(cumulative, rng.random()) < 10)
    assert abs(top / n - 0.36696) < 0.005


def test_uniform_zipf_exponent_zero_is_flat():
    cumulative = zipf_cumulative(10, 0.0)
    assert [round(c, 10) for c in cumulative] == [round((i + 1) / 10, 10) for i in range(10)]


def test_save_mix_on_a_large_sample():
    plan = draw_plan(1, Config(articles=50, questions=1, saves=20000))
    kinds = [s.kind for s in plan.saves]
    assert abs(kinds.count("content") / 20000 - 0.85) < 0.01
    assert abs(kinds.count("content_title") / 20000 - 0.10) < 0.01
    assert abs(kinds.count("unpublish") / 20000 - 0.05) < 0.006
    assert all(0 <= s.t_us < 8 * HOUR_US for s in plan.saves)
    assert [s.t_us for s in plan.saves] == sorted(s.t_us for s in plan.saves)


def test_questions_and_saves_follow_one_ranking():
    plan = draw_plan(2, Config(articles=100, questions=5000, saves=5000))
    top = set(plan.ranking[:10])
    expected = top_share(zipf_cumulative(100, 0.9), 10)
    q_share = sum(q.target in top for q in plan.questions) / 5000
    s_share = sum(s.zipf_article in top for s in plan.saves) / 5000
    u_share = sum(s.uniform_article in top for s in plan.saves) / 5000
    assert abs(q_share - expected) < 0.03 and abs(s_share - expected) < 0.03
    assert abs(u_share - 0.10) < 0.02


def test_shuffle_is_a_permutation_and_titles_are_unique():
    rng = random.Random(5)
    assert sorted(shuffled(rng, range(100))) == list(range(100))
    titles, subjects = make_titles(random.Random(9), 3000)
    assert len(set(titles)) == 3000 and len(subjects) == 3000


# -- closed-form expectations ------------------------------------------------------------------


# A small day, quick enough for 200 seeds, with enough citations, saves and edits per seed that
# every figure has something to count.
TINY = Config(articles=40, questions=20, saves=30, hours=2)


def mean_and_se(values):
    n = len(values)
    mean = sum(values) / n
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(variance / n)


def figures(r, mode):
    """(label, measured, expected) of one seed's checked day."""
    end, expected = r[mode]["hourly"][-1], r[mode]["expected"]
    rows = [("%s: stale at position %d" % (mode, p + 1), r[mode]["by_position"][p]["stale"],
             expected["by_position"][p]["stale"]) for p in range(CITATIONS_PER_ANSWER)]
    title = r[mode]["detection"]["title_only"]
    return rows + [
        (mode + ": answers with a stale citation", end["answers_with_stale"],
         expected["answers_with_stale"]),
        (mode + ": stale distinct", end["stale_distinct"], expected["stale_distinct"]),
        (mode + ": title only found", title["stale_distinct"], expected["title_only_distinct"]),
        (mode + ": gone distinct", r[mode]["detection"]["ground_truth"]["gone"],
         expected["gone_distinct"]),
    ]


def edit_figures(r):
    rows = []
    for row, expected in zip(r["edits"]["edits"], r["edits"]["expected"]["edits"]):
        rows.append(("edits after %ds: rejected" % row["delay_s"],
                     row["rejected_changed"] + row["rejected_gone"], expected["rejected"]))
        rows.append(("edits after %ds: gone" % row["delay_s"], row["rejected_gone"],
                     expected["gone"]))
    return rows


def usable_cpus():
    """The CPUs this process may run on (its affinity where the platform tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@pytest.fixture(scope="module")
def many_seeds():
    """200 seeds of the TINY day, across the processes the machine has (the figures do not
    depend on how many: test_same_counts_in_one_process_and_in_two)."""
    return run(list(range(1, 201)), TINY, processes=usable_cpus())


def passage_figures(p, mode):
    """(label, measured, expected) of one seed's passages at the end of a checked day: each
    verdict against the closed form given the day's saves and against the model's."""
    end = p[mode]["hourly"][-1]
    rows = []
    for kind, label in (("expected_given_saves", "given the saves"), ("expected", "model")):
        expected = p[mode][kind][-1]
        for verdict in ("intact", "rewritten", "retitled_intact", "retitled_rewritten"):
            rows.append(("%s: passage %s (%s)" % (mode, verdict, label), end[verdict],
                         expected[verdict]))
    return rows


@pytest.mark.slow
def test_each_measured_mean_lies_within_four_standard_errors_of_its_expectation(many_seeds):
    per_seed = many_seeds["per_seed"]
    assert many_seeds["check_mismatches"] == []
    rows = {}
    for r, p in zip(per_seed, many_seeds["passages"]["per_seed"]):
        assert p["seed"] == r["seed"]
        for label, measured, expected in figures(r, "zipf") + figures(r, "uniform") + \
                edit_figures(r) + passage_figures(p, "zipf") + passage_figures(p, "uniform"):
            rows.setdefault(label, []).append((measured, expected))
    n = len(per_seed)
    for label, pairs in rows.items():
        # Each seed's measured count minus its own expectation has mean 0 under the model.
        mean, se = mean_and_se([m - e for m, e in pairs])
        # A mean of n counts moves in steps of 1/n: a figure expected to be nearly 0 (an edit
        # 10 s after its read finding the article gone) gets that step as slack.
        assert abs(mean) <= 4 * se + 1.0 / n, (label, mean, se)
        expected_mean = sum(e for _, e in pairs) / n
        if label.endswith(("position 1", "answers with a stale citation", "stale distinct",
                           "passage intact (given the saves)")):
            # The tolerance has teeth: four standard errors are a small part of the figure.
            assert 4 * se < 0.2 * expected_mean, (label, se, expected_mean)


@pytest.mark.slow  # the 200-seed run
def test_expectations_from_the_parameters_alone_match_the_control(many_seeds):
    """The control's expectation needs no observation at all: every article has q = 1/N."""
    q, saves = 1.0 / TINY.articles, TINY.saves
    # The closed form for a read time uniform over the day, computed here, not by sim.py.
    closed = 1 - (1 - (1 - q) ** (saves + 1)) / ((saves + 1) * q)
    assert abs(many_seeds["expected"]["model"]["uniform_saves_any_article"] - closed) < 1e-4
    diffs = [r["uniform"]["hourly"][-1]["stale"] - closed * r["uniform"]["hourly"][-1]["citations"]
             for r in many_seeds["per_seed"]]
    mean, se = mean_and_se(diffs)
    assert abs(mean) <= 4 * se
    # The same tolerance rejects the wrong model: Zipf's top citations are not stale at the
    # uniform rate (popular articles are saved more often).
    wrong = [r["zipf"]["by_position"][0]["stale"] - closed * r["zipf"]["by_position"][0][
        "citations"] for r in many_seeds["per_seed"]]
    mean, se = mean_and_se(wrong)
    assert mean > 4 * se


def test_closed_forms_are_the_model_averaged_over_read_times():
    saves = 300
    for q in (1 / 400, 0.01, 0.11):
        steps = 20000
        average = sum(p_touched(q, (i + 0.5) / steps, saves) for i in range(steps)) / steps
        assert abs(p_touched_by_end(q, saves) - average) < 1e-6
    # One save on an article of chance q within the whole day: q exactly.
    assert abs(p_touched(0.2, 1.0, 1) - 0.2) < 1e-12
    assert p_touched_by_end(0.0, saves) == 0.0
    weights = zipf_weights(400, 0.9)
    assert abs(sum(weights) - 1) < 1e-12 and round(sum(weights[:10]), 3) == 0.367


def test_expectations_do_not_read_what_the_run_measured(monkeypatch):
    """The expectations see which articles were cited when, never a measured status."""
    healthy = run([6], TINY, processes=1)
    plant_saves_that_keep_their_version(monkeypatch)
    broken = run([6], TINY, processes=1)
    assert broken["staleness"] != healthy["staleness"]
    assert broken["expected"]["zipf"] == healthy["expected"]["zipf"]
    assert broken["expected"]["uniform"] == healthy["expected"]["uniform"]
    assert broken["expected_by_hour"] == healthy["expected_by_hour"]
    assert broken["passages"]["zipf"]["hourly"] != healthy["passages"]["zipf"]["hourly"]
    for mode in ("zipf", "uniform"):
        for kind in ("expected", "expected_given_saves"):
            assert broken["passages"][mode][kind] == healthy["passages"][mode][kind]


def test_topical_popularity_moves_only_the_ranking():
    independent = draw_plan(3, Config())
    topical = draw_plan(3, Config(popularity="topical"))
    assert topical.titles == independent.titles
    assert [(q.t_us, independent.ranking.index(q.target)) for q in independent.questions] == \
        [(q.t_us, topical.ranking.index(q.target)) for q in topical.questions]
    assert sorted(topical.ranking) == list(range(400)) and topical.ranking != independent.ranking
    subjects = [topical.subjects[a][1] for a in topical.ranking]
    runs = [s for i, s in enumerate(subjects) if i == 0 or subjects[i - 1] != s]
    assert len(runs) == len(set(subjects))  # each subject's articles on consecutive ranks


def test_paraphrased_questions_are_action_and_subject_only(monkeypatch):
    asked = []
    answer = Agent.answer

    def recording(self, question_text):
        asked.append(question_text)
        return answer(self, question_text)

    monkeypatch.setattr(Agent, "answer", recording)
    config = Config(articles=60, questions=24, saves=60, hours=4, questions_from="paraphrase")
    plan = draw_plan(5, config)
    DayRun(plan, config).run()
    actions = {a.lower() for a in ACTIONS}
    for question, text in zip(plan.questions, asked):
        subject = plan.subjects[question.target][1].lower()
        assert text.endswith(" " + subject) and text[:-len(subject) - 1] in actions
    assert len(asked) == config.questions


# -- each check strategy on a hand-made timeline -----------------------------------------------


class Timeline:
    """A tiny knowledge base and an agent, with a clock moved by hand."""

    def __init__(self):
        self.clock = SimClock()
        self.store = KBStore(clock=self.clock)
        self.store.create_knowledge_base(KB_ID)
        self.ids = {}
        for title in ("Reset passwords for admins", "Export invoices in bulk",
                      "Rotate API keys on iOS"):
            self.ids[title] = self.store.create_article(
                KB_ID, title, "How to %s. Steps follow." % title.lower())
        self.agent = Agent(self.store)

    def at(self, minutes):
        self.clock.t_us = minutes * 60 * 1000000

    def checks(self):
        return (self.agent.check_title_only(), self.agent.check_reread(),
                self.agent.check_poll())


@pytest.fixture
def timeline():
    t = Timeline()
    yield t
    t.store.close()


def cited(timeline, title):
    return [c for c in timeline.agent.citations if c.article_id == timeline.ids[title]][0]


def test_fresh_citations_are_fresh_everywhere(timeline):
    timeline.at(1)
    timeline.agent.answer("reset passwords admins")
    for found in timeline.checks():
        assert set(found.values()) == {"fresh"}


def test_content_only_edit_is_caught_by_reread_and_poll_never_by_title(timeline):
    title = "Reset passwords for admins"
    timeline.at(1)
    timeline.agent.answer("reset passwords admins")
    timeline.at(30)
    timeline.store.save_article(KB_ID, timeline.ids[title], content="New steps.")
    title_only, reread, poll = timeline.checks()
    key = cited(timeline, title).key
    assert title_only[key] == "fresh"
    assert reread[key] == "changed" and poll[key] == "changed"


def test_retitle_is_caught_by_all_three(timeline):
    title = "Export invoices in bulk"
    timeline.at(1)
    timeline.agent.answer("export invoices bulk")
    timeline.at(30)
    timeline.store.save_article(KB_ID, timeline.ids[title], title="Export every invoice")
    title_only, reread, poll = timeline.checks()
    key = cited(timeline, title).key
    assert (title_only[key], reread[key], poll[key]) == ("stale", "changed", "changed")


def test_unpublish_is_gone_and_republish_is_changed(timeline):
    title = "Rotate API keys on iOS"
    timeline.at(1)
    timeline.agent.answer("rotate api keys ios")
    key = cited(timeline, title).key
    timeline.at(30)
    timeline.store.unpublish(KB_ID, timeline.ids[title])
    title_only, reread, poll = timeline.checks()
    assert (title_only[key], reread[key], poll[key]) == ("stale", "gone", "gone")
    timeline.at(90)
    timeline.store.publish(KB_ID, timeline.ids[title])
    title_only, reread, poll = timeline.checks()
    assert (title_only[key], reread[key], poll[key]) == ("fresh", "changed", "changed")


def test_poll_rereads_only_cited_articles_that_changed(timeline):
    timeline.at(1)
    timeline.agent.answer("reset passwords admins")
    timeline.agent.check_poll()
    before = dict(timeline.agent.cost["poll"])
    uncited = [i for t, i in timeline.ids.items()
               if i not in {c.article_id for c in timeline.agent.citations}]
    timeline.at(30)
    for article_id in uncited:
        timeline.store.save_article(KB_ID, article_id, content="Changed elsewhere.")
    timeline.agent.check_poll()
    after = timeline.agent.cost["poll"]
    assert after["events"] - before["events"] == len(uncited)
    assert after["articles_read"] == before["articles_read"]
    assert after["pages"] - before["pages"] == 1


def test_citation_given_after_the_change_is_not_stale(timeline):
    title = "Reset passwords for admins"
    timeline.at(1)
    timeline.agent.answer("export invoices bulk")
    timeline.agent.check_poll()
    timeline.at(10)
    timeline.store.save_article(KB_ID, timeline.ids[title], content="Changed first.")
    timeline.at(20)
    timeline.agent.answer("reset passwords admins")  # cites the version after the change
    _, reread, poll = timeline.checks()
    key = cited(timeline, title).key
    assert reread[key] == "fresh" and poll[key] == "fresh"


# -- failure is loud ---------------------------------------------------------------------------


def test_a_strategy_that_misses_a_change_fails_the_run(monkeypatch, capsys):
    def blind_poll(self):
        return {c.key: "fresh" for c in self.citations}

    monkeypatch.setattr(Agent, "check_poll", blind_poll)
    status = main(["--seeds", "4", "--articles", "60", "--questions", "24", "--saves", "60",
                   "--hours", "4", "--processes", "1"])
    assert status == 1
    err = capsys.readouterr().err
    assert "check failed: seed 4, hour" in err and "by poll" in err and "support/art-" in err


def plant_saves_that_keep_their_version(monkeypatch):
    """Make every store the simulation opens one whose people's saves keep the old version.

    The one place this file fakes the store, and only through its public results: after a
    person's save the content and title change, but every read, search hit and editor view
    still shows the version the article had before its first save.
    """
    class KeepsOldVersions(KBStore):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.kept = {}

        def save_article(self, kb_id, article_id, **changes):
            before = super().get_article(kb_id, article_id)["updated_at"]
            self.kept.setdefault(article_id, before)
            super().save_article(kb_id, article_id, **changes)
            return self.kept[article_id]

        def get_article(self, kb_id, article_id):
            return self._old(super().get_article(kb_id, article_id))

        def call_tool(self, name, arguments, *, granted):
            return self._old(super().call_tool(name, arguments, granted=granted))

        def _old(self, value):
            if isinstance(value, list):
                return [self._old(v) for v in value]
            if not isinstance(value, dict):
                return value
            value = {k: self._old(v) for k, v in value.items()}
            if value.get("article_id") in self.kept and "updated_at" in value:
                value["updated_at"] = self.kept[value["article_id"]]
            return value

    monkeypatch.setattr(sim_day, "KBStore", KeepsOldVersions)


def test_a_store_whose_saves_keep_the_old_version_fails_the_run(monkeypatch, capsys):
    healthy = run([4], SMALL, processes=1)
    plant_saves_that_keep_their_version(monkeypatch)
    status = main(["--seeds", "4", "--articles", "60", "--questions", "24", "--saves", "60",
                   "--hours", "4", "--processes", "1"])
    assert status == 1
    err = capsys.readouterr().err
    assert "is changed by the schedule, fresh by the database" in err
    broken = run([4], SMALL, processes=1)
    det = broken["detection"]
    # The database, re-read and poll agree with each other, as they did before the oracle: the
    # rows they all read are wrong. Only the schedule, which reads no row, sees the saves.
    assert det["ground_truth"] == det["reread"] == det["poll"]
    assert det["ground_truth"]["stale_distinct"] < healthy["detection"]["ground_truth"][
        "stale_distinct"]
    assert det["schedule"]["false_stale"] > 0
    assert not healthy["check_mismatches"]
    # The edit experiment's verdicts are checked against the schedule too.
    assert any("edit of answer" in line and "by the schedule" in line
               for line in broken["check_mismatches"])


def test_oracle_on_a_hand_made_schedule():
    def change(t, article, kind, title):
        save = Save(t, kind, article, article, (0.0,) * 9)
        return Change((t, SAVE_STEP, t), article, save, title, "Reset")

    titles = ["Reset a", "Reset b"]
    oracle = Oracle(titles, [change(10, 0, "content", "Reset a"),
                             change(20, 0, "content_title", "Sync a"),
                             change(30, 0, "content_title", "Reset a"),
                             change(40, 1, "unpublish", "Reset b"),
                             change(50, 1, "content", "Reset b")])

    def read(t):
        return (t, QUESTION_STEP, 0)

    def check(t):
        return (t, CHECK_STEP, 0)

    assert oracle.status(0, read(10), check(15)) == ("fresh", None)  # the save came first
    assert oracle.status(0, read(5), check(15)) == ("changed", "content_only")
    assert oracle.status(0, read(15), check(25)) == ("changed", "retitled")
    assert oracle.status(0, read(15), check(35)) == ("changed", "content_only")  # back again
    assert oracle.status(1, read(5), check(45)) == ("gone", "gone")
    assert oracle.status(1, read(5), check(99)) == ("gone", "gone")  # a draft save: still gone
    assert oracle.title_at(0, read(25)) == "Sync a"
    own = [(60, EDIT_STEP, 3)]
    assert oracle.edit(0, read(35), (70, EDIT_STEP, 4), own) == "changed"
    assert oracle.edit(0, read(35), (55, EDIT_STEP, 4), own) == "accepted"
    assert oracle.edit(1, read(35), (45, EDIT_STEP, 4), own) == "gone"


@pytest.mark.parametrize("argv, needle", [
    (["--seeds", "5-1"], "--seeds"),
    (["--seeds", "one"], "--seeds"),
    (["--seeds", ""], "--seeds"),
    (["--articles", "1"], "--articles must be from 2"),
    (["--questions", "0"], "--questions must be from 1"),
    (["--saves", "-3"], "--saves must be from 0"),
    (["--hours", "x"], "--hours takes a number"),
    (["--zipf", "-1"], "--zipf must be from 0"),
    (["--delays", "10x"], "--delays"),
    (["--delays", "9d"], "--delays"),
    (["--processes", "0"], "--processes must be from 1"),
])
def test_bad_arguments_get_a_clear_error(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_unusable_paths_are_refused_before_any_work(tmp_path, monkeypatch, capsys):
    def no_run(*args, **kwargs):
        raise AssertionError("the day ran before its arguments were checked")

    monkeypatch.setattr(sim_cli, "run", no_run)
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    for argv, needle in (
            (["--json", str(tmp_path / "missing" / "out.json")], "--json: cannot write"),
            (["--json", str(tmp_path)], "--json: cannot write"),
            (["--db-dir", str(a_file / "dbs")], "--db-dir: cannot keep databases in"),
            (["--articles", str(MAX_ARTICLES + 1)], "to %d (the distinct titles"
             % MAX_ARTICLES)):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert needle in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # no probe left behind


def test_every_title_of_the_vocabulary_can_be_drawn(monkeypatch):
    monkeypatch.setattr(sim_plan, "ACTIONS", ("Reset", "Sync"))
    monkeypatch.setattr(sim_plan, "SUBJECTS", ("invoices",))
    monkeypatch.setattr(sim_plan, "AUDIENCES", ("for admins", "on iOS"))
    monkeypatch.setattr(sim_plan, "SURFACES", ("in Settings",))
    titles, _ = make_titles(random.Random(3), 8)
    assert len(set(titles)) == 8


def test_a_closed_stdout_ends_quietly():
    proc = subprocess.Popen(
        [sys.executable, "sim.py", "--seeds", "1", "--articles", "60", "--questions", "24",
         "--saves", "60", "--hours", "4", "--per-seed", "--processes", "1"],
        cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first table is printed
    err = proc.stderr.read().decode("utf-8")
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_argument_forms():
    assert parse_seeds("1-5") == [1, 2, 3, 4, 5]
    assert parse_seeds("1,3,7") == [1, 3, 7]
    assert parse_seeds("3") == [3]
    assert parse_seeds("2,1-3") == [2, 1, 3]
    assert parse_delays("10s,10m,1h,4h") == (10, 600, 3600, 14400)
    assert parse_delays("30") == (30,)


def test_db_dir_keeps_each_runs_database(tmp_path):
    report = run([2], SMALL, db_dir=str(tmp_path), processes=1)
    names = sorted(p.name for p in tmp_path.glob("*.db"))
    assert names == ["seed2-edits.db", "seed2-uniform.db", "seed2-zipf.db"]
    with KBStore(str(tmp_path / "seed2-zipf.db")) as store:
        assert store.audit() == []
        assert store.head_sequence(KB_ID) > SMALL.articles
        # An unpublish withdraws an article for the rest of the day; later saves edit drafts.
        plan = draw_plan(2, SMALL)
        withdrawn = {c.article for c in people_saves(plan, False)
                     if c.save.kind == "unpublish"}
        with KBStore() as fresh:  # the IDs the run's build gave, in plan order
            ids = fill_store(fresh, plan)
        hidden = {i for i, article_id in enumerate(ids)
                  if not store.get_article(KB_ID, article_id)["published"]}
        assert withdrawn and hidden == withdrawn
    assert report["check_mismatches"] == []


@pytest.mark.slow  # a day's edit experiment
def test_small_edit_experiment_accounts_for_every_edit():
    report = run([1, 2], Config(articles=80, questions=40, saves=120, hours=4),
                 processes=1)
    for row in report["edits"]:
        assert row["edits"] == 20
        assert row["edits"] == (row["accepted_first_try"] + row["rejected_changed"]
                                + row["rejected_gone"])
        assert row["retries_succeeded"] == row["rejected_changed"]
    idem = report["idempotency"]
    accepted = sum(r["accepted_first_try"] + r["retries_succeeded"] for r in report["edits"])
    assert idem["successful_edits"] == accepted == idem["replays_marked"]


@pytest.mark.slow  # a day on each engine
def test_the_day_on_postgresql_counts_what_it_counts_on_sqlite(postgres):
    """The same seeds on both engines: 0 mismatches, and the same figures (same ranking)."""
    config = Config(articles=60, questions=24, saves=60, hours=4)
    on_sqlite = run([3], config, processes=1)
    on_postgres = run([3], config, processes=1, db_url=postgres[1])
    assert on_postgres["check_mismatches"] == []
    assert without_timing(on_postgres) == without_timing(on_sqlite)


def test_sim_refuses_a_db_that_is_no_postgresql_url(tmp_path):
    done = subprocess.run([sys.executable, "sim.py", "--db", str(tmp_path / "x.db"),
                           "--seeds", "1"], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "not a postgresql:// URL" in done.stderr
    assert done.stdout == ""
