"""One run of a seed's day on one store: people's saves, the agent's answers, and its hourly
checks or its edits, in the order of the day.
"""

import os
import sched
from datetime import timedelta

from ..errors import NotFound, ToolError, VersionConflict
from ..store import KBStore
from .agent import Agent
from .expectations import expected_checks, expected_edits, save_chances
from .model import (CHECK_STEP, CITATIONS_PER_ANSWER, DAY_START, EDIT_STEP, HOUR_US, KB_ID,
                    QUESTION_STEP, SimClock, delay_text)
from .oracle import Oracle
from .plan import make_paragraph, people_saves


def fill_store(store, plan):
    """The knowledge base at the start of the day: every article published; returns their IDs."""
    store.create_knowledge_base(KB_ID, "Support")
    return store.create_articles(KB_ID, list(zip(plan.titles, plan.bodies)))


def start_of_day(plan):
    """The start of the day built once in memory: its database image (``None`` where the store
    cannot copy itself) and the articles' IDs."""
    store = KBStore(":memory:", clock=SimClock())
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
            self.store = KBStore.from_image(start.image, clock=self.clock)
            self.article_ids = list(start.article_ids)
        else:
            self.store = KBStore(db_path or ":memory:", clock=self.clock, create=True)
        self.agent = Agent(self.store)
        self.changes = people_saves(plan, uniform)
        self.oracle = Oracle(plan.titles, self.changes)
        self.index_of = {}
        self.actions = [action for action, _ in plan.subjects]  # each title's action now
        self.reads = []  # per citation: (article index, step of the read)
        self.own_edits = {}  # article index -> steps of the agent's edits of it, in day order
        self.edit_log = []  # per edit: (delay, article index, step of the read, step of the edit)
        self.hourly = []
        self.detection = None
        self.by_position = None
        self.first_hit_is_target = 0
        self.mismatches = []
        self.edit_rows = {d: _edit_row(d) for d in config.delays}
        self.idempotency = {"successful_edits": 0, "replays": 0, "replays_marked": 0,
                            "new_events_from_replays": 0}

    def run(self):
        """Play the day in time order; returns this run's results."""
        if not self.article_ids:
            self.article_ids = fill_store(self.store, self.plan)
        self.index_of = {article_id: i for i, article_id in enumerate(self.article_ids)}
        self.clock.t_us = 0
        day = sched.scheduler(self.clock.time_us, self.clock.advance)
        for change in self.changes:
            _enter(day, change.step, self._save, change)
        for i, question in enumerate(self.plan.questions):
            _enter(day, (question.t_us, QUESTION_STEP, i), self._question, i, question)
            if self.edits:
                delay = self.config.delays[i % len(self.config.delays)]
                _enter(day, (question.t_us + delay * 1000000, EDIT_STEP, i), self._edit, i, delay)
        if self.checks:
            for hour in range(1, self.config.hours + 1):
                _enter(day, (hour * HOUR_US, CHECK_STEP, hour), self._check, hour)
        day.run()
        self.store.close()
        q = save_chances(self.plan, self.config, self.uniform)
        day_us = self.config.hours * HOUR_US
        if self.checks:
            expected = expected_checks(
                q, [(a, step[0]) for a, step in self.reads], self.agent.answers,
                [(a, self.oracle.version(a, step)) for a, step in self.reads],
                len(self.plan.saves), day_us)
        else:
            expected = {"edits": expected_edits(q, self.edit_log, self.config.delays,
                                                len(self.plan.saves), day_us)}
        return {
            "expected": expected,
            "hourly": self.hourly,
            "detection": self.detection,
            "by_position": self.by_position,
            "first_hit_is_target": self.first_hit_is_target,
            "cost": self.agent.cost,
            "edits": [self.edit_rows[d] for d in self.config.delays],
            "idempotency": self.idempotency,
            "mismatches": self.mismatches,
        }

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
        u = save.text_u
        paragraphs = current["content"].split("\n\n")
        paragraphs[min(int(u[0] * len(paragraphs)), len(paragraphs) - 1)] = make_paragraph(
            subject, action, u[1:7])
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

    def _edit(self, i, delay):
        """After the delay, edit the answer's first cited article with the citation's version."""
        row = self.edit_rows[delay]
        if not self.agent.answers[i]:
            row["skipped_no_citation"] += 1
            return
        first = self.agent.answers[i][0]
        citation = self.agent.citations[first]
        article, read = self.reads[first]
        at = (self.clock.t_us, EDIT_STEP, i)
        own = self.own_edits.setdefault(article, [])
        expected = self.oracle.edit(article, read, at, own)
        own.append(at)
        self.edit_log.append((delay, article, read, at))
        line = "Agent note %d: customers asked about this at %s." % (
            i + 1, self.plan_time(self.plan.questions[i].t_us))
        content = self.agent.read_content[(i, 0)] + "\n\n" + line
        row["edits"] += 1
        args = {"knowledge_base_id": KB_ID, "article_id": citation.article_id,
                "content": content, "expected_version": citation.updated_at,
                "idempotency_key": "seed%d-answer%d-try1" % (self.plan.seed, i + 1)}
        try:
            result = self.agent.call("edit_knowledge_article", **args)
            row["accepted_first_try"] += 1
            found = "accepted"
        except VersionConflict:
            row["rejected_changed"] += 1
            found = "changed"
            # The mechanical fix: re-read, re-apply the change to what is there, new version.
            current = self.agent.read(citation.article_id)
            if current is None:
                row["retries_failed"] += 1
                found = "changed, then gone on re-read"
            else:
                args = dict(args, content=current["content"] + "\n\n" + line,
                            expected_version=current["updated_at"],
                            idempotency_key="seed%d-answer%d-try2" % (self.plan.seed, i + 1))
                try:
                    result = self.agent.call("edit_knowledge_article", **args)
                    row["retries_succeeded"] += 1
                except ToolError:
                    row["retries_failed"] += 1
                    found = "changed, then the retry failed"
        except NotFound:
            row["rejected_gone"] += 1
            found = "gone"
        if found != expected:
            self.mismatches.append(
                "seed %d, edit of answer %d after %s: %s by the schedule, %s by the store"
                % (self.plan.seed, i + 1, delay_text(delay), expected, found))
        if found in ("accepted", "changed"):
            self._replay(args, result)

    def _replay(self, args, first):
        """Send a successful edit again with the same key: a marked replay, no new event."""
        stats = self.idempotency
        stats["successful_edits"] += 1
        head = self.store.head_sequence(KB_ID)
        again = self.agent.call("edit_knowledge_article", **args)
        stats["replays"] += 1
        if again.get("replayed") is True and dict(again, replayed=False) == first:
            stats["replays_marked"] += 1
        stats["new_events_from_replays"] += self.store.head_sequence(KB_ID) - head

    @staticmethod
    def plan_time(t_us):
        """Wall-clock text of a simulated time, to the minute."""
        return (DAY_START + timedelta(microseconds=t_us)).strftime("%H:%M UTC")

    def _check(self, hour):
        """Check every citation so far three ways; all must match the schedule's truth."""
        agent = self.agent
        truth, cause = self._ground_truth()
        title_only = agent.check_title_only()
        reread = agent.check_reread()
        poll = agent.check_poll()
        schedule, schedule_cause = self._schedule_truth(hour)
        by_key = {}
        for i, citation in enumerate(agent.citations):
            by_key.setdefault(citation.key, schedule[i])
        self._compare(hour, schedule, schedule_cause, (
            ("the database", truth, cause), ("re-read", reread, None), ("poll", poll, None)))
        stale_keys = {k for k, v in truth.items() if v != "fresh"}
        answers_stale = sum(
            1 for cited in agent.answers
            if any(agent.citations[c].key in stale_keys for c in cited))
        self.hourly.append({
            "hour": hour,
            "citations": len(agent.citations),
            "stale": sum(1 for c in agent.citations if c.key in stale_keys),
            "distinct": len(truth),
            "stale_distinct": len(stale_keys),
            "answers": len(agent.answers),
            "answers_with_stale": answers_stale,
        })
        if hour == self.config.hours:
            self.by_position = [{"position": p + 1, "citations": 0, "stale": 0}
                                for p in range(CITATIONS_PER_ANSWER)]
            for cited in agent.answers:
                for p, c in enumerate(cited):
                    self.by_position[p]["citations"] += 1
                    self.by_position[p]["stale"] += agent.citations[c].key in stale_keys
            self.detection = {
                "ground_truth": self._detected(truth, truth, cause),
                "schedule": self._detected(by_key, truth, cause),
                "title_only": self._detected(title_only, truth, cause),
                "reread": self._detected(reread, truth, cause),
                "poll": self._detected(poll, truth, cause),
            }

    def _schedule_truth(self, hour):
        """Status and cause of every citation by the oracle: ``{citation index: ...}`` twice."""
        now = (hour * HOUR_US, CHECK_STEP, hour)
        status, cause = {}, {}
        for i, (article, read) in enumerate(self.reads):
            status[i], cause[i] = self.oracle.status(article, read, now)
        return status, cause

    def _compare(self, hour, schedule, schedule_cause, sources):
        """Record each citation whose status (or cause) a source gives unlike the schedule."""
        seen = set()
        for i, citation in enumerate(self.agent.citations):
            for name, found, found_cause in sources:
                key = citation.key
                got = found.get(key)
                if got == schedule[i] and (found_cause is None or got != "changed"
                                           or found_cause[key] == schedule_cause[i]):
                    continue
                if (key, name) in seen:
                    continue
                seen.add((key, name))
                want = schedule[i]
                if got == want:  # the same status, another cause
                    want, got = schedule_cause[i], found_cause[key]
                self.mismatches.append(
                    "seed %d, hour %d, %s: citation %s is %s by the schedule, %s by %s"
                    % (self.plan.seed, hour, "uniform" if self.uniform else "zipf",
                       "/".join(key), want, got, name))

    def _ground_truth(self):
        """Status and cause of every distinct citation, from the database's own rows."""
        truth, cause, rows = {}, {}, {}
        for citation in self.agent.citations:
            if citation.key in truth:
                continue
            if citation.article_id not in rows:
                rows[citation.article_id] = self.store.get_article(KB_ID, citation.article_id)
            row = rows[citation.article_id]
            if not row["published"]:
                truth[citation.key], cause[citation.key] = "gone", "gone"
            elif row["updated_at"] != citation.updated_at:
                truth[citation.key] = "changed"
                cause[citation.key] = ("retitled" if row["title"] != citation.title
                                       else "content_only")
            else:
                truth[citation.key], cause[citation.key] = "fresh", None
        return truth, cause

    def _detected(self, found, truth, cause):
        """What one strategy reports stale, counted as citations and distinct, and by cause."""
        stale_keys = {k for k, v in found.items() if v != "fresh"}
        out = {"stale": sum(1 for c in self.agent.citations if c.key in stale_keys),
               "stale_distinct": len(stale_keys),
               "changed": 0, "gone": 0, "content_only": 0, "retitled": 0, "false_stale": 0}
        for key in stale_keys:
            if truth[key] == "fresh":
                out["false_stale"] += 1
                continue
            out[truth[key]] += 1
            if cause[key] != "gone":
                out[cause[key]] += 1
        return out


def _enter(day, step, action, *argument):
    """Schedule ``action(*argument)`` on the scheduler ``day`` at ``step``: (t_us, rank, index)."""
    t_us, rank, index = step
    # The index goes into the priority too: on a tie of time and priority, sched keeps the order
    # of entry from Python 3.10 on but not on 3.9, and the day's order must be the same on all.
    day.enterabs(t_us, (rank, index), action, argument)


def _edit_row(delay):
    return {"delay_s": delay, "edits": 0, "accepted_first_try": 0, "rejected_changed": 0,
            "rejected_gone": 0, "retries_succeeded": 0, "retries_failed": 0,
            "skipped_no_citation": 0}
