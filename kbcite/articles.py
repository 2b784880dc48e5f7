"""An article's life on the people's side, and the one write every change goes through.

``write`` is the compare-and-swap: an article's row changes only if it still holds the version
(and the visibility) the transaction read, and its new version is strictly later than the
last (``versions.next_version``); the search index and the event follow in the same
transaction. A person's save, a publish, an unpublish, an import and the agent's edit
(``kbcite.edits``) all write through it. ``insert`` creates articles, one or a bulk load.
"""

from . import access, events
from .errors import InvalidArgument, VersionConflict
from .limits import (
    EVENT_PUBLISHED, EVENT_UNPUBLISHED, EVENT_UPDATED, ID_MAX, MAX_ARTICLES_PER_KB, TITLE_MAX,
)
from .search import index
from .search.ranking import SearchDoc
from .validation import check_content, check_new_article, check_people_string, check_title
from .versions import format_version, next_version


def conflict_error(kb, row, expected_version):
    """The version_conflict for an article whose current row is ``row``."""
    return VersionConflict(
        "article %r in knowledge base %r has changed: the current version is %s, not %s. "
        "Re-read it with read_knowledge_article, re-apply your change to the current content, "
        "and retry with expected_version %s and a new idempotency_key."
        % (row["article_id"], kb["kb_id"], row["updated_at"], expected_version,
           row["updated_at"]),
        knowledge_base_id=kb["kb_id"],
        article_id=row["article_id"],
        expected_version=expected_version,
        current_version=row["updated_at"],
    )


def write(ctx, kb, row, *, content, title, published):
    """Save new text and visibility for one article in the caller's write transaction;
    version, index and event follow. Returns ``(updated_at, event or None)``."""
    db = ctx.db
    version_us = next_version(row["version_us"], ctx.now_us())
    updated_at = format_version(version_us)
    # The compare-and-swap: the row changes only if it still holds the version (and the
    # visibility) this transaction read; the event and index below rely on that.
    if db.article_swap(row, title, content, published, version_us, updated_at) != 1:
        current = access.article(db, kb, row["article_id"], published_only=False)
        raise conflict_error(kb, current, row["updated_at"])
    index.reindex(db, kb, row["pk"], bool(row["published"]), title, content, published)
    event = None
    if published and row["published"]:
        event = events.append(db, kb, [(EVENT_UPDATED, row["article_id"], updated_at)])[0]
    elif published:
        event = events.append(db, kb, [(EVENT_PUBLISHED, row["article_id"], updated_at)])[0]
    elif row["published"]:
        event = events.append(db, kb, [(EVENT_UNPUBLISHED, row["article_id"], updated_at)])[0]
    return updated_at, event


def insert(ctx, kb, items, published):
    """Insert new ``(title, content, source)`` articles in the caller's transaction, in
    order: IDs, versions, index and events; returns their IDs."""
    db = ctx.db
    first = db.kb_next(kb["pk"], "articles_created", len(items))
    if first + len(items) - 1 > MAX_ARTICLES_PER_KB:
        raise InvalidArgument(
            "knowledge base %r is full: it can hold %d articles over its life, and has had "
            "%d" % (kb["kb_id"], MAX_ARTICLES_PER_KB, first - 1), argument="kb_id")
    rows = []
    for number, (title, content, source) in enumerate(items, first):
        version_us = next_version(None, ctx.now_us())
        rows.append(("art-%06d" % number, title, content, published, version_us,
                     format_version(version_us), source))
    pks = db.articles_insert(kb["pk"], rows)
    if published:
        index.index_new(db, kb, [(pk, SearchDoc.of(row[1], row[2]))
                                 for pk, row in zip(pks, rows)])
        events.append(db, kb, [(EVENT_PUBLISHED, row[0], row[5]) for row in rows])
    return [row[0] for row in rows]


def create_knowledge_base(ctx, kb_id, name=None):
    """Create an empty knowledge base."""
    check_people_string(kb_id, "kb_id", ID_MAX)
    if name is not None:
        check_people_string(name, "name", TITLE_MAX)
    db = ctx.db
    with db.write():
        db.lock_new_kb()
        if db.kb_row(kb_id) is not None:
            raise InvalidArgument(
                "knowledge base %r already exists" % (kb_id,), argument="kb_id"
            )
        db.kb_insert(kb_id, name)


def create(ctx, kb_id, items, published):
    """Add checked ``(title, content, source)`` articles in one transaction; returns their IDs."""
    db = ctx.db
    if not items:
        with db.read():
            access.knowledge_base(db, kb_id)
        return []
    with db.write():
        kb = access.knowledge_base(db, kb_id, lock=True)
        return insert(ctx, kb, items, published)


def check_articles(articles):
    """``(title, content)`` pairs checked, as a list; a bad one is named by its index."""
    articles = list(articles)
    for i, article in enumerate(articles):
        if not isinstance(article, (tuple, list)) or len(article) != 2:
            raise InvalidArgument("articles[%d] must be a (title, content) pair" % i,
                                  argument="articles")
        check_new_article(article[0], article[1], "articles[%d] title" % i,
                          "articles[%d] content" % i)
    return articles


def save(ctx, kb_id, article_id, *, content=None, title=None):
    """A person's save (last writer wins); returns the new ``updated_at``.

    Saving a draft keeps it a draft and writes no event; saving a published article
    writes ``article.updated``.
    """
    if content is None and title is None:
        raise InvalidArgument("nothing to save: give content, title or both",
                              argument="content")
    if content is not None:
        check_people_string(content, "content", None)
        check_content(content)
    if title is not None:
        check_people_string(title, "title", TITLE_MAX)
        check_title(title)
    db = ctx.db
    with db.write():
        kb = access.knowledge_base(db, kb_id, lock=True)
        row = access.article(db, kb, article_id, published_only=False)
        updated_at, _ = write(
            ctx,
            kb,
            row,
            content=row["content"] if content is None else content,
            title=row["title"] if title is None else title,
            published=bool(row["published"]),
        )
    return updated_at


def set_published(ctx, kb_id, article_id, published):
    """Publish or unpublish an article; returns its ``updated_at`` (unchanged if it already
    was in that state)."""
    db = ctx.db
    with db.write():
        kb = access.knowledge_base(db, kb_id, lock=True)
        row = access.article(db, kb, article_id, published_only=False)
        if bool(row["published"]) == published:
            return row["updated_at"]
        updated_at, _ = write(
            ctx, kb, row, content=row["content"], title=row["title"], published=published
        )
    return updated_at
