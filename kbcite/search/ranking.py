"""BM25F ranking: what search keeps of an article, and the score of one article for a query.

Nothing here touches a database: the engines store ``SearchDoc``'s text forms, and the tiers
(``kbcite.search.tiers``) score the candidates the index finds.
"""

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from .text import STOPWORDS, tokens

# BM25F (Robertson and Zaragoza): each field's term frequency is normalised by that field's own
# length against its own average (B), the title's counting TITLE_WEIGHT times the body's, and
# the sum saturated once (K1), so a word said in both fields is not counted as two words. On
# the judged collections of bench/search_quality.py a weight of 2 ranked best (4, the weight of
# separately saturated fields before, lost to plain BM25 there).
BM25_K1, BM25_B = 1.2, 0.75

TITLE_WEIGHT = 2.0

# A title that the query says whole, as a phrase ("tar" in "extract a tar archive"), adds
# this many times its words' idf: a page named by the question outranks pages that only
# share a word of it with their title.
TITLE_PHRASE_WEIGHT = 3.0

# A question's score counts at most this many of its words (the rarest): a 200-character
# question has about thirty.
SCORED_TERMS_MAX = 32

# At most this many candidates per index query: the work of a search is bounded by
# (queries x this), never by how many articles hold a common word.
CANDIDATES_PER_QUERY = 50


def idf(df, n):
    """BM25's inverse document frequency, never negative (Lucene's form)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class SearchDoc:
    """What search keeps of a published article: its title's tokens in order, its body's
    distinct tokens with their counts, and both lengths in tokens."""

    title_tokens: tuple
    body_counts: dict
    title_len: int
    body_len: int

    @classmethod
    def of(cls, title, content):
        """The SearchDoc of an article's text."""
        title_tokens = tuple(tokens(title))
        body = tokens(content)
        return cls(title_tokens, dict(Counter(body)), len(title_tokens), len(body))

    @classmethod
    def stored(cls, row):
        """The SearchDoc of a stored ``search_docs`` row."""
        counts = {term: int(count) for term, count in
                  (line.split("\t") for line in row["body_terms"][1:-1].split("\n") if line)}
        return cls(tuple(row["title_terms"].split()), counts, row["title_len"], row["body_len"])

    @property
    def title_text(self):
        """The title's tokens as stored: space-separated, in order."""
        return " ".join(self.title_tokens)

    @cached_property
    def body_text(self):
        """The body's counts as stored: a line ``term<TAB>count`` each, between newlines."""
        return "\n" + "".join("%s\t%d\n" % item for item in sorted(self.body_counts.items()))

    @cached_property
    def body_terms(self):
        """The body's distinct tokens, sorted, space-separated (what a full-text index holds)."""
        return " ".join(sorted(self.body_counts))

    def term_presence(self):
        """``{term: (in title, in body)}`` as 0/1 pairs: what it adds to the term counts."""
        presence = {term: (0, 1) for term in self.body_counts}
        for term in set(self.title_tokens):
            presence[term] = (1, presence.get(term, (0, 0))[1])
        return presence


def presence_delta(old, new):
    """``{term: (title delta, body delta)}`` of replacing SearchDoc ``old`` by ``new`` (either
    may be None: added or removed)."""
    old_title = set(old.title_tokens) if old is not None else set()
    new_title = set(new.title_tokens) if new is not None else set()
    old_body = old.body_counts.keys() if old is not None else set()
    new_body = new.body_counts.keys() if new is not None else set()
    # Only the terms whose presence changed in a field: set differences, not a walk of both.
    return {term: ((term in new_title) - (term in old_title),
                   (term in new_body) - (term in old_body))
            for term in (old_title ^ new_title) | (old_body ^ new_body)}


def presence_totals(docs):
    """``{term: (articles holding it in the title, in the body)}`` over SearchDocs ``docs``."""
    totals = {}
    for doc in docs:
        for term, (in_title, in_body) in doc.term_presence().items():
            t0, b0 = totals.get(term, (0, 0))
            totals[term] = (t0 + in_title, b0 + in_body)
    return totals


def score_needles(terms):
    """What ``score`` looks for, built once per query, not per article: the terms, and one
    expression finding any of them, with its count, in a stored body (``\\nterm\\tcount``)."""
    pattern = re.compile("\n(%s)\t([0-9]+)" % "|".join(re.escape(t) for t in terms))
    return frozenset(terms), pattern


def score(doc_row, needles, stats):
    """``(terms held, BM25F score)`` of one stored ``search_docs`` row for a query's terms.

    ``needles`` come from ``score_needles``; ``stats`` holds the knowledge base's average
    field lengths ``avg_title`` and ``avg_body``, each term's ``idf`` and its ``weight`` (how
    often the query says it), and ``phrase`` (``phrase_bonus``'s query part).
    """
    terms, pattern = needles
    title = doc_row["title_terms"].split()
    # One pass over the body for every term at once: this runs for every candidate of
    # every search.
    tf_body = {m.group(1): int(m.group(2)) for m in pattern.finditer(doc_row["body_terms"])}
    tf_title = {}
    for term in title:
        if term in terms:
            tf_title[term] = tf_title.get(term, 0) + 1
    idfs, weights = stats["idf"], stats["weight"]
    # A field's length norm is the same for every term, so it is computed once.
    avg_title, avg_body = stats["avg_title"], stats["avg_body"]
    title_norm = 1.0 - BM25_B + BM25_B * (doc_row["title_len"] / avg_title if avg_title else 1.0)
    body_norm = 1.0 - BM25_B + BM25_B * (doc_row["body_len"] / avg_body if avg_body else 1.0)
    total = 0.0
    held = set(tf_body) | set(tf_title)
    for term in held:
        tf = TITLE_WEIGHT * tf_title.get(term, 0) / title_norm + tf_body.get(term, 0) / body_norm
        total += weights[term] * idfs[term] * tf * (BM25_K1 + 1.0) / (tf + BM25_K1)
    if tf_title and stats["phrase"]:
        total += phrase_bonus(title, stats)
    return len(held), total


def phrase_bonus(title, stats):
    """``TITLE_PHRASE_WEIGHT`` x the idf of a title's words when the query says the whole
    title as a phrase (its words in order, the query's function words skipped alike), else 0.

    ``stats["phrase"]`` is the query's words in order (``content_words``) joined by spaces,
    between spaces; ``stats["idf"]`` has every term's idf.
    """
    words = content_words(title)
    if not words or " %s " % " ".join(words) not in stats["phrase"]:
        return 0.0
    idfs = stats["idf"]
    return TITLE_PHRASE_WEIGHT * sum(idfs.get(word, 0.0) for word in set(words))


def content_words(token_list):
    """The tokens that are not function words, in order (all of them if none is left)."""
    words = [t for t in token_list if t not in STOPWORDS]
    return words or list(token_list)
