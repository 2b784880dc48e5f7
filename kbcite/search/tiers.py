"""The tiers of a search: which articles a query's index lookups gather, in bounded work.

Tiers first: articles holding every query word, then all words but one, then any word; within
a tier the BM25F score (``ranking.score``), title over body; ties by article ID. Each index
query brings at most ``CANDIDATES_PER_QUERY`` rows, and a lower tier is asked only when the
ones above hold fewer hits than asked for, so the work is bounded however common the words.
docs/search.md says which queries run, in what order.
"""

from collections import Counter
from typing import Any

from .ranking import (
    CANDIDATES_PER_QUERY,
    SCORED_TERMS_MAX,
    content_words,
    idf,
    score,
    score_needles,
)
from .text import terms_of, tokens

# Queries of at most this many words are ranked in tiers (every word, all but one, any): a
# short query names what it wants, every word of it. A longer one is a question, whose words
# an answer need not all hold: it is ranked by its score alone (each word weighed by its
# rarity and by how often the question says it), the candidates gathered rarest word first.
TIERED_TERMS_MAX = 4

# A question gathers, rarest word first, the articles holding its words until this many
# (the rarer words' lists whole; an article holding only common words is seldom among the
# best), and for every word the shortest titles holding it.
QUESTION_CANDIDATES = 150

# While its hits are not proven (``_whole_lists_decide``), a question reads its rarer words'
# whole lists on, one word at a time, up to this many articles between them.
QUESTION_PROOF_CANDIDATES = 1500

# The every-word queries of a question use at most this many of its words, the rarest: ten
# already pin an article down.
QUESTION_EVERY_TERMS = 10

# A question whose every word is common (even the rarest held by more articles than it
# gathers) asks instead for the titles holding its three rarest title words (rarest among
# titles, not among bodies: their lists in the index of titles are the shortest, and they
# mark the titles that weigh most), and only while places are left, the articles holding
# its rarest four anywhere: an article holding all ten is rare and seldom among the best
# answers, and the query for it walks every word's list, while a few rare words together
# mark the topic (and hold the articles holding all ten, asked on their own only where more
# articles hold the few than a question gathers). At 100,000 articles of the bench corpus
# these found 46% of an exhaustive ranking's top 10 where every word's articles found 22%,
# and the title query alone filled the places for 78% of the questions (docs/search.md).
QUESTION_TITLE_TERMS = 3
QUESTION_ANYWHERE_TERMS = 4


def query_stats(db, kb, text):
    """``(terms, stats)`` of a query: the terms known to the knowledge base's published
    articles (the rarest ``SCORED_TERMS_MAX``, in the query's order) and what ``score``
    needs: average lengths, each term's idf and weight, the query's words as a phrase."""
    said = tokens(text)
    terms = terms_of(said)
    counts, ids = db.search.term_counts(kb["pk"], terms) if terms else ({}, {})
    # A word no published article holds cannot tell articles apart: it is ignored.
    terms = [term for term in terms if term in counts]
    if len(terms) > SCORED_TERMS_MAX:
        keep = set(_rarest(terms, counts)[:SCORED_TERMS_MAX])
        terms = [term for term in terms if term in keep]
    n = kb["published_count"]
    weight = Counter(term for term in said if term in counts)
    phrase = content_words(said)
    stats = {"avg_title": kb["title_tokens"] / n if n else 0.0,
             "avg_body": kb["body_tokens"] / n if n else 0.0,
             # An article holds a term if either field does: at least the larger count.
             "idf": {t: idf(max(counts[t]), n) for t in terms},
             "weight": {t: weight[t] or 1 for t in terms},
             # Only a short query names a page by its title; a question's words name topics.
             "phrase": " %s " % " ".join(phrase) if len(terms) <= TIERED_TERMS_MAX else "",
             "exact": phrase, "counts": counts, "ids": ids}
    return terms, stats


def _rarest(terms, counts):
    """``terms``, the rarest first (ties in the query's order)."""
    return sorted(terms, key=lambda t: (sum(counts[t]), terms.index(t)))


def _whole_lists_decide(db, kb, prefix, needles, limit, scored, gather):
    """Score a question's rarest words' whole lists (``prefix``), one word at a time, and
    stop as soon as the hits are proven: whether they were (then nothing else is asked).

    After the lists of the rarest ``j`` words, an article not scored holds none of them, so
    its score is below the sum of the other words' ``weight x idf x (K1 + 1)`` (a word's
    part of the score, ``tf / (tf + K1)`` of that, never reaches it): once ``limit`` hits
    score at least that bound, no article left can displace one (MaxScore; Turtle and
    Flood, 1995). The hits are then exactly those the whole gathering below finds (it scores
    a superset), at a fraction of its work where the rare words decide, as they mostly do.
    """
    bound = sum(factor for _, _, factor, _ in needles)
    factors = {term: factor for term, _, factor, _ in needles}
    for term in prefix:
        gather(*db.match_docs(kb["pk"], [([term], False, 0)], QUESTION_PROOF_CANDIDATES))
        bound -= factors[term]
        if len(scored) >= limit:
            # The limit-th hit in order; a title the question names comes first whatever
            # its score, and is in the rarest word's list (it holds every word).
            kth = sorted(scored.values())[limit - 1]
            if kth[0] is False or -kth[2] > bound:
                return True
    return False


class Gathering:
    """One search's candidates, as the index queries of its tier find them: each scored once
    (``scored``: pk to its sort key, ``(not named, tier, -score, pk, body bits)``), and the
    work counted in ``work``."""

    def __init__(self, db, kb, terms, stats, limit, work):
        self.db, self.kb, self.terms, self.limit, self.work = db, kb, terms, limit, work
        self.counts = stats["counts"]
        self.stats = stats
        self.tiered = len(terms) <= TIERED_TERMS_MAX
        self.exact = stats["exact"]
        self.cap = max(CANDIDATES_PER_QUERY, limit)
        self.scored: dict[int, tuple[bool, int, float, int, Any]] = {}
        self.needles = score_needles(terms, stats)
        self.rarest_first = _rarest(terms, self.counts)

    def gather(self, lists, docs=None):
        """Score the articles these index queries found that are not scored yet (their
        stored tokens came with them, or are read now)."""
        self.work["queries"] += len(lists)
        new = sorted({pk for pks in lists for pk in pks} - set(self.scored))
        if not new:
            return
        rows = [docs[pk] for pk in new] if docs is not None else self.db.search.docs(new)
        exact, terms = self.exact, self.terms
        for row in rows:
            held, value, in_body = score(row, self.needles, self.stats)
            title = row["title_terms"]
            # A title the query names holds the query's first word: most titles do not, and
            # are told so without splitting them again.
            named = (not exact or exact[0] in title) and content_words(title.split()) == exact
            tier = min(len(terms) - held, 2) if self.tiered else 0
            # (The pk ends the order: the bits after it never decide it.)
            self.scored[row["pk"]] = (not named, tier, -value, row["pk"], in_body)
        self.work["scored"] += len(new)

    def enough(self, tier):
        """Whether the hits in ``tier`` or above fill the places."""
        return sum(1 for key in self.scored.values() if key[1] <= tier) >= self.limit

    def ask(self, queries):
        """Each query's articles, where fewer than the cap hold it; else the first by ID and,
        since the title weighs most, those holding its words in their title. Whether any
        query reached the cap."""
        db, kb, cap = self.db, self.kb, self.cap
        found, docs = db.match_docs(kb["pk"], queries, cap)
        full = [(q[0], True, q[2]) for q, pks in zip(queries, found) if len(pks) >= cap]
        if full:
            more, more_docs = db.match_docs(kb["pk"], full, cap)
            found += more
            docs.update(more_docs)
        self.gather(found, docs)
        return bool(full)

    def best(self):
        """The sort keys of the hits, best first, the places' worth."""
        return sorted(self.scored.values())[:self.limit]


def _question(g):
    """A question (more than ``TIERED_TERMS_MAX`` words), ranked by score alone: the rarer
    words' articles whole, up to the budget, and the shortest titles holding each word (where
    a title the question names is); where no word's articles fit the budget, the articles
    holding the rarest few."""
    db, kb, counts, rarest_first, limit = g.db, g.kb, g.counts, g.rarest_first, g.limit
    prefix, proof, total = [], [], 0
    for term in rarest_first:
        total += sum(counts[term])
        if total <= QUESTION_CANDIDATES:
            prefix.append(term)
        if total > QUESTION_PROOF_CANDIDATES:
            break
        proof.append(term)
    if prefix:
        if _whole_lists_decide(db, kb, proof, g.needles, limit, g.scored, g.gather):
            return  # proven: nothing else is asked
        # And the articles holding every word (of the rarest ten), anywhere and in the
        # title: where a title the question is, and the runners-up of a long title's
        # search. (The rarer words' lists were read whole above.)
        every = rarest_first[:QUESTION_EVERY_TERMS]
        g.gather(*db.match_docs(kb["pk"], [(every, False, 0), (every, True, 0)],
                                QUESTION_CANDIDATES))
        g.gather(db.search.title_candidates(kb["pk"], rarest_first, limit))
        return
    _common_question(g)


def _common_question(g):
    """A question of common words only: the titles holding the rarest few title words, then,
    for places left, the articles holding the rarest few anywhere, stand in for those
    holding every word (which they hold, unless more articles hold the few than a question
    gathers: then those are asked on their own)."""
    db, kb, counts, rarest_first, limit = g.db, g.kb, g.counts, g.rarest_first, g.limit
    titled = sorted((t for t in g.terms if counts[t][0]), key=lambda t: counts[t][0])
    steps = [(titled, True)] if titled else []
    steps.append((rarest_first, False))
    for n, (words, title) in enumerate(steps):
        if n and len(g.scored) >= limit:
            break
        few = words[:QUESTION_TITLE_TERMS if title else QUESTION_ANYWHERE_TERMS]
        found, docs = db.match_docs(kb["pk"], [(few, title, 0)], QUESTION_CANDIDATES)
        g.gather(found, docs)
        if len(found[0]) >= QUESTION_CANDIDATES:
            g.gather(*db.match_docs(kb["pk"], [(words[:QUESTION_EVERY_TERMS], title, 0)],
                                    QUESTION_CANDIDATES))
    if len(g.scored) < limit:
        # Those are the best a question of common words has: a title holding one common
        # word seldom outranks them (at 100,000 articles of the bench corpus, 2 of the
        # exhaustive ranking's 1,000 places), so the shortest titles holding the rarest word
        # (the best a single common word gives) only fill the places left, then, only if
        # still short, each word's first articles, rarest first. (Each word's first
        # ``limit``: fewer than ``limit`` are scored, so a word held by ``limit`` articles
        # has enough not scored yet to fill the places.)
        g.gather(db.search.title_candidates(kb["pk"], rarest_first[:1], limit))
        if len(g.scored) < limit:
            g.gather(db.match(kb["pk"], [([t], False, 0) for t in rarest_first], limit))


def _one_word(g):
    """One word: the shortest titles holding it, and the first articles holding it."""
    g.gather(g.db.search.title_candidates(g.kb["pk"], g.terms, g.cap)
             + g.db.match(g.kb["pk"], [(g.terms, False, 0)], g.cap))


def _two_words(g):
    """Two words: many articles hold both, and all but one is either word."""
    g.ask([(g.terms, False, 0)])
    if not g.enough(0):
        g.ask([(g.terms, False, 1)])


def _some_words(g):
    """Three words or more: the all-but-one query holds the every-word tier too, so one query
    gathers both tiers whole whenever it stays under the cap; only when it reaches the cap is
    the every-word tier asked on its own. The any-word tier fills the places left."""
    if g.ask([(g.terms, False, 1)]):
        g.ask([(g.terms, False, 0)])
    if g.enough(1):
        return
    # For each word, as many of the articles with the shortest titles holding it (its best
    # title scores), then, only if still short, the first articles holding it anywhere.
    # Asking for as many more as are already scored keeps those from using up the places.
    db, kb, scored, limit = g.db, g.kb, g.scored, g.limit
    short = limit - sum(1 for key in scored.values() if key[1] <= 1)
    g.gather(db.search.title_candidates(kb["pk"], g.rarest_first,
                                        min(g.cap, short + len(scored))))
    if len(scored) < limit:
        g.gather(db.match(kb["pk"], [([t], False, 0) for t in g.rarest_first],
                          min(g.cap, short + len(scored))))


def _shape(terms):
    """How a query of these terms gathers its candidates (its tiers)."""
    if len(terms) > TIERED_TERMS_MAX:
        return _question
    return {1: _one_word, 2: _two_words}.get(len(terms), _some_words)


def ranked(db, kb, text, limit, work):
    """The pks of a query's top hits, best first, the terms they were ranked by, and for each
    hit the bits of the terms its body holds (``1 << the term's place``: ``score``'s).

    First an article whose title is the query (its words, function words aside); then, for
    a query of at most ``TIERED_TERMS_MAX`` words, the tiers: articles holding every word,
    all words but one, any word; within a tier (or, for a longer question, among all),
    the BM25F score (``ranking.score``); ties by article ID. The candidates are gathered
    by a few index queries of at most ``CANDIDATES_PER_QUERY`` rows each (docs/search.md
    says which, in what order), a lower tier only when the ones above hold fewer than
    ``limit`` hits: the work is bounded, however common the words.
    """
    terms, stats = query_stats(db, kb, text)
    work.update(terms=terms, queries=0, scored=0, snippet_chars=0)
    if not terms:
        return [], terms, {}
    gathering = Gathering(db, kb, terms, stats, limit, work)
    _shape(terms)(gathering)
    best = gathering.best()
    # The hits whose title is the query, first of all (the fusion keeps them first).
    work["named"] = [key[3] for key in best if not key[0]]
    return [key[3] for key in best], terms, {key[3]: key[4] for key in best}
