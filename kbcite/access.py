"""Who may see what: a granted knowledge base, a published article, and the one not_found.

An agent names knowledge bases it was granted and sees published articles only; anything else
(a knowledge base that is missing or not granted, an article that is missing, a draft or
unpublished) is one ``not_found`` with the same words, decided before any content is read,
so neither the answer nor the time it takes tells the cases apart. The people's side
(``granted=None``, ``published_only=False``) sees everything and is told plainly what is
missing.
"""

from .errors import NotFound


def knowledge_base(db, kb_id, granted=None, lock=False):
    """The knowledge base row, or the one ``not_found`` that hides ungranted from missing.

    With ``lock``, inside a write: the row is locked until commit (the write's turn).
    """
    row = None
    if granted is None or kb_id in granted:
        row = db.lock_kb(kb_id) if lock else db.kbs.row(kb_id)
    if row is None and granted is None:  # the people's side: no grants to hide behind
        raise NotFound("there is no knowledge base %r in this store" % (kb_id,),
                       knowledge_base_id=kb_id)
    if row is None:
        raise NotFound(
            "knowledge base %r was not found or is not granted to this client; "
            "use the ID of a granted knowledge base" % (kb_id,),
            knowledge_base_id=kb_id,
        )
    return row


def article(db, kb, article_id, published_only):
    """The article's row with its content; a draft is ``not_found`` when ``published_only``.

    Visibility is decided on the small columns before the content is read, so a large
    draft and a missing article cost a caller the same, and time tells them nothing.
    """
    if not published_only:  # the people's side sees drafts too, and has no secrets
        row = db.articles.by_id(kb["pk"], article_id)
        if row is None:
            raise NotFound("there is no article %r in knowledge base %r"
                           % (article_id, kb["kb_id"]), knowledge_base_id=kb["kb_id"],
                           article_id=article_id, drafts_included=True)
        return row
    found = db.articles.visibility(kb["pk"], article_id)
    if found is None or not found["published"]:
        raise NotFound(
            "article %r is not a published article of knowledge base %r; it may have been "
            "unpublished: search again for the current article"
            % (article_id, kb["kb_id"]),
            knowledge_base_id=kb["kb_id"],
            article_id=article_id,
        )
    return db.articles.get(found["pk"])
