"""BM25F ranking: what search keeps of an article, and the score of one article for a query.

Nothing here touches a database: the engines store ``SearchDoc``'s text forms, and the tiers
(``kbcite.search.tiers``) score the candidates the index finds.
"""

import math
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from .text import tokens

# BM25 per field (Robertson and Zaragoza's BM25F family, as Lucene and tantivy score fields):
# each field's term frequency is saturated (K1) and normalised by that field's own length
# against its own average (B), so a long body cannot drown a short exact title. The title's
# score counts TITLE_WEIGHT times the body's: a query made of an article's title words should
# find that article first, as a person searching a help centre expects.
BM25_K1, BM25_B = 1.2, 0.75

TITLE_WEIGHT, BODY_WEIGHT = 4.0, 1.0

# A query keeps at most this many words (its rarest): each word costs the tiers a query, and
# ten words already pin an article down.
QUERY_TERMS_MAX = 10

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
    """``(term, body needle)`` pairs for ``score``: built once per query, not per article."""
    return [(term, "\n%s\t" % term) for term in terms]


def score(doc_row, needles, stats):
    """``(terms held, BM25F score)`` of one stored ``search_docs`` row for a query's terms.

    ``needles`` come from ``score_needles``; ``stats`` holds the knowledge base's average
    field lengths ``avg_title`` and ``avg_body`` and each term's ``(idf in titles, in bodies)``.
    """
    title = doc_row["title_terms"].split()
    body = doc_row["body_terms"]
    idfs = stats["idf"]
    # BM25 for each field written out inline: this runs for every candidate of every
    # search. A field's length norm is the same for every term, so it is computed once.
    avg_title, avg_body = stats["avg_title"], stats["avg_body"]
    title_norm = 1.0 - BM25_B + BM25_B * (doc_row["title_len"] / avg_title if avg_title else 1.0)
    body_norm = 1.0 - BM25_B + BM25_B * (doc_row["body_len"] / avg_body if avg_body else 1.0)
    held, total = 0, 0.0
    for term, needle in needles:
        tf_title = title.count(term)
        at = body.find(needle)
        if at < 0:
            if not tf_title:
                continue
            tf_body = 0
        else:
            start = at + len(needle)
            tf_body = int(body[start:body.index("\n", start)])
        held += 1
        idf_title, idf_body = idfs[term]
        if tf_title:
            total += TITLE_WEIGHT * (idf_title * tf_title * (BM25_K1 + 1.0)
                                     / (tf_title + BM25_K1 * title_norm))
        if tf_body:
            total += BODY_WEIGHT * (idf_body * tf_body * (BM25_K1 + 1.0)
                                    / (tf_body + BM25_K1 * body_norm))
    return held, total
