"""The hourly checks: every citation given so far, checked the agent's three ways and read from
the database's own rows, must match the oracle's truth, and so must what each of four ways of
finding out says of every stale citation's passage; at the last hour, the day's tallies.
"""

from typing import Any, Optional

from ..validation import shown
from .agent import PASSAGE_STRATEGIES
from .expectations import p_passage_survives, rounded
from .model import CHECK_STEP, CITATIONS_PER_ANSWER, HOUR_US, KB_ID
from .passages import STALE_VERDICTS


class HourlyChecks:
    """One day's hourly checks and what they found: a row an hour, and at the last hour the
    staleness by the citation's place in its answer and what each strategy detected."""

    def __init__(self, store, agent, oracle, reads, mismatches, *, seed, uniform, hours,
                 ways=PASSAGE_STRATEGIES):
        self.store, self.agent, self.oracle = store, agent, oracle
        self.reads = reads  # the day's: per citation, (article index, step of the read)
        self.mismatches = mismatches  # the day's, shared with the edit trial
        self.seed, self.uniform, self.hours = seed, uniform, hours
        self.hourly = []
        self.detection = None
        self.by_position = None
        # The passages: a row an hour of what the agent found, and of what the schedule's
        # saves make of it in expectation; how many citations' passages were checked against
        # the schedule's text of the version read.
        self.passage_hourly, self.passage_expected = [], []
        self.passages_checked = 0
        self.ways = ways  # the ways of finding out about passages this day's checks use

    def check(self, hour):
        """Check every citation so far three ways, and its passage four; all must match the
        schedule's truth."""
        agent = self.agent
        truth, cause = self._ground_truth()
        title_only = agent.check_title_only()
        reread = agent.check_reread()
        poll = agent.check_poll()
        schedule, schedule_cause = self._schedule_truth(hour)
        by_key: dict[Any, Any] = {}
        for i, citation in enumerate(agent.citations):
            by_key.setdefault(citation.key, schedule[i])
        self._compare(hour, schedule, schedule_cause, (
            ("the database", truth, cause), ("re-read", reread, None), ("poll", poll, None)))
        if "check_all" in self.ways:
            agent.check_citations_all()
        agent.check_citations_polled()
        self._passages(hour, schedule)
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
        if hour == self.hours:
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

    def _passages(self, hour, schedule):
        """Each citation's passage verdict by every way must be the schedule's; a row of what
        the agent found (polling, then asking check_citations about what changed), and of the
        expectation given the schedule's saves: a save rewrites one of the article's k
        paragraphs, so a passage outlives n saves with chance ((k-1)/k)^n."""
        agent, oracle = self.agent, self.oracle
        now = (hour * HOUR_US, CHECK_STEP, hour)
        found = {v: 0 for v in STALE_VERDICTS}
        expected = dict.fromkeys(STALE_VERDICTS, 0.0)
        for i, (article, read) in enumerate(self.reads):
            citation, passage = agent.citations[i], agent.passages[i]
            name = "%s (answer %d)" % ("/".join(citation.key), citation.answer + 1)
            if passage is None:
                if i >= self.passages_checked:
                    self._mismatch(hour, "the agent's search and read of %s gave no passage"
                                   % name)
                continue
            if i >= self.passages_checked:  # a new citation: its passage as the plan wrote it
                paragraphs = oracle.paragraphs_at(article, read)
                want = (paragraphs[passage.index] if passage.index < len(paragraphs)
                        else "no paragraph %d" % passage.index)
                if want != passage.text:
                    self._mismatch(hour, "paragraph %d of %s, its answer's passage, is %s by "
                                   "the schedule, %s by the agent's search and read"
                                   % (passage.index, name, shown(want), shown(passage.text)))
            # The schedule's status is at hand; only a changed citation needs its paragraphs.
            truth = (schedule[i] if schedule[i] != "changed"
                     else oracle.passage(article, read, now, passage.index))
            for strategy in self.ways:
                got = agent.verdicts[strategy][i]
                if got != truth:
                    self._mismatch(hour, "the passage of %s is %s by the schedule, %s by %s"
                                   % (name, truth, got, strategy))
            got = agent.verdicts["poll_check"][i]
            if got in found:
                found[got] += 1
            if schedule[i] == "gone":
                expected["gone"] += 1
            elif schedule[i] == "changed":
                k = len(oracle.paragraphs_at(article, read))
                kept = p_passage_survives(
                    k, oracle.version(article, now) - oracle.version(article, read))
                prefix = "retitled_" if truth.startswith("retitled_") else ""
                expected[prefix + "intact"] += kept
                expected[prefix + "rewritten"] += 1.0 - kept
        self.passages_checked = len(self.reads)
        self.passage_hourly.append(dict(hour=hour, stale=sum(found.values()), **found))
        self.passage_expected.append(dict(
            hour=hour, stale=rounded(sum(expected.values())),
            **{k: rounded(v) for k, v in expected.items()}))

    def _mismatch(self, hour, text):
        self.mismatches.append("seed %d, hour %d, %s: %s" % (
            self.seed, hour, "uniform" if self.uniform else "zipf", text))

    def _schedule_truth(self, hour):
        """Status and cause of every citation by the oracle: ``{citation index: ...}`` twice."""
        now = (hour * HOUR_US, CHECK_STEP, hour)
        status: dict[int, str] = {}
        cause: dict[int, Optional[str]] = {}
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
                    % (self.seed, hour, "uniform" if self.uniform else "zipf",
                       "/".join(key), want, got, name))

    def _ground_truth(self):
        """Status and cause of every distinct citation, from the database's own rows."""
        truth: dict[Any, str] = {}
        cause: dict[Any, Optional[str]] = {}
        rows: dict[str, Any] = {}
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
