"""What changed between two versions of an article, in a form an agent can act on.

The content is compared paragraph by paragraph (paragraphs are the text between blank lines,
``"\\n\\n"``, so joining them again gives the text back exactly): each hunk says where in the
older version it starts, which paragraphs left and which came in. A changed title is noted
beside the hunks. The paragraphs' text is bounded (``CHANGES_MAX_CHARS``); a change that does
not fit is cut and flagged ``truncated``. ``apply`` replays untruncated changes on the older
text, so an agent (or a test) can rebuild the newer one without reading it.

The work is bounded too, whatever the content: the paragraphs both versions begin and end
with are set aside in time linear in the text, and the rest is compared by Myers' O(ND)
algorithm within a budget of steps (``Budget``). Past the budget the rest becomes one hunk
(every paragraph between the common beginning and end removed and added): still exact, so
``apply`` rebuilds the newer text, only coarser. A caller that compares many versions in one
call (``check_citations``) shares one budget among them.
"""

from typing import Any

from .limits import CHANGES_MAX_CHARS

PARAGRAPH_BREAK = "\n\n"

# Steps (a diagonal tried, a paragraph or a stride of them compared) one call may take: about
# 0.1 s of Python on an idle machine, a few times that on a loaded one; enough for a change
# of a hundred scattered edits to come out exact, bounded for content built to be slow.
DIFF_MAX_STEPS = 40000
# Items a step compares at once along a run of equal paragraphs: a slice comparison in C, so a
# long unchanged stretch costs steps by the stride, not by the paragraph.
SNAKE_STRIDE = 64


class Budget:
    """Steps left for comparisons; one budget may be shared by several ``changes`` calls."""

    def __init__(self, steps=DIFF_MAX_STEPS):
        self.steps = steps


def normalized(text):
    """Text as every write compares it: line breaks unified (CRLF and CR as LF), blank lines at
    either end dropped (what reading a file, or a browser's form, does to it)."""
    return "\n".join(text.splitlines()).strip("\n")


def same_version(row, title, content, published):
    """Whether a write of ``title``, ``content`` and ``published`` over the article ``row``
    would change nothing an agent or a person could tell: then it makes no version."""
    return (row["title"] == title and bool(row["published"]) == bool(published)
            and (row["content"] == content or normalized(row["content"]) == normalized(content)))


def paragraphs(text):
    """The paragraphs of ``text``, in order; ``PARAGRAPH_BREAK.join`` gives the text back."""
    return text.split(PARAGRAPH_BREAK)


def _common_prefix(a, b):
    """How many leading items ``a`` and ``b`` share; O(n log n) item comparisons done in C."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix(a, b, keep):
    """How many trailing items ``a`` and ``b`` share, leaving ``keep`` leading items alone."""
    low, high = 0, min(len(a), len(b)) - keep
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid:len(a) - low] == b[len(b) - mid:len(b) - low]:
            low = mid
        else:
            high = mid - 1
    return low


def _myers(a, b, budget):
    """The edit script from ``a`` to ``b`` as ``(i1, i2, j1, j2)`` hunks, or None past the
    budget (Myers 1986, forward, with the trace of each round kept for the walk back)."""
    n, m = len(a), len(b)
    # d rounds cost at least d * d steps, so the trace never outgrows the budget.
    dmax = min(n + m, int(budget.steps ** 0.5) + 1)
    off = dmax + 1
    v = [0] * (2 * dmax + 3)
    trace = []
    for d in range(dmax + 1):
        trace.append(v[off - d - 1:off + d + 2])
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[off + k - 1] < v[off + k + 1]):
                x = v[off + k + 1]
            else:
                x = v[off + k - 1] + 1
            x = _snake(a, b, x, x - k, budget)
            v[off + k] = x
            if x >= n and x - k >= m:
                return _walk_back(trace, n, m, d)
            if budget.steps < 0:
                return None
    return None


def _snake(a, b, x, y, budget):
    """How far the run of equal items from ``a[x]``, ``b[y]`` goes; charged to ``budget``
    one step a comparison: of one item, or of ``SNAKE_STRIDE`` at once (a slice, in C)."""
    n, m, steps = len(a), len(b), 1
    while (x + SNAKE_STRIDE <= n and y + SNAKE_STRIDE <= m
           and a[x:x + SNAKE_STRIDE] == b[y:y + SNAKE_STRIDE]):
        steps += 1
        x += SNAKE_STRIDE
        y += SNAKE_STRIDE
    while x < n and y < m and a[x] == b[y]:
        steps += 1
        x += 1
        y += 1
    budget.steps -= steps
    return x


def _walk_back(trace, n, m, d):
    """The hunks of the path that reached ``(n, m)`` in ``d`` rounds, from the kept trace."""
    edits = []  # (x, y, kind) of each removal or insertion, last first
    x, y = n, m
    for e in range(d, 0, -1):
        row = trace[e]  # v before round e, for k in -e-1 .. e+1
        k = x - y

        def at(kk, row=row, e=e):
            return row[kk + e + 1]

        if k == -e or (k != e and at(k - 1) < at(k + 1)):
            prev_k = k + 1
        else:
            prev_k = k - 1
        prev_x = at(prev_k)
        prev_y = prev_x - prev_k
        # Round e's one step left (prev_x, prev_y): down is an insertion, right a removal.
        edits.append((prev_x, prev_y, "+" if prev_k == k + 1 else "-"))
        x, y = prev_x, prev_y
    edits.reverse()
    hunks: list[tuple[int, int, int, int]] = []
    for px, py, kind in edits:
        i1, j1 = px, py
        i2, j2 = (px + 1, py) if kind == "-" else (px, py + 1)
        if hunks and hunks[-1][1] == i1 and hunks[-1][3] == j1:
            hunks[-1] = (hunks[-1][0], i2, hunks[-1][2], j2)
        else:
            hunks.append((i1, i2, j1, j2))
    return hunks


def hunks(old, new, budget=None):
    """``(i1, i2, j1, j2)`` for each run of ``old[i1:i2]`` replaced by ``new[j1:j2]``.

    Exact always; minimal unless the budget ran out, then one run covers what lies between
    the common beginning and end."""
    budget = Budget() if budget is None else budget
    head = _common_prefix(old, new)
    tail = _common_suffix(old, new, head)
    a, b = old[head:len(old) - tail], new[head:len(new) - tail]
    if not a and not b:
        return []
    found = None
    if a and b and budget.steps > 0:
        found = _myers(a, b, budget)
    if found is None:
        found = [(0, len(a), 0, len(b))]
    return [(i1 + head, i2 + head, j1 + head, j2 + head) for i1, i2, j1, j2 in found]


def changes(old_title, old_content, new_title, new_content, limit=CHANGES_MAX_CHARS,
            budget=None):
    """``{title, hunks, truncated}``: the change from the older version to the newer one.

    ``title`` is ``{"from", "to"}`` when the title changed, else None; each hunk is
    ``{"at", "removed", "added"}`` (``at``: the index of its first paragraph in the older
    version). At most ``limit`` characters of paragraph text in all; at most ``budget``
    steps of work (``Budget``, ``DIFF_MAX_STEPS`` when not given).
    """
    old, new = paragraphs(old_content), paragraphs(new_content)
    title = None if old_title == new_title else {"from": old_title, "to": new_title}
    result: dict[str, Any] = {"title": title, "hunks": [], "truncated": False}
    remaining = limit
    for i1, i2, j1, j2 in hunks(old, new, budget):
        hunk = {"at": i1, "removed": [], "added": []}
        for key, texts in (("removed", old[i1:i2]), ("added", new[j1:j2])):
            for text in texts:
                if len(text) > remaining:
                    if remaining:
                        hunk[key].append(text[:remaining])
                    remaining = 0
                    result["truncated"] = True
                    break
                hunk[key].append(text)
                remaining -= len(text)
        result["hunks"].append(hunk)
        if result["truncated"]:
            break
    return result


def apply(old_content, change):
    """The newer content, from the older one and an untruncated ``changes`` result."""
    if change["truncated"]:
        raise ValueError("a truncated change cannot be replayed: read the article instead")
    old, out, at = paragraphs(old_content), [], 0
    for hunk in change["hunks"]:
        out += old[at:hunk["at"]]
        out += hunk["added"]
        at = hunk["at"] + len(hunk["removed"])
    out += old[at:]
    return PARAGRAPH_BREAK.join(out)
