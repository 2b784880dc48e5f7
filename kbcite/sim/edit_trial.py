"""The edit trial: after a delay the agent edits each answer's first cited article, sending the
citation's version as ``expected_version``; on a conflict it re-reads and retries once, and it
replays every successful edit with its idempotency key. Every verdict must be the schedule's.
"""

from datetime import timedelta

from ..errors import NotFound, ToolError, VersionConflict
from .model import DAY_START, EDIT_STEP, KB_ID, delay_text


class EditTrial:
    """One day's edits and what came of them: a row of counts a delay, and the replays' tally."""

    def __init__(self, store, agent, oracle, reads, mismatches, clock, plan, delays):
        self.store, self.agent, self.oracle = store, agent, oracle
        self.clock, self.plan = clock, plan
        self.reads = reads  # the day's: per citation, (article index, step of the read)
        self.mismatches = mismatches  # the day's, shared with the hourly checks
        self.own_edits = {}  # article index -> steps of the agent's edits of it, in day order
        self.log = []  # per edit: (delay, article index, step of the read, step of the edit)
        self.rows = {d: _edit_row(d) for d in delays}
        self.idempotency = {"successful_edits": 0, "replays": 0, "replays_marked": 0,
                            "new_events_from_replays": 0}

    def edit(self, i, delay):
        """After the delay, edit the answer's first cited article with the citation's version."""
        row = self.rows[delay]
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
        self.log.append((delay, article, read, at))
        line = "Agent note %d: customers asked about this at %s." % (
            i + 1, plan_time(self.plan.questions[i].t_us))
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


def plan_time(t_us):
    """Wall-clock text of a simulated time, to the minute."""
    return (DAY_START + timedelta(microseconds=t_us)).strftime("%H:%M UTC")


def _edit_row(delay):
    return {"delay_s": delay, "edits": 0, "accepted_first_try": 0, "rejected_changed": 0,
            "rejected_gone": 0, "retries_succeeded": 0, "retries_failed": 0,
            "skipped_no_citation": 0}
