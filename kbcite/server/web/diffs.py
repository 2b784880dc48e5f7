"""Two versions of an article side by side and inline, words marked within changed paragraphs.

The hunks are ``kbcite.changes``'s, bounded as it bounds them (``truncated`` says a change
was cut); within a hunk, each removed paragraph is set beside the added one in its place and
their words compared, unless either holds more than ``WORDS_MAX`` words (then the two are shown
whole, one removed, one added), so a page costs at most a bounded comparison a hunk.
"""

import difflib
import itertools
import re

from ...changes import changes

# Word comparison is quadratic at worst: paragraphs longer than this are not compared by word.
WORDS_MAX = 2000

_WORDS = re.compile(r"\s+|\w+|[^\w\s]")


def _words(text):
    return _WORDS.findall(text)


def words(old, new):
    """``(left, right, inline)``: runs ``(kind, text)`` of the older paragraph (kinds
    ``same``, ``del``), of the newer (``same``, ``ins``), and of both in one (all three)."""
    if old is None:
        return [], [("ins", new)], [("ins", new)]
    if new is None:
        return [("del", old)], [], [("del", old)]
    a, b = _words(old), _words(new)
    if len(a) > WORDS_MAX or len(b) > WORDS_MAX:
        return [("del", old)], [("ins", new)], [("del", old), ("ins", new)]
    left, right, inline = [], [], []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        removed, added = "".join(a[i1:i2]), "".join(b[j1:j2])
        if tag == "equal":
            left.append(("same", removed))
            right.append(("same", added))
            inline.append(("same", removed))
            continue
        if removed:
            left.append(("del", removed))
            inline.append(("del", removed))
        if added:
            right.append(("ins", added))
            inline.append(("ins", added))
    return left, right, inline


def compare(old_title, old_content, new_title, new_content):
    """``{title, hunks, truncated}`` for the diff page: each hunk ``{at, rows}``, each row
    ``{left, right, inline}`` (runs as ``words`` gives them)."""
    change = changes(old_title, old_content, new_title, new_content)
    hunks = []
    for hunk in change["hunks"]:
        rows = []
        for old, new in itertools.zip_longest(hunk["removed"], hunk["added"]):
            left, right, inline = words(old, new)
            rows.append({"left": left, "right": right, "inline": inline})
        hunks.append({"at": hunk["at"] + 1, "rows": rows})
    return {"title": change["title"], "hunks": hunks, "truncated": change["truncated"]}
