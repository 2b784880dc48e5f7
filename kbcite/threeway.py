"""Three-way merge of an article's lines, and the conflict markers a person resolves.

Two texts made from one base (the store's current version and a file, both from the version
the file was imported or exported from) are merged line by line: each side's changes to the
base are found by the bounded diff of ``kbcite.linediff`` (``changes.hunks`` underneath, so
the work is linear in the text plus a step budget, whatever the content); changes of one side
only are taken; the same change made on both sides is taken once; changes of both sides that
overlap (the same base lines, or insertions at one place) are a conflict, written between
git's markers for the person to resolve::

    <<<<<<< store VERSION
    the store's lines
    =======
    the file's lines
    >>>>>>> file NAME

Changes on adjacent lines do not overlap and merge cleanly. Past the diff's budget a side's
change is one block between the common beginning and end: still exact, only coarser, so two
sides' changes then meet in one conflict instead of merging. Pure text work: no I/O.
"""

import os
from dataclasses import dataclass
from typing import Any

from . import changes, linediff

STORE_MARK = "<<<<<<<"
SPLIT_MARK = "======="
FILE_MARK = ">>>>>>>"
# A side's change is matched line by line within five times the diff's budget (a merge that
# loses precision becomes a conflict the person must resolve, so it may work harder than a
# citation check): some two hundred changed lines a side, scattered through a 1 MiB page,
# still merge exactly, in under a second (0.9 s at load 8 on 2 CPUs); past that, one block.
MERGE_STEPS = 5 * changes.DIFF_MAX_STEPS
# Beside a file that holds a merge's conflict markers: what the merge needs to go on (the
# store version the markers were written against) and the file's text before it.
PENDING_SUFFIX = ".kb-merge"
# The fences of Markdown code blocks: git's markers shown inside one (a page about git) are
# text, not a conflict left behind.
_FENCES = ("```", "~~~")


@dataclass(frozen=True)
class Merged:
    """A merge's outcome: the text (with markers where ``conflicts`` > 0), and how many
    regions conflict."""

    text: str
    conflicts: int


def _side(base, text):
    """One side's changes to ``base``: ``[(start, end, new lines)]`` of base lines."""
    _, lines, codes = linediff.opcodes(base, text, MERGE_STEPS)
    return [(i1, i2, tuple(lines[j1:j2])) for tag, i1, i2, j1, j2 in codes if tag != "equal"]


def _meets(lo, hi, start, end):
    """Whether a change of base lines ``start:end`` overlaps a region ``lo:hi`` that starts no
    later than it: it begins inside the region, or both insert at the same place."""
    return start < hi or lo == hi == start == end


def _applied(base_lines, lo, hi, edits):
    """Base lines ``lo:hi`` with one side's ``edits`` (inside that range) made."""
    out, at = [], lo
    for start, end, new in edits:
        out += base_lines[at:start]
        out += new
        at = end
    return out + base_lines[at:hi]


def _terminated(text):
    return text if text.endswith("\n") or not text else text + "\n"


def merge(base, store, file, store_label, file_label):
    """``Merged`` text of ``store`` and ``file``, two versions of ``base``; each conflict
    between ``<<<<<<< store_label``, ``=======`` and ``>>>>>>> file_label`` lines. The texts
    are compared without a last newline; the result has none."""
    base, store, file = _terminated(base), _terminated(store), _terminated(file)
    ours, theirs = _side(base, store), _side(base, file)
    both = set(ours) & set(theirs)  # the same change made on both sides: taken once
    every = sorted([(s, e, new, "store") for s, e, new in ours if (s, e, new) not in both] +
                   [(s, e, new, "file") for s, e, new in theirs if (s, e, new) not in both] +
                   [(s, e, new, "both") for s, e, new in both],
                   key=lambda change: (change[0], change[1]))
    regions: list[list[Any]] = []  # [lo, hi, changes]
    for change in every:
        if regions and _meets(regions[-1][0], regions[-1][1], change[0], change[1]):
            regions[-1][1] = max(regions[-1][1], change[1])
            regions[-1][2].append(change)
        else:
            regions.append([change[0], change[1], [change]])
    lines = linediff._split(base)
    out, at, conflicts = [], 0, 0
    for lo, hi, found in regions:
        out += lines[at:lo]
        mine = _applied(lines, lo, hi, [c[:3] for c in found if c[3] in ("store", "both")])
        yours = _applied(lines, lo, hi, [c[:3] for c in found if c[3] in ("file", "both")])
        sides = {c[3] for c in found}
        if mine == yours or "file" not in sides:
            out += mine
        elif "store" not in sides:
            out += yours
        else:
            conflicts += 1
            out += (["%s %s\n" % (STORE_MARK, store_label)] + [_terminated(x) for x in mine]
                    + [SPLIT_MARK + "\n"] + [_terminated(x) for x in yours]
                    + ["%s %s\n" % (FILE_MARK, file_label)])
        at = hi
    out += lines[at:]
    text = "".join(out)
    return Merged(text[:-1] if text.endswith("\n") else text, conflicts)


def marker_block(store_lines, file_lines, store_label, file_label):
    """The lines of one conflict, markers and all, for a conflict a caller places itself
    (a title's line)."""
    return ["%s %s" % (STORE_MARK, store_label)] + list(store_lines) + [SPLIT_MARK] + \
        list(file_lines) + ["%s %s" % (FILE_MARK, file_label)]


def pending_path(path):
    """Where the record of a conflict ``kb merge`` left in ``path`` is kept: ``.NAME.kb-merge``
    beside it (a dot-file an import never reads)."""
    folder, name = os.path.split(path)
    return os.path.join(folder, "." + name + PENDING_SUFFIX)


def _is_mark(line, mark):
    return line == mark or line.startswith(mark + " ")


def conflict_left(text, everywhere=False):
    """``(line number, line)`` of the first conflict left in ``text``: a ``<<<<<<<`` line
    followed by ``=======`` and ``>>>>>>>`` lines, outside fenced code blocks (where a page
    may show them, as this project's docs do); ``everywhere`` (a file with a merge waiting
    beside it) inside them too. None where there is none."""
    lines = text.splitlines()
    fence = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if fence is None and stripped.startswith(_FENCES):
            fence = stripped[:3]
            continue
        if fence is not None and stripped.startswith(fence):
            fence = None
            continue
        if not _is_mark(line, STORE_MARK) or (fence is not None and not everywhere):
            continue
        rest = lines[number:]
        split = next((i for i, later in enumerate(rest) if later == SPLIT_MARK), None)
        if split is not None and any(_is_mark(later, FILE_MARK) for later in rest[split + 1:]):
            return number, line
    return None
