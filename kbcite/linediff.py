"""A change as a person reads it: a bounded unified diff of an article's title and content.

Approval questions, ``kb review show`` and the review commands' confirmations all show an edit
this way: the lines of the version the agent read against the lines it would write, with
context lines, ``-``/``+`` marks and ``@@ -a,b +c,d @@`` positions. Every added and removed
line is shown up to ``CHANGED_CHARS`` characters in all; past that the text says how many
changed lines and characters it did not show. The work is bounded too: the common head and
tail are stripped by slice comparisons, and the middle's lines are matched by the bounded diff
of ``kbcite.changes`` within ``MATCH_STEPS``; past them the middle is shown as one replaced
block (never unbounded work). Every character an agent chose is neutralised (``printable``)
before a person reads it.
"""

import unicodedata

from . import changes

# At least this many characters of added and removed lines are shown before the rest is
# counted instead (a 5 KB page's whole change fits; a rewrite of a long one is summarised).
CHANGED_CHARS = 4000

# Lines of unchanged text shown around each change, as diff -u does.
CONTEXT_LINES = 3

# A context line longer than this is cut: it is there to place the change, not to be read.
CONTEXT_CHARS = 160

# The middle (after the common head and tail) is matched line by line by the bounded diff of
# ``kbcite.changes`` within this many steps (a fortieth of its default: some fifty scattered
# changes are told apart, and the question's whole diff of a 1 MiB article stays under
# 50 ms); past them the middle becomes one replaced block.
MATCH_STEPS = changes.DIFF_MAX_STEPS // 40

# What str.splitlines also breaks lines at, besides "\n": where a text holds none, it splits
# exactly as a split on "\n" does (each looked for by a substring search, far faster than
# one regular expression's character class over a long text).
_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")

# Characters an agent-chosen string must not use to rewrite what a person reads: controls,
# bidirectional overrides and isolates, line and paragraph separators.
_BIDI = {0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067,
         0x2068, 0x2069, 0x2028, 0x2029}


def printable(text, limit):
    """An agent's text as a person may safely read it: controls, bidirectional overrides and
    line separators shown as escapes, cut to ``limit`` characters."""
    out = []
    for ch in text[:limit]:
        code = ord(ch)
        if ch in "\n\t":
            out.append(ch)
        elif code in _BIDI or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            out.append("\\u%04x" % code if code <= 0xFFFF else "\\U%08x" % code)
        else:
            out.append(ch)
    clipped = "".join(out)
    if len(text) > limit:
        clipped += "\n[... %d more characters]" % (len(text) - limit)
    return clipped


def _line(text, limit):
    """One line, neutralised and cut, a newline or tab inside it shown as an escape."""
    text = text[:-1] if text.endswith("\n") else text
    shown = printable(text[:limit], limit).replace("\n", "\\n")
    return shown + ("..." if len(text) > limit else "")


def _split(text):
    """The lines of ``text``, each keeping its newline (split on newlines only)."""
    if not any(brk in text for brk in _OTHER_BREAKS):
        return text.splitlines(True)  # the same lines, in C, when "\n" is the only break
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _common_head(a, b):
    """Where the common head of ``a`` and ``b`` ends, backed up to the start of a line."""
    return a.rfind("\n", 0, changes._common_prefix(a, b)) + 1


def _common_tail(a, b, head):
    """``(start in a, start in b)`` of the common tail after ``head``, at a line start."""
    lo = changes._common_suffix(a, b, head)
    pa, pb = len(a) - lo, len(b) - lo
    if lo and not ((pa == head or a[pa - 1] == "\n") and (pb == head or b[pb - 1] == "\n")):
        # Inside the common tail the texts agree: its first line start is the same in both.
        found = a.find("\n", pa, len(a) - 1)
        if found < 0:
            return len(a), len(b)
        pa, pb = found + 1, pb + found + 1 - pa
    return pa, pb


class Lines:
    """One side's lines, held where a diff may look: the last context lines of the common
    head, the middle whole, the first context lines of the common tail."""

    def __init__(self, text, head, tail, context=CONTEXT_LINES):
        self.head_count = text.count("\n", 0, head)
        start = head
        for _ in range(context):
            if start > 0:
                start = text.rfind("\n", 0, start - 1) + 1
        self.before = _split(text[start:head])
        self.middle = _split(text[head:tail])
        end = tail
        for _ in range(context):
            if end < len(text):
                found = text.find("\n", end)
                end = len(text) if found < 0 else found + 1
        self.after = _split(text[tail:end])
        self.tail_count = text.count("\n", tail) + (
            1 if tail < len(text) and not text.endswith("\n") else 0)
        self.count = self.head_count + len(self.middle) + self.tail_count

    def __getitem__(self, span):
        """The lines ``span.start`` to ``span.stop`` (a slice), as far as they are held."""
        out = []
        middle_end = self.head_count + len(self.middle)
        if self.head_count <= span.start and span.stop <= middle_end:
            return self.middle[span.start - self.head_count:span.stop - self.head_count]
        for i in range(span.start, span.stop):
            if i < self.head_count:
                out.append(self.before[i - self.head_count + len(self.before)])
            elif i < middle_end:
                out.append(self.middle[i - self.head_count])
            else:
                out.append(self.after[i - middle_end])
        return out


def opcodes(old, new, steps=MATCH_STEPS):
    """``(old Lines, new Lines, difflib-style opcodes)`` between two texts, in bounded work:
    linear in their length, and the middle matched within ``steps`` (``changes.hunks``)."""
    head = _common_head(old, new)
    tail_old, tail_new = _common_tail(old, new, head)
    a, b = Lines(old, head, tail_old), Lines(new, head, tail_new)
    h, ma, mb = a.head_count, len(a.middle), len(b.middle)
    codes = [("equal", 0, h, 0, h)] if h else []
    at_a = at_b = 0
    for i1, i2, j1, j2 in changes.hunks(a.middle, b.middle, changes.Budget(steps)):
        if i1 > at_a:
            codes.append(("equal", h + at_a, h + i1, h + at_b, h + j1))
        codes.append(("replace" if i2 > i1 and j2 > j1 else "delete" if i2 > i1 else "insert",
                      h + i1, h + i2, h + j1, h + j2))
        at_a, at_b = i2, j2
    if ma > at_a:
        codes.append(("equal", h + at_a, h + ma, h + at_b, h + mb))
    if a.tail_count:
        codes.append(("equal", h + ma, a.count, h + mb, b.count))
    return a, b, [code for code in codes if code[0] != "equal" or code[2] > code[1]]


def similarity(old, new, steps=MATCH_STEPS):
    """How much of two texts is the same, as git's rename detection reckons it: the
    characters of the lines they share (their common head and tail, and the lines the bounded
    diff matches between), over the longer text's length; 0.0 to 1.0. Bounded work: linear in
    the texts, and the middle matched within ``steps`` (past them, nothing of it counts)."""
    longer = max(len(old), len(new))
    if not longer:
        return 1.0
    head = _common_head(old, new)
    tail_old, tail_new = _common_tail(old, new, head)
    shared = head + len(old) - tail_old
    a, b = _split(old[head:tail_old]), _split(new[head:tail_new])
    if a and b:
        at = 0
        for i1, i2, _, _ in changes.hunks(a, b, changes.Budget(steps)):
            shared += sum(len(line) for line in a[at:i1])
            at = i2
        shared += sum(len(line) for line in a[at:])
    return shared / longer


def hunks(codes, context=CONTEXT_LINES):
    """The opcodes grouped into hunks, each with up to ``context`` equal lines around it
    (as ``SequenceMatcher.get_grouped_opcodes`` groups them)."""
    codes = list(codes)
    if not any(code[0] != "equal" for code in codes):
        return []
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = (tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = (tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    groups, group = [], []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return groups


def _range(start, count):
    """A hunk header's ``start,count`` (1-based; an empty range names the line before it)."""
    return "%d,%d" % (start + 1 if count else start, count)


def unified(old_title, old_content, new_title, new_content, *, limit=CHANGED_CHARS,
            old_name="as read", new_name="after the edit"):
    """``{text, lines_added, lines_removed, hidden_lines, hidden_chars}``: the change as a
    unified diff, its added and removed lines shown up to ``limit`` characters in all."""
    # Lines compare without a last newline's difference, so that appending to a text without
    # one shows the new lines alone, not its old last line as changed too.
    old, new, codes = opcodes(_terminated(old_content), _terminated(new_content))
    added = sum(j2 - j1 for tag, _, _, j1, j2 in codes if tag != "equal")
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in codes if tag != "equal")
    out, budget = [], limit
    hidden_lines = hidden_chars = 0
    if old_title != new_title:
        out += ["Title:", "-" + _line(old_title, limit), "+" + _line(new_title, limit), ""]
    if codes:
        out += ["--- content %s" % old_name, "+++ content %s" % new_name]
    for group in hunks(codes):
        if budget <= 0:
            for tag, i1, i2, j1, j2 in group:
                if tag != "equal":
                    hidden_lines += (i2 - i1) + (j2 - j1)
                    hidden_chars += _chars(old[i1:i2]) + _chars(new[j1:j2])
            continue
        first, last = group[0], group[-1]
        out.append("@@ -%s +%s @@" % (_range(first[1], last[2] - first[1]),
                                      _range(first[3], last[4] - first[3])))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + _line(text, CONTEXT_CHARS) for text in old[i1:i2]]
                continue
            for mark, texts in (("-", old[i1:i2]), ("+", new[j1:j2])):
                for at, text in enumerate(texts):
                    if budget <= 0:
                        hidden_lines += len(texts) - at
                        hidden_chars += _chars(texts[at:])
                        break
                    size = len(text) - text.endswith("\n")
                    out.append(mark + _line(text, budget))
                    if size > budget:
                        hidden_chars += size - budget
                    budget -= max(size, 1)
    if hidden_lines or hidden_chars:
        out += ["", "[... %s and %s of changed lines not shown: this shows at most %s "
                "characters of them. Decline if you cannot judge the change from this, and "
                "review it in full elsewhere (a proposal waits for kb review show KB ID; an "
                "article's versions for kb diff).]"
                % (_count(hidden_lines, "more line"), _count(hidden_chars, "character"),
                   "{:,}".format(limit))]
    if not out:
        out = ["(no change of the title or content%s)" % (
            ": only a newline at the end of the content" if old_content != new_content
            else "")]
    return {"text": "\n".join(out), "lines_added": added, "lines_removed": removed,
            "hidden_lines": hidden_lines, "hidden_chars": hidden_chars}


def _changes(base, text):
    """The changes from ``base`` to ``text`` as ``(start, end, new lines)`` of base lines."""
    a, b, codes = opcodes(base, text)
    return [(i1, i2, b[slice(j1, j2)]) for tag, i1, i2, j1, j2 in codes if tag != "equal"]


def merge(base, mine, theirs):
    """``mine``'s changes to ``base`` re-applied onto ``theirs`` (a later version of it), or
    None where the two changed the same lines or lines next to each other (a conflict); a
    change both made alike is made once (as git merges it)."""
    if mine == base:
        return theirs
    ending = not (mine.endswith("\n") or theirs.endswith("\n"))
    base, mine, theirs = _terminated(base), _terminated(mine), _terminated(theirs)
    ours, others = _changes(base, mine), _changes(base, theirs)
    alike = {(start, end, tuple(lines)) for start, end, lines in others}
    ours = [change for change in ours if (change[0], change[1], tuple(change[2])) not in alike]
    every = sorted([(start, end, lines, 0) for start, end, lines in ours] +
                   [(start, end, lines, 1) for start, end, lines in others])
    for (_, e1, _, who1), (s2, _, _, who2) in zip(every, every[1:]):
        # Sorted by start: a change that reaches (or touches) the next one's start is a
        # conflict, unless both are the same side's (they never overlap each other).
        if who1 != who2 and s2 <= e1:
            return None
    lines, at = _split(base), 0
    out = []
    for start, end, new, _ in every:
        out += lines[at:start]
        out += new
        at = end
    out += lines[at:]
    merged = "".join(out)
    return merged[:-1] if ending and merged.endswith("\n") else merged


def _chars(lines):
    """The characters of ``lines``, their newlines not counted."""
    # Every line but the text's last ends with a newline.
    return sum(map(len, lines)) - len(lines) + (bool(lines) and not lines[-1].endswith("\n"))


def _terminated(text):
    return text if text.endswith("\n") or not text else text + "\n"


def _count(n, noun):
    return "{:,} {}{}".format(n, noun, "" if n == 1 else "s")
