"""The index's upkeep: the search statistics kept in line with the published articles.

Each function runs inside the caller's write transaction, beside the change it follows: a
published article's tokens (``search_docs``), the full-text index, each term's article counts
and the knowledge base's token totals (BM25's averages) move together or not at all; so do
the articles' vectors, where the store has a ``semantic`` half (``kbcite.search.semantic``).
"""

from .ranking import SearchDoc, decode_body, presence_delta, presence_totals


def reindex(db, kb, pk, was_published, title, content, published, semantic=None, was=None,
            written=None):
    """Bring the search index (and the article's vector) in line with its new text and
    visibility; ``was`` is the article's ``(title, content)`` before, where the caller has it
    (its tokens are then made again, not read back by their IDs); ``written``, the
    connection's WrittenDocs, where it keeps one (what it last wrote of the article answers
    for the text before, and for the IDs of the terms the edit leaves as they were)."""
    new = SearchDoc.of(title, content) if published else None
    old = stored = ids = None
    if was_published:
        stored = _stored_row(db, kb, pk)
        known = None if written is None or was is None else written.get(kb["pk"], pk, was, stored)
        if known is not None:
            old, ids = _ids_after(db, kb, known, new)
            if ids is None:  # a looked-up ID is not the one remembered: look them all up
                written.forget(kb["pk"], pk)
    if ids is None:
        ids = db.search.term_ids(kb["pk"], sorted(new.terms())) if new is not None else {}
        if was_published:
            old = made_again(stored, was, ids, db, kb) if was is not None else None
            if old is None:
                old = read_back(db, kb, stored)
    body = new.body_bytes(ids) if new is not None else None
    if old is not None and new is not None:
        db.search.doc_replace(kb["pk"], pk, old, new, body)
        db.index_replace(kb["pk"], pk, old, new)
    elif old is not None:
        db.index_remove(kb["pk"], pk, old)
        db.search.doc_delete(kb["pk"], pk, old)
    elif new is not None:
        db.search.docs_put(kb["pk"], [(pk, new)], [body])
        db.index_add(kb["pk"], [(pk, new)])
    db.search.term_counts_add(kb["pk"], presence_delta(old, new))
    db.kbs.add_published(
        kb["pk"], (new is not None) - (old is not None),
        (new.title_len if new else 0) - (old.title_len if old else 0),
        (new.body_len if new else 0) - (old.body_len if old else 0))
    if written is not None:
        if new is not None:
            written.put(kb["pk"], pk, (title, content), new, ids, body)
        else:
            written.forget(kb["pk"], pk)
    if semantic is not None:
        semantic.written(db, kb, pk, title, content, published, was_published)


def _ids_after(db, kb, known, new):
    """``(old SearchDoc, {term: ID} for the new text)`` from a WrittenDocs entry ``known``:
    a term the body holds as often as before takes the remembered ID, every other term of
    the new text is looked up (and added); ``(old, None)`` where a looked-up term's ID is not
    the one remembered."""
    old, old_ids = known
    if new is None:
        return old, {}
    ids = {term: old_ids[term] for term, _ in new.body_counts.items() & old.body_counts.items()}
    looked_up = db.search.term_ids(kb["pk"], sorted(new.terms() - ids.keys()))
    if any(old_ids.get(term, found) != found for term, found in looked_up.items()):
        return old, None
    ids.update(looked_up)
    return old, ids


def made_again(stored, was, ids, db, kb):
    """The SearchDoc of a published article's text before (``was``: title, content) when
    it is exactly what its stored ``search_docs`` row holds, else None (then ``read_back``).

    Made from the text and checked against the row byte for byte (title tokens, lengths,
    and the body's counts encoded by the same term IDs), so a contentless index is told to
    forget exactly the tokens it was given; ``ids`` are term IDs already looked up (the new
    text's), the old text's other terms are looked up, never added.
    """
    doc = SearchDoc.of(*was)
    if (doc.title_text, doc.title_len, doc.body_len) != (
            stored["title_terms"], stored["title_len"], stored["body_len"]):
        return None
    missing = [term for term in doc.body_counts if term not in ids]
    if missing:
        ids = dict(ids)
        ids.update(db.search.term_ids_known(kb["pk"], sorted(missing)))
        if any(term not in ids for term in missing):
            return None
    return doc if doc.body_bytes(ids) == bytes(stored["body"]) else None


def read_back(db, kb, stored):
    """The SearchDoc of a stored ``search_docs`` row, its terms read back by their IDs."""
    try:
        pairs = decode_body(bytes(stored["body"]))
        names = db.search.term_names(kb["pk"], (i for i, _ in pairs))
        return SearchDoc.stored(stored, names, pairs)
    except (KeyError, ValueError):
        raise db.audit.damaged(kb, "search index") from None


def _stored_row(db, kb, pk):
    stored = db.search.doc(pk)
    if stored is None:
        raise db.audit.damaged(kb, "search index")
    return stored


def index_new(db, kb, docs, semantic=None, texts=()):
    """Index newly published ``(pk, SearchDoc)`` items at once: the index, the per-term
    counts and the totals, each in one statement for all of them; and, with a ``semantic``
    half, the vectors of their ``texts`` (``(pk, title, content)``)."""
    totals = presence_totals(doc for _, doc in docs)
    # The terms most articles hold get the smallest IDs: the fewest bytes where most stored.
    ids = db.search.term_ids(kb["pk"], sorted(totals, key=lambda term: (-sum(totals[term]), term)))
    db.search.docs_put(kb["pk"], docs, [doc.body_bytes(ids) for _, doc in docs])
    db.index_add(kb["pk"], docs)
    db.search.term_counts_add(kb["pk"], totals)
    db.kbs.add_published(kb["pk"], len(docs), sum(d.title_len for _, d in docs),
                        sum(d.body_len for _, d in docs))
    if semantic is not None:
        semantic.added(db, kb, list(texts))


def index_all(db, kb, semantic=None):
    """Index every published article of a knowledge base anew (an upgrade, a rebuild), and,
    with a ``semantic`` half, embed them anew."""
    db.search.clear(kb["pk"])
    docs = [(row["pk"], SearchDoc.of(row["title"], row["content"]))
            for row in db.articles.published_texts(kb["pk"])]
    if docs:
        index_new(db, kb, docs)
    db.optimize(kb["pk"])
    if semantic is not None:
        semantic.embed_all(db, kb)
