"""The pages' writes: Edit (title and Markdown) and Revert, each a compare-and-swap on the
version the page showed, with the form's idempotency key, so a double click writes once and a
change made meanwhile is shown, never overwritten.

Edit goes through the edit tool, as the token's own edit would: its grants, its name as the
actor in the history, its replay of a key already used. Revert is the store's revert (``kb
revert``'s), recorded as a ``revert`` in the history under the same grants and key rules.
Only a token whose edits are written without asking (``--writes allow``) may use them.
"""

import secrets

from ....errors import InvalidArgument, ToolError, VersionConflict
from ..render import url_part
from ..responses import redirect
from ..diffs import compare
from .articles import article, read

# What a save that changed nothing says: no version was made, so no citation went stale.
UNCHANGED = ("Nothing changed: the article already holds this title and text (line breaks "
             "aside), so no new version was made; it is still at %s.")

# Why a write was refused to a token that may not write, in words.
READ_ONLY = ("Your token may read this knowledge base but not change it: Edit and Revert need a "
             "token made with --writes allow. Nothing was written.")


def new_key():
    """A fresh idempotency key for a form."""
    return "web-" + secrets.token_urlsafe(18)


def _article_url(kb_id, article_id):
    return "/kb/%s/articles/%s" % (url_part(kb_id), url_part(article_id))


def _edit(page, store, args):
    """The edit tool's result for the person (its grants, its name in the history, with the
    issuer that signed them in)."""
    return store.call_tool("edit_knowledge_article", args, granted=page.person.grants,
                           actor=page.person.name, issuer=page.person.issuer)


def _since(page, article_id, expected):
    """``(the current article, the diff from ``expected`` to it or None)`` after a conflict."""
    with page.reading() as store:
        current = read(store, page, article_id)
        try:
            old = read(store, page, article_id, expected)
        except ToolError:  # that version is gone or never was: show the current one only
            return current, None
    return current, compare(old["title"], old["content"], current["title"],
                            current["content"])


def edit(page):
    """``/kb/{kb}/articles/{id}/edit``: the form (GET), the save (POST)."""
    kb_id, article_id = page.params["kb"], page.params["id"]
    if page.req.method == "GET":
        with page.reading() as store:
            found = read(store, page, article_id)
        if not page.person.may_write:
            return page.web.error(403, READ_ONLY)
        return page.render("edit.html", kb=kb_id, article=found, title=found["title"],
                           content=found["content"], expected=found["updated_at"],
                           key=new_key(), summary="")
    if not page.person.may_write:
        with page.reading() as store:
            read(store, page, article_id)  # an article they may not see is not found
        return page.web.error(403, READ_ONLY)
    title = page.field("title", "")
    content = page.field("content", "").replace("\r\n", "\n")
    expected = page.field("expected_version", "")
    summary = page.field("summary", "").strip()
    args = {"knowledge_base_id": kb_id, "article_id": article_id, "content": content,
            "title": title, "expected_version": expected,
            "idempotency_key": page.field("idempotency_key", "") or new_key()}
    if summary:
        args["summary"] = summary
    try:
        with page.writing(kb_id) as store:
            done = _edit(page, store, args)
    except VersionConflict:
        current, since = _since(page, article_id, expected)
        return page.render("edit.html", status=409, kb=kb_id, article=current, title=title,
                           content=content, expected=current["updated_at"], key=new_key(),
                           summary=summary, conflict=since, was=expected)
    except InvalidArgument as exc:
        if exc.details.get("argument") not in ("content", "title", "summary",
                                               "expected_version"):
            raise
        with page.reading() as store:
            current = read(store, page, article_id)
        return page.render("edit.html", status=400, kb=kb_id, article=current, title=title,
                           content=content, expected=expected, key=new_key(), summary=summary,
                           problem=exc.message)
    if not done.get("changed", True):
        return article(page, UNCHANGED % done["updated_at"])
    return redirect(_article_url(kb_id, article_id))


def revert(page):
    """``POST /kb/{kb}/articles/{id}/revert``: a new version holding version ``to``'s title
    and text, only if the article is still at ``expected_version``."""
    kb_id, article_id = page.params["kb"], page.params["id"]
    to_version, expected = page.field("to", ""), page.field("expected_version", "")
    with page.reading() as store:
        old = read(store, page, article_id, to_version)
    if not page.person.may_write:
        return page.web.error(403, READ_ONLY)
    try:
        with page.writing(kb_id) as store:
            # A revert is its own action in the history (kb revert's), the summary naming
            # the version it went back to, which no other column records.
            done = store.revert(kb_id, article_id, old["updated_at"],
                                expected_version=expected, actor=page.person.name,
                                summary="revert to %s" % old["updated_at"],
                                idempotency_key=page.field("idempotency_key", "") or new_key(),
                                issuer=page.person.issuer)
    except VersionConflict:
        current, since = _since(page, article_id, expected)
        return page.render("conflict.html", status=409, kb=kb_id, article=current,
                           to=to_version, was=expected, diff=since)
    if not done["changed"]:
        return article(page, UNCHANGED % done["updated_at"])
    return redirect(_article_url(kb_id, article_id))
