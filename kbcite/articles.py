"""An article's life on the people's side, and the one write every change goes through.

``write`` is the compare-and-swap: an article's row changes only if it still holds the version
(and the visibility) the transaction read, and its new version is strictly later than the
last (``versions.next_version``); the search index, the event and the version's row in the
history follow in the same transaction. A write whose title, text and visibility are the
current version's (its line breaks aside: ``changes.same_version``) writes nothing at all: no
version, no event, so no citation turns stale for nothing. A person's save, a publish, an
unpublish, a revert, an import, a merge, an approved proposal and the agent's edit
(``kbcite.edits``) all write through it. ``insert`` creates articles, one or a bulk load.
"""

import contextlib
import hashlib
import json
from typing import NamedTuple, Optional

from . import access, changes, events, history
from .errors import (
    IdempotencyKeyReused,
    InvalidArgument,
    VersionConflict,
    VersionNotFound,
    VersionPruned,
)
from .limits import (
    EVENT_DELETED,
    EVENT_PUBLISHED,
    EVENT_UNPUBLISHED,
    EVENT_UPDATED,
    IDEMPOTENCY_TTL_US,
    KEY_MAX,
    MAX_ARTICLES_PER_KB,
    TITLE_MAX,
)
from .search import index
from .search.ranking import SearchDoc
from .tools import citation
from .validation import (
    check_content,
    check_kb_id,
    check_new_article,
    check_people_string,
    check_title,
)
from .versions import format_version, next_version, parse_version


def conflict_error(db, kb, row, expected_version):
    """The version_conflict for an article whose current row (with its content) is ``row``.

    Its details carry what an agent needs to re-apply its change without another read: the
    current citation (or ``gone``, where the article is no longer published) and the change
    from ``expected_version`` to now (None where that version cannot be read). The texts are
    read here, in the caller's transaction; the change itself is computed by ``settle`` once
    that transaction is over (``transaction`` does it), so no diff runs under the write lock.
    """
    gone = not row["published"]
    pending = None
    if not gone:
        try:
            old, old_content = history.find(db, kb, row, expected_version,
                                            argument="expected_version")
        except (VersionNotFound, VersionPruned, InvalidArgument):
            pass
        else:
            pending = (old["title"], old_content, row["title"], row["content"])
    current = None if gone else citation(kb["kb_id"], row["article_id"], row["updated_at"])
    error = VersionConflict(
        "article %r in knowledge base %r has changed: the current version is %s, not %s. "
        "This error's details hold the current citation and what changed since your version "
        "(details.changes): re-apply your change to the current content (or re-read it with "
        "read_knowledge_article), and retry with expected_version %s and a new "
        "idempotency_key."
        % (row["article_id"], kb["kb_id"], row["updated_at"], expected_version,
           row["updated_at"]),
        knowledge_base_id=kb["kb_id"],
        article_id=row["article_id"],
        expected_version=expected_version,
        current_version=row["updated_at"],
        current=current,
        gone=gone,
        changes=None,
    )
    error.pending = pending
    return error


def settle(error):
    """Fill in a version conflict's ``changes`` from the texts it holds; returns the error."""
    pending = getattr(error, "pending", None)
    if pending is not None:
        error.details["changes"] = changes.changes(*pending)
        error.pending = None
    return error


@contextlib.contextmanager
def transaction(db):
    """``db.write()``, with a version conflict's change computed after the rollback."""
    try:
        with db.write():
            yield
    except VersionConflict as error:
        settle(error)
        raise


class Written(NamedTuple):
    """What a write did: the article's version after it, the event it wrote (None for a
    draft's save, or where nothing changed), and whether it made a version at all."""

    updated_at: str
    event: Optional[dict]
    changed: bool


def write(ctx, kb, row, *, content, title, published, action, actor=None, summary=None,
          text_pk=None, approver=None, issuer=None):
    """Save new text and visibility for one article in the caller's write transaction;
    version, index, event and history follow. ``text_pk`` names a stored text that already
    holds ``content`` (a revert's); ``issuer``, the team issuer that vouched for ``actor``.
    A write that would change nothing (``changes.same_version``) writes nothing. Returns a
    ``Written``."""
    if changes.same_version(row, title, content, published):
        return Written(row["updated_at"], None, False)
    db = ctx.db
    version_us = next_version(row["version_us"], ctx.now_us())
    updated_at = format_version(version_us)
    if text_pk is None:
        # A version that keeps the text shares it; a new text is stored once.
        text_pk = row["text_pk"] if content == row["content"] else \
            db.articles.texts_insert(kb["pk"], [content])[0]
    # The compare-and-swap: the row changes only if it still holds the version (and the
    # visibility) this transaction read; the event and index below rely on that.
    if db.articles.swap(row, title, text_pk, published, version_us, updated_at) != 1:
        current = access.article(db, kb, row["article_id"], published_only=False)
        raise conflict_error(db, kb, current, row["updated_at"])
    index.reindex(db, kb, row["pk"], bool(row["published"]), title, content, published,
                  ctx.semantic, was=(row["title"], row["content"]), written=ctx.written)
    event = None
    if published and row["published"]:
        event = events.append(db, kb, [(EVENT_UPDATED, row["article_id"], updated_at)])[0]
    elif published:
        event = events.append(db, kb, [(EVENT_PUBLISHED, row["article_id"], updated_at)])[0]
    elif row["published"]:
        event = events.append(db, kb, [(EVENT_UNPUBLISHED, row["article_id"], updated_at)])[0]
    history.record(db, kb, row["pk"], version_us, updated_at, action=action,
                   published=published, title=title, text_pk=text_pk,
                   size=len(content.encode("utf-8")), event=event, actor=actor,
                   summary=summary, approver=approver, issuer=issuer)
    return Written(updated_at, event, True)


def insert(ctx, kb, items, published, *, action="create", actor=None, issuer=None):
    """Insert new ``(title, content, source)`` articles in the caller's transaction, in
    order: IDs, versions, texts, index, events and history; returns their IDs."""
    db = ctx.db
    first = db.kbs.next(kb["pk"], "articles_created", len(items))
    if first + len(items) - 1 > MAX_ARTICLES_PER_KB:
        raise InvalidArgument(
            "knowledge base %r is full: it can hold %d articles over its life, and has had "
            "%d" % (kb["kb_id"], MAX_ARTICLES_PER_KB, first - 1), argument="kb_id")
    text_pks = db.articles.texts_insert(kb["pk"], [content for _, content, _ in items])
    rows = []
    for number, (title, _content, source), text_pk in zip(range(first, first + len(items)),
                                                          items, text_pks):
        version_us = next_version(None, ctx.now_us())
        rows.append(("art-%06d" % number, title, text_pk, published, version_us,
                     format_version(version_us), source))
    pks = db.articles.insert(kb["pk"], rows)
    appended = [None] * len(rows)
    if published:
        index.index_new(db, kb, [(pk, SearchDoc.of(item[0], item[1]))
                                 for pk, item in zip(pks, items)], ctx.semantic,
                        [(pk, item[0], item[1]) for pk, item in zip(pks, items)])
        appended = events.append(db, kb, [(EVENT_PUBLISHED, row[0], row[5]) for row in rows])
    db.history.insert(kb["pk"], [{
        "article_pk": pk, "version_us": row[4], "updated_at": row[5], "action": action,
        "sequence": event["sequence"] if event else None,
        "event": event["type"] if event else None, "published": int(published),
        "title": row[1], "text_pk": row[2], "bytes": len(item[1].encode("utf-8")),
        "actor": actor, "summary": None, "approver": None, "actor_issuer": issuer}
        for pk, row, item, event in zip(pks, rows, items, appended)])
    return [row[0] for row in rows]


def create_knowledge_base(ctx, kb_id, name=None):
    """Create an empty knowledge base."""
    check_kb_id(kb_id)
    if name is not None:
        check_people_string(name, "name", TITLE_MAX)
    db = ctx.db
    with db.write():
        db.lock_new_kb()
        if db.kbs.row(kb_id) is not None:
            raise InvalidArgument(
                "knowledge base %r already exists" % (kb_id,), argument="kb_id"
            )
        db.kbs.insert(kb_id, name)


def create(ctx, kb_id, items, published, actor=None):
    """Add checked ``(title, content, source)`` articles in one transaction; returns their IDs."""
    history.check_actor(actor, None)
    db = ctx.db
    if not items:
        with db.read():
            access.knowledge_base(db, kb_id)
        return []
    with db.write():
        kb = access.knowledge_base(db, kb_id, lock=True)
        return insert(ctx, kb, items, published, actor=actor)


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


def save(ctx, kb_id, article_id, *, content=None, title=None, actor=None, summary=None):
    """A person's save (last writer wins); returns a ``Written``.

    Saving a draft keeps it a draft and writes no event; saving a published article
    writes ``article.updated``; saving what the article already holds writes nothing.
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
    history.check_actor(actor, summary)
    db = ctx.db
    with transaction(db):
        kb = access.knowledge_base(db, kb_id, lock=True)
        row = access.article(db, kb, article_id, published_only=False)
        return write(ctx, kb, row, content=row["content"] if content is None else content,
                     title=row["title"] if title is None else title,
                     published=bool(row["published"]), action="save", actor=actor,
                     summary=summary)


def set_published(ctx, kb_id, article_id, published, actor=None):
    """Publish or unpublish an article; returns its ``updated_at`` (unchanged if it already
    was in that state)."""
    history.check_actor(actor, None)
    db = ctx.db
    with transaction(db):
        kb = access.knowledge_base(db, kb_id, lock=True)
        row = access.article(db, kb, article_id, published_only=False)
        return write(ctx, kb, row, content=row["content"], title=row["title"],
                     published=published, action="publish" if published else "unpublish",
                     actor=actor).updated_at


def _revert_print(kb_id, article_id, to_us, expected_us, actor, summary):
    """SHA-256 of a revert as the store understands it (an edit's key space, its own kind)."""
    request = ["revert", kb_id, article_id, to_us, expected_us, actor, summary]
    canonical = json.dumps(request, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def revert(ctx, kb_id, article_id, to_version, expected_version, *, actor=None, summary=None,
           idempotency_key=None, issuer=None):
    """A new version of an article holding version ``to_version``'s title and content, made
    only if the article is still at ``expected_version`` (a compare-and-swap, one event), its
    history row's action ``revert``; returns ``{updated_at, event, replayed, changed}`` (a
    revert to what the article already holds changes nothing). Its visibility stays as it
    is. ``idempotency_key``, as an edit's: the same revert sent again answers the first one's
    result and writes nothing (a double click); another request under it is refused. The old
    version must fit today's limits, as an edit's text must."""
    history.check_actor(actor, summary, issuer)
    if idempotency_key is not None:
        check_people_string(idempotency_key, "idempotency_key", KEY_MAX)
    db = ctx.db
    with transaction(db):
        kb = access.knowledge_base(db, kb_id, lock=True)
        row = access.article(db, kb, article_id, published_only=False)
        expected_us = parse_version(expected_version, "expected_version")
        print_ = _revert_print(kb["kb_id"], row["article_id"],
                               parse_version(to_version, "to_version"), expected_us, actor,
                               summary)
        if idempotency_key is not None:
            stored = db.events.key_get(kb["pk"], idempotency_key,
                                        ctx.now_us() - IDEMPOTENCY_TTL_US)
            if stored is not None:
                if stored["fingerprint"] != print_:
                    raise IdempotencyKeyReused(
                        "idempotency_key %r was already used in knowledge base %r for another "
                        "change; use a new key for a new change" % (idempotency_key,
                                                                   kb["kb_id"]),
                        argument="idempotency_key", idempotency_key=idempotency_key)
                first = json.loads(stored["result"])
                return dict(first, replayed=True, changed=first.get("changed", True))
        if expected_us != row["version_us"]:
            raise conflict_error(db, kb, row, expected_version)
        old, content = history.find(db, kb, row, to_version, argument="to_version",
                                    agents=False)
        check_content(content, "to_version's content")
        check_title(old["title"], "to_version's title")
        written = write(ctx, kb, row, content=content, title=old["title"],
                        published=bool(row["published"]), action="revert", actor=actor,
                        summary=summary, text_pk=old["text_pk"], issuer=issuer)
        result = {"updated_at": written.updated_at, "event": written.event,
                  "changed": written.changed}
        if idempotency_key is not None:
            now_us = ctx.now_us()
            db.events.key_put(kb["pk"], idempotency_key, print_,
                               json.dumps(result, ensure_ascii=False), now_us,
                               now_us - IDEMPOTENCY_TTL_US)
        return dict(result, replayed=False)


def delete(ctx, kb_id, article_id, actor=None, issuer=None):
    """Remove an article for good: its text, its whole history, its place in the index. A
    published one leaves an ``article.deleted`` event, so its citations come back gone; a
    draft's deletion, like its saves, writes none. The event records who deleted it (no
    version is left to). Returns the event, or None."""
    history.check_actor(actor, None, issuer)
    db = ctx.db
    with db.write():
        kb = access.knowledge_base(db, kb_id, lock=True)
        row = access.article(db, kb, article_id, published_only=False)
        event = None
        if row["published"]:
            index.reindex(db, kb, row["pk"], True, row["title"], row["content"], False,
                          ctx.semantic, was=(row["title"], row["content"]),
                          written=ctx.written)
            updated_at = format_version(next_version(row["version_us"], ctx.now_us()))
            event = events.append(db, kb, [(EVENT_DELETED, row["article_id"], updated_at)],
                                  actor=actor, issuer=issuer)[0]
        db.articles.delete(kb["pk"], row["pk"])
    return event
