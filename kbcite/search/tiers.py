"""The tiers of a search: which articles a query's index lookups gather, in bounded work.

Tiers first: articles holding every query word, then all words but one, then any word; within
a tier the BM25F score (``ranking.score``), title over body; ties by article ID. Each index
query brings at most ``CANDIDATES_PER_QUERY`` rows, and a lower tier is asked only when the
ones above hold fewer hits than asked for, so the work is bounded however common the words.
docs/search.md says which queries run, in what order.
"""

from .ranking import CANDIDATES_PER_QUERY, QUERY_TERMS_MAX, idf, score, score_needles
from .text import query_terms


def ranked(db, kb, text, limit, work):
    """The pks of a query's top hits, best first, and the terms they were ranked by.

    Tiers first: articles holding every query word, then all words but one, then any
    word (``ranking.score`` counts them); within a tier, the BM25F score, title over body;
    ties by article ID. The tiers are gathered by a few index queries of at most
    ``CANDIDATES_PER_QUERY`` rows each (docs/search.md says which, in what order), and a
    lower tier only when the ones above hold fewer than ``limit`` hits: the work is
    bounded, however common the words.
    """
    terms = query_terms(text)
    work.update(terms=terms, queries=0, scored=0, snippet_chars=0)
    counts = db.term_counts(kb["pk"], terms) if terms else {}
    # A word no published article holds cannot tell articles apart: it is ignored.
    terms = [term for term in terms if term in counts]
    if len(terms) > QUERY_TERMS_MAX:
        rarest = sorted(terms, key=lambda t: (sum(counts[t]), terms.index(t)))
        keep = set(rarest[:QUERY_TERMS_MAX])
        terms = [term for term in terms if term in keep]
    work["terms"] = terms
    if not terms:
        return [], terms
    n = kb["published_count"]
    stats = {"avg_title": kb["title_tokens"] / n, "avg_body": kb["body_tokens"] / n,
             "idf": {t: (idf(counts[t][0], n), idf(counts[t][1], n))
                     for t in terms}}
    cap = max(CANDIDATES_PER_QUERY, limit)
    scored = {}
    needles = score_needles(terms)

    def gather(lists, docs=None):
        # Score the articles these index queries found that are not scored yet (their
        # stored tokens came with them, or are read now).
        work["queries"] += len(lists)
        new = sorted({pk for pks in lists for pk in pks} - set(scored))
        if new:
            rows = [docs[pk] for pk in new] if docs is not None else db.search_docs(new)
            for row in rows:
                held, value = score(row, needles, stats)
                scored[row["pk"]] = (min(len(terms) - held, 2), -value, row["pk"])
            work["scored"] += len(new)

    def enough(tier):
        return sum(1 for key in scored.values() if key[0] <= tier) >= limit

    def ask(queries):
        # Each query's articles, where fewer than the cap hold it; else the first by ID
        # and, since the title weighs most, those holding its words in their title.
        # Whether any query reached the cap.
        found, docs = db.match_docs(kb["pk"], queries, cap)
        full = [(q[0], True, q[2]) for q, pks in zip(queries, found) if len(pks) >= cap]
        if full:
            more, more_docs = db.match_docs(kb["pk"], full, cap)
            found += more
            docs.update(more_docs)
        gather(found, docs)
        return bool(full)

    rarest_first = sorted(terms, key=lambda t: (sum(counts[t]), terms.index(t)))
    if len(terms) == 1:
        gather(db.title_candidates(kb["pk"], terms, cap)
               + db.match(kb["pk"], [(terms, False, 0)], cap))
    elif len(terms) == 2:
        # Two words: many articles hold both, and all but one is either word.
        ask([(terms, False, 0)])
        if not enough(0):
            ask([(terms, False, 1)])
    else:
        # Three words or more: the all-but-one query holds the every-word tier too, so
        # one query gathers both tiers whole whenever it stays under the cap; only when
        # it reaches the cap is the every-word tier asked on its own.
        if ask([(terms, False, 1)]):
            ask([(terms, False, 0)])
        if not enough(1):
            # The any-word tier fills the places left: for each word, as many of the
            # articles with the shortest titles holding it (its best title scores), then,
            # only if still short, the first articles holding it anywhere. Asking for as
            # many more as are already scored keeps those from using up the places.
            short = limit - sum(1 for key in scored.values() if key[0] <= 1)
            gather(db.title_candidates(kb["pk"], rarest_first,
                                             min(cap, short + len(scored))))
            if len(scored) < limit:
                gather(db.match(kb["pk"], [([t], False, 0) for t in rarest_first],
                                      min(cap, short + len(scored))))
    best = sorted(scored.values())[:limit]
    return [key[2] for key in best], terms

