"""One run of a seed's day on one store: people's saves, the agent's answers, and its hourly
checks or its edits, in the order of the day.
"""

import os
import sched
from typing import Any

from ..store import KBStore
from .agent import PASSAGE_STRATEGIES, Agent
from .checks import HourlyChecks
from .edit_trial import EditTrial
from .expectations import (
    expected_by_hour,
    expected_checks,
    expected_edits,
    expected_passages,
    save_chances,
)
from .model import CHECK_STEP, EDIT_STEP, HOUR_US, KB_ID, QUESTION_STEP, SimClock
from .oracle import Oracle
from .plan import people_saves, rewrite

# The ways of finding out about passages each checked day uses. The cost of finding out is the
# Zipf day's, as in table 3; the control leaves out check_citations on every citation, which
# would cost its CPU for a figure nobody reads (every way's verdicts must agree anyway).
ZIPF_WAYS = PASSAGE_STRATEGIES
CONTROL_WAYS = tuple(way for way in PASSAGE_STRATEGIES if way != "check_all")


def fill_store(store, plan):
    """The knowledge base at the start of the day: every article published; returns their IDs."""
    store.create_knowledge_base(KB_ID, "Support")
    return store.create_articles(KB_ID, list(zip(plan.titles, plan.bodies)))


def start_of_day(plan):
    """The start of the day built once in memory: its database image (``None`` where the store
    cannot copy itself) and the articles' IDs."""
    # Lexical always: the article's measurements are of the lexical search, and the tables
    # must not depend on whether the [semantic] extra is installed.
    store = KBStore(":memory:", clock=SimClock(), semantic=False)
    try:
        article_ids = fill_store(store, plan)
        return store.image(), article_ids
    finally:
        store.close()


class DayRun:
    """One seed's day on one store: people's saves, the agent's answers, checks or edits."""

    def __init__(self, plan, config, *, uniform=False, checks=True, edits=False, db_path=None,
                 start=None):
        self.plan, self.config = plan, config
        self.uniform, self.checks, self.edits = uniform, checks, edits
        self.clock = SimClock()
        self.article_ids = []
        if db_path is not None and "://" not in db_path and os.path.exists(db_path):
            os.remove(db_path)
        if start is not None and start.image is not None and db_path is None:
            self.store = KBStore.from_image(start.image, clock=self.clock, semantic=False)
            self.article_ids = list(start.article_ids)
        else:
            self.store = KBStore(db_path or ":memory:", clock=self.clock, create=True,
                                 semantic=False)
        self.agent = Agent(self.store, passages=checks)
        self.changes = people_saves(plan, uniform)
        self.oracle = Oracle(plan.titles, self.changes, plan.bodies, plan.subjects)
        self.index_of = {}
        self.actions = [action for action, _ in plan.subjects]  # each title's action now
        # Per citation: (article index, step of the read).
        self.reads: list[tuple[int, tuple[int, int, int]]] = []
        self.first_hit_is_target = 0
        self.mismatches: list[Any] = []
        self.hourly_checks = HourlyChecks(self.store, self.agent, self.oracle, self.reads,
                                          self.mismatches, seed=plan.seed, uniform=uniform,
                                          hours=config.hours,
                                          ways=CONTROL_WAYS if uniform else ZIPF_WAYS)
        self.edit_trial = EditTrial(self.store, self.agent, self.oracle, self.reads,
                                    self.mismatches, self.clock, plan, config.delays)

    def run(self):
        """Play the day in time order; returns this run's results."""
        if not self.article_ids:
            self.article_ids = fill_store(self.store, self.plan)
        self.index_of = {article_id: i for i, article_id in enumerate(self.article_ids)}
        self.clock.t_us = 0
        day = sched.scheduler(self.clock.time_us, self.clock.advance)
        self._schedule(day)
        day.run()
        self.store.close()
        return self._results()

    def _schedule(self, day):
        """Enter every step of the day: people's saves, questions, and the edits or the checks."""
        for change in self.changes:
            _enter(day, change.step, self._save, change)
        for i, question in enumerate(self.plan.questions):
            _enter(day, (question.t_us, QUESTION_STEP, i), self._question, i, question)
            if self.edits:
                delay = self.config.delays[i % len(self.config.delays)]
                edit_at = question.t_us + delay * 1000000
                _enter(day, (edit_at, EDIT_STEP, i), self.edit_trial.edit, i, delay)
        if self.checks:
            for hour in range(1, self.config.hours + 1):
                _enter(day, (hour * HOUR_US, CHECK_STEP, hour), self.hourly_checks.check, hour)

    def _results(self):
        """This run's counts, and the closed-form expectations of what it cited when."""
        q = save_chances(self.plan, self.config, self.uniform)
        day_us = self.config.hours * HOUR_US
        if self.checks:
            expected = expected_checks(
                q, [(a, step[0]) for a, step in self.reads], self.agent.answers,
                [(a, self.oracle.version(a, step)) for a, step in self.reads],
                len(self.plan.saves), day_us)
        else:
            expected = {"edits": expected_edits(q, self.edit_trial.log, self.config.delays,
                                                len(self.plan.saves), day_us)}
        results = {
            "expected": expected,
            "hourly": self.hourly_checks.hourly,
            "detection": self.hourly_checks.detection,
            "by_position": self.hourly_checks.by_position,
            "first_hit_is_target": self.first_hit_is_target,
            "cost": self.agent.cost,
            "edits": [self.edit_trial.rows[d] for d in self.config.delays],
            "idempotency": self.edit_trial.idempotency,
            "mismatches": self.mismatches,
        }
        if self.checks:
            # Kept apart from the six tables' figures: the runner files them under their own key.
            saves, hours = len(self.plan.saves), self.config.hours
            counts = [self.plan.bodies[a].count("\n\n") + 1 for a, _ in self.reads]
            checks = self.hourly_checks
            results["passages"] = {
                "hourly": checks.passage_hourly,
                "expected_given_saves": checks.passage_expected,
                "expected": expected_passages(q, self.reads, counts, saves, day_us, hours),
                "expected_by_hour": expected_by_hour(q, self.reads, self.agent.answers, saves,
                                                     day_us, hours),
                "cost": self.agent.passage_costs(self.hourly_checks.ways),
                "unmarked": sum(1 for p in self.agent.passages if p is not None and not p.marked),
            }
        return results

    def _save(self, change):
        """A person's save, last writer wins, on what the editor shows now.

        Saving a withdrawn article edits its draft and leaves it withdrawn (the store writes no
        event, as agents cannot see it); an unpublish of an article already withdrawn changes
        nothing.
        """
        article_id = self.article_ids[change.article]
        save = change.save
        self.actions[change.article] = change.action
        if save.kind == "unpublish":
            self.store.unpublish(KB_ID, article_id)
            return
        current = self.store.get_article(KB_ID, article_id)
        action, subject = self.plan.subjects[change.article]
        paragraphs = current["content"].split("\n\n")
        index, text = rewrite(save, len(paragraphs), subject, action)
        paragraphs[index] = text
        title = change.title if save.kind == "content_title" else None
        self.store.save_article(KB_ID, article_id, content="\n\n".join(paragraphs), title=title)

    def _question(self, i, question):
        """The agent answers a question made of its target article's current title words (or,
        paraphrased, of its action and subject only)."""
        target_id = self.article_ids[question.target]
        if self.config.questions_from == "paraphrase":
            query = "%s %s" % (self.actions[question.target],
                               self.plan.subjects[question.target][1])
        else:
            query = self.store.get_article(KB_ID, target_id)["title"]
        first = len(self.agent.citations)
        cited = self.agent.answers[self.agent.answer(query.lower())]
        step = (question.t_us, QUESTION_STEP, i)
        for citation in self.agent.citations[first:]:
            self.reads.append((self.index_of[citation.article_id], step))
        if cited and self.agent.citations[cited[0]].article_id == target_id:
            self.first_hit_is_target += 1


def _enter(day, step, action, *argument):
    """Schedule ``action(*argument)`` on the scheduler ``day`` at ``step``: (t_us, rank, index)."""
    t_us, rank, index = step
    # The index goes into the priority too: on a tie of time and priority, sched keeps the order
    # of entry from Python 3.10 on but not on 3.9, and the day's order must be the same on all.
    day.enterabs(t_us, (rank, index), action, argument)
