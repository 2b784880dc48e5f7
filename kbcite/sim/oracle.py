"""The oracle: what every check and edit must find, from the schedule of people's saves alone.
It never calls the store, so a store that answers wrongly cannot also make the truth wrong.
"""

import bisect
from typing import Any

from .passages import changed_verdict
from .plan import rewrite


def any_between(steps, after, before):
    """Whether sorted ``steps`` holds one strictly between ``after`` and ``before``."""
    return bisect.bisect_right(steps, after) < bisect.bisect_left(steps, before)


class Oracle:
    """What every check and edit must find, from the schedule of people's saves alone.

    It never calls the store: it knows when each person saved which article and how, and is
    told where in the day the agent read each citation and when its own edits landed. Every
    article starts published; an unpublish withdraws it for the rest of the day (a later save
    edits the draft, and nobody publishes it again), so a citation is gone once an unpublish
    follows its read, changed once any other save does, and fresh otherwise.
    """

    def __init__(self, titles, changes, bodies=None, subjects=None):
        self.titles = titles
        self.changes, self.bodies, self.subjects = changes, bodies, subjects
        self.texts = None  # article -> (steps, paragraphs after each): made when first asked
        self.steps: dict[int, list[int]] = {}
        self.withdrawn: dict[int, list[int]] = {}
        self.retitled: dict[int, list[tuple[int, str]]] = {}
        for change in changes:
            self.steps.setdefault(change.article, []).append(change.step)
            if change.save.kind == "unpublish":
                self.withdrawn.setdefault(change.article, []).append(change.step)
            elif change.save.kind == "content_title":
                self.retitled.setdefault(change.article, []).append((change.step, change.title))

    def version(self, article, step):
        """How many people's saves the article has had before ``step``: its version's number."""
        return bisect.bisect_left(self.steps.get(article, ()), step)

    def title_at(self, article, step):
        """The article's title just before ``step``."""
        retitles = self.retitled.get(article, ())
        i = bisect.bisect_left(retitles, (step,))
        return retitles[i - 1][1] if i else self.titles[article]

    def status(self, article, read, now):
        """``(status, cause)`` at step ``now`` of a citation of ``article`` read at ``read``."""
        if any_between(self.withdrawn.get(article, ()), read, now):
            return "gone", "gone"
        if not any_between(self.steps.get(article, ()), read, now):
            return "fresh", None
        if self.title_at(article, now) != self.title_at(article, read):
            return "changed", "retitled"
        return "changed", "content_only"

    def edit(self, article, read, at, own_edits):
        """``accepted``, ``changed`` or ``gone``: an edit at step ``at`` with the version read
        at step ``read``; ``own_edits`` are the steps of the agent's other edits of the article,
        each of which changes it unless it is gone."""
        status, _ = self.status(article, read, at)
        if status == "fresh" and any_between(own_edits, read, at):
            return "changed"
        return "accepted" if status == "fresh" else status

    # The passages. Only people write on the checked days, so an article's paragraphs at any
    # step follow from its body and the plan's saves; on the edit day the agent's own edits add
    # paragraphs, and nothing there asks.

    def paragraphs_at(self, article, step):
        """The article's paragraphs just before ``step``, from its body and the plan's saves."""
        if self.texts is None:
            self.texts = self._replay()
        steps, versions = self.texts.get(article, ((), ()))
        i = bisect.bisect_left(steps, step)
        return versions[i - 1] if i else tuple(self.bodies[article].split("\n\n"))

    def passage(self, article, read, now, index):
        """The verdict (``passages.VERDICTS``) at step ``now`` of a citation of ``article`` read
        at ``read`` whose answer relied on paragraph ``index`` of the version read."""
        status, cause = self.status(article, read, now)
        if status != "changed":
            return status
        text = self.paragraphs_at(article, read)[index]
        return changed_verdict(cause == "retitled", text in self.paragraphs_at(article, now))

    def _replay(self):
        """Every article's paragraphs after each of its content saves, as the people wrote them."""
        current: dict[int, Any] = {}
        texts: dict[int, Any] = {}
        for change in self.changes:
            if change.save.kind == "unpublish":
                continue
            a = change.article
            paras = current.get(a) or self.bodies[a].split("\n\n")
            action, subject = self.subjects[a]
            index, text = rewrite(change.save, len(paras), subject, action)
            paras = paras[:index] + [text] + paras[index + 1:]
            current[a] = paras
            steps, versions = texts.setdefault(a, ([], []))
            steps.append(change.step)
            versions.append(tuple(paras))
        return texts
