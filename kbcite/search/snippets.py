"""Snippets: about sixteen words of a hit around its densest cluster of query words, marked.

The cost of a snippet is bounded by a window of the body (``SNIPPET_SCAN_CHARS``), not by the
article's length; a store keeps recent snippets by article version (``SnippetCache``), since
a version never changes its text.
"""

from .text import _word_pattern, tokens

SNIPPET_WORDS = 16

SNIPPET_MAX_MATCHES = 12

# A snippet is looked for in the first this-many characters of the body: its cost is bounded by
# this window, not by an article of a megabyte.
SNIPPET_SCAN_CHARS = 20000

# Recent snippets kept per store, keyed by article version and query words: a few hundred KB.
SNIPPET_CACHE_SIZE = 4096


def _find_ascii(text, terms, held=-1):
    """``(start, end, term)`` of whole-word, case-insensitive matches of ASCII ``terms``
    (``(term, bit)`` pairs), of those whose bit is in ``held`` only."""
    lowered, size, hits = text.lower(), len(text), []
    for term, bit in terms:
        if not held & bit:
            continue  # not in the body (the index says): a scan would find nothing
        at, found = lowered.find(term), 0
        # A snippet shows one window; a dozen matches of a word are plenty to place it.
        while at >= 0 and found < SNIPPET_MAX_MATCHES:
            stop = at + len(term)
            # A match is a whole word: no letter or digit joins it on either side.
            if ((at == 0 or not lowered[at - 1].isalnum())
                    and (stop == size or not lowered[stop].isalnum())):
                hits.append((at, stop, term))
                found += 1
            at = lowered.find(term, stop)
    return hits


def _find_words(text, terms):
    """``(start, end, term)`` of words of any script whose tokens are among ``terms``."""
    hits: list[tuple[int, int, str]] = []
    found: dict[str, int] = {}
    for match in _word_pattern().finditer(text):
        word = match.group()
        if word.isascii():
            key = word.lower()
            if key in terms and found.get(key, 0) < SNIPPET_MAX_MATCHES:
                hits.append((match.start(), match.end(), key))
                found[key] = found.get(key, 0) + 1
            continue
        for token in tokens(word):
            if token in terms and found.get(token, 0) < SNIPPET_MAX_MATCHES:
                hits.append((match.start(), match.end(), token))
                found[token] = found.get(token, 0) + 1
                break
    return hits


class SnippetTerms:
    """A query's terms as each snippet of a search looks for them, made once a search: as a
    tuple (the cache's key), as a set, and, when all are ASCII, longest first, each with its
    bit (``1 << its place``: the bits a hit's ``held`` names)."""

    __slots__ = ("key", "terms", "ascii")

    def __init__(self, terms):
        self.key = tuple(terms)
        self.terms = frozenset(self.key)
        self.ascii = (sorted(((term, 1 << i) for i, term in enumerate(self.key)),
                             key=lambda pair: -len(pair[0]))
                      if all(term.isascii() for term in self.terms) else None)


def make_snippet(text, terms, words=SNIPPET_WORDS, held=-1):
    """About ``words`` words of ``text`` around its densest cluster of ``terms``, marked **.

    ``terms`` are search tokens (``query_terms``), or ``SnippetTerms`` of them; a word is
    marked when one of its tokens is a term, so "Café" is marked for "cafe". Only the first
    ``SNIPPET_SCAN_CHARS`` characters are looked at: the cost is bounded whatever the
    article's length. ``held``, the bits of the terms the text holds (the index's word),
    spares an ASCII text a scan for each of the others.
    """
    if not isinstance(terms, SnippetTerms):
        terms = SnippetTerms(terms)
    text = text[:SNIPPET_SCAN_CHARS]
    if terms.ascii is not None and text.isascii():
        hits = _find_ascii(text, terms.ascii, held)
    else:
        hits = _find_words(text, terms.terms)
    # A hit is a whole word (of ASCII letters and digits, or of ``_word_pattern``'s), so no
    # two overlap and no two start together: they sort by where they start.
    hits.sort()
    width = words * 7  # characters: an English word and its space average about seven
    seen: dict[str, int] = {}
    start, best, j, count = 0, None, 0, len(hits)
    for i, (at, _, term) in enumerate(hits):
        # Slide a window of ``width`` characters over the hits; score it by distinct terms.
        reach = at + width
        while j < count and hits[j][0] < reach:
            entering = hits[j][2]
            seen[entering] = seen.get(entering, 0) + 1
            j += 1
        if best is None or (len(seen), j - i) > best[0]:
            best = ((len(seen), j - i), at)
        left = seen[term] - 1
        if left:
            seen[term] = left
        else:
            del seen[term]
    if best is not None and len(text) > width:
        # Start a few words before the cluster, at a word boundary, for context.
        start = best[1]
        for _ in range(3):
            start = text.rfind(" ", 0, max(start - 1, 0)) + 1
        if len(text) - start < width:  # near the end: show a full window, ending at the end
            start = text.rfind(" ", 0, len(text) - width) + 1
    end = text.find(" ", start + width)
    end = len(text) if end < 0 else end
    parts, cursor = [], start
    for at, stop, _ in hits:
        if start <= at and stop <= end:
            parts += [text[cursor:at], "**", text[at:stop], "**"]
            cursor = stop
    parts.append(text[cursor:end])
    piece = " ".join("".join(parts).split())
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")


class SnippetCache:
    """Recent snippets, keyed by article version and query terms (a version never changes its
    text), least recently used first out."""

    def __init__(self, size=SNIPPET_CACHE_SIZE):
        self.size = size
        self._snippets = {}  # insertion-ordered: the first key is the least recently used

    def clear(self):
        """Forget every snippet (a benchmark timing the making of them)."""
        self._snippets.clear()

    def get(self, row, terms, work, held=-1):
        """The snippet of one hit row (``pk``, ``updated_at``, ``content``) for the query's
        ``SnippetTerms`` (``held``: ``make_snippet``'s); a snippet made anew adds the
        characters it scanned to ``work["snippet_chars"]``."""
        key = (row["pk"], row["updated_at"], terms.key)
        snippet = self._snippets.pop(key, None)
        if snippet is None:
            snippet = make_snippet(row["content"], terms, held=held)
            work["snippet_chars"] = work.get("snippet_chars", 0) + len(row["content"])
            if len(self._snippets) >= self.size:
                del self._snippets[next(iter(self._snippets))]
        self._snippets[key] = snippet
        return snippet
