"""The passage an answer relied on, found from what the agent saw, and what became of it.

A search hit's snippet is a window of about sixteen words of the article's content (its first
20,000 characters, whitespace collapsed) with each match of a query word marked ``**``. The
**passage** of a citation is the paragraph (an element of ``content.split("\\n\\n")``) of the
content the agent read that holds the snippet's first marked match; where the snippet marks
nothing (the hit matched on its title alone) it is the paragraph the window starts in. It is
recorded when the answer is made, from the hit and the read, never from the plan.

At a check a stale citation's passage is **intact** when its exact text is still one of the
current version's paragraphs, at whatever index, and **rewritten** otherwise: an answer rests on
what the passage says, not on where it stands. (People's saves replace one paragraph in place
and never add or remove one, so on the checked days "anywhere" and "at the same index" differ
only if a save writes a copy of another paragraph.)
"""

import bisect
from dataclasses import dataclass

from ..changes import apply, paragraphs

# What a check makes of one citation, in the seventh table's order: fresh; changed under the
# same title with the passage intact or rewritten; retitled (a retitle rewrites a paragraph
# too), passage intact or not; gone.
VERDICTS = ("fresh", "intact", "rewritten", "retitled_intact", "retitled_rewritten", "gone")
STALE_VERDICTS = VERDICTS[1:]
# A changed citation whose answer's passage was never found (the hit showed another version
# than the read, or a snippet that is not the content's): the check cannot tell, and says so.
UNKNOWN = "unknown"

# The snippet's marks and the ellipses it puts where its window cuts the content.
MARK = "**"
ELLIPSIS = "\u2026"


@dataclass(frozen=True)
class Passage:
    """The paragraph an answer relied on: its index in the version read, and its text."""

    index: int
    text: str
    marked: bool  # False: the snippet marked no match, and the window's first paragraph is it


def locate(snippet, content):
    """The ``Passage`` of ``content`` that ``snippet`` points at, or ``None`` if the snippet's
    words are not the content's (a snippet of another version).

    The window starts and ends between whitespace-separated words of the content (the last one
    may be cut where the snippet's scan stops), so its words, marks removed, are a run of the
    content's words; the first place that run occurs is the window.
    """
    text = snippet
    if text.startswith(ELLIPSIS):
        text = text[len(ELLIPSIS):]
    if text.endswith(ELLIPSIS):
        text = text[:-len(ELLIPSIS)]
    words = text.split()
    if not words:
        return None
    first = next((j for j, word in enumerate(words) if MARK in word), None)
    words = [word.replace(MARK, "") for word in words]
    paras = paragraphs(content)
    flat, ends = [], []
    for para in paras:
        flat += para.split()
        ends.append(len(flat))
    at = _find_run(flat, words)
    if at is None:
        return None
    index = bisect.bisect_right(ends, at + (first or 0))
    return Passage(index, paras[index], first is not None)


def _find_run(flat, words):
    """The first position of ``words`` as a run of ``flat`` (the last word may be cut short)."""
    head, middle, last, n = words[0], words[1:-1], words[-1], len(words)
    at = -1
    while True:
        try:
            at = flat.index(head, at + 1)
        except ValueError:
            return None
        if at + n > len(flat):
            return None
        if n == 1 or (flat[at + 1:at + n - 1] == middle and flat[at + n - 1].startswith(last)):
            return at


def changed_verdict(retitled, intact):
    """The verdict of a citation whose article is published at another version."""
    return ("retitled_" if retitled else "") + ("intact" if intact else "rewritten")


def verdict_of_read(citation, passage, article):
    """A citation's verdict against the article as read now (``None``: not published)."""
    if article is None:
        return "gone"
    if article["updated_at"] == citation.updated_at:
        return "fresh"
    if passage is None:
        return UNKNOWN
    return changed_verdict(article["title"] != citation.title,
                           passage.text in paragraphs(article["content"]))


def verdict_of_check(passage, cited_content, result):
    """A citation's verdict from its ``check_citations`` result and the content it cited, or
    ``None`` when the result gives no change to replay (truncated, or the version unknown)."""
    status = result["status"]
    if status == "current":
        return "fresh"
    if status == "gone":
        return "gone"
    change = result["changes"]
    if status != "changed" or change is None or change["truncated"]:
        return None
    if passage is None:
        return UNKNOWN
    now = paragraphs(apply(cited_content, change))
    return changed_verdict(change["title"] is not None, passage.text in now)


def change_bytes(change):
    """UTF-8 bytes of article text in one ``changes`` result: the paragraphs removed and added,
    and the title's old and new text when it changed."""
    if change is None:
        return 0
    texts = [t for hunk in change["hunks"] for t in hunk["removed"] + hunk["added"]]
    if change["title"] is not None:
        texts += [change["title"]["from"], change["title"]["to"]]
    return sum(len(t.encode("utf-8")) for t in texts)
