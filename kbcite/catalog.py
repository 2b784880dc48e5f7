"""The catalogue: what a caller may list of the store, page by page, and the values that
complete the IDs it types.

An agent lists the published articles of the knowledge bases it was granted, nothing else:
a knowledge base that is missing and one that is not granted are equally absent (no page, no
completion tells them apart), and a draft or an unpublished article is never listed. Pages
run in one order (knowledge base ID, then article ID) and resume after the last entry given,
so a page is found by an index seek however deep the listing is, and an article saved
between two pages is neither skipped nor repeated.
"""

from typing import Any

from . import access
from .errors import InvalidArgument, NotFound
from .search import hits
from .search.text import tokens
from .validation import check_text

# Completion values at most (server/utilities/completion.mdx: "Maximum 100 items").
COMPLETIONS_MAX = 100

# Search hits a completion by title words asks for: the search tool's own cap.
COMPLETION_SEARCH_HITS = 20


def _granted_kbs(db, granted, after_kb=""):
    """The granted knowledge bases that exist, by ID, from ``after_kb`` on."""
    rows = []
    for kb_id in sorted(k for k in granted if k >= after_kb):
        row = db.kbs.row(kb_id)
        if row is not None:
            rows.append(row)
    return rows


def page(ctx, granted, after, limit):
    """``(entries, last)``: up to ``limit`` published articles after ``after`` (a
    ``(knowledge_base_id, article_id)`` pair, or None for the first page), each a dict of
    ``knowledge_base_id, article_id, title, updated_at, bytes``; ``last`` is the pair to resume
    after, or None when the listing is done."""
    db = ctx.db
    after_kb, after_article = after if after is not None else ("", "")
    out: list[dict[str, Any]] = []
    with db.read():
        for kb in _granted_kbs(db, granted, after_kb):
            start = after_article if kb["kb_id"] == after_kb else ""
            for row in db.articles.published_page(kb["pk"], start, limit - len(out) + 1):
                out.append(dict(row, knowledge_base_id=kb["kb_id"]))
            if len(out) > limit:
                break
    if len(out) > limit:
        out = out[:limit]
        return out, (out[-1]["knowledge_base_id"], out[-1]["article_id"])
    return out, None


def recent(ctx, granted, kb_id, offset, limit):
    """``(a page of the published articles of granted ``kb_id``, the newest change first,
    how many it publishes)``: the web pages' list of a knowledge base."""
    db = ctx.db
    with db.read():
        kb = access.knowledge_base(db, kb_id, granted)
        return db.articles.published_recent(kb["pk"], offset, limit), kb["published_count"]


def knowledge_bases(ctx, granted, prefix):
    """``(values, total)``: the IDs of granted knowledge bases that exist and start with
    ``prefix``, at most ``COMPLETIONS_MAX`` of them; InvalidArgument for a prefix no ID can
    start with (a NUL, a lone surrogate), as the tools refuse such strings."""
    check_text(prefix, "argument.value")
    with ctx.db.read():
        found = [kb["kb_id"] for kb in _granted_kbs(ctx.db, granted)
                 if kb["kb_id"].startswith(prefix)]
    return found[:COMPLETIONS_MAX], len(found)


def article_ids(ctx, granted, kb_id, text):
    """``(values, has_more)``: published article IDs of a granted knowledge base that start
    with ``text``, then those with a title word starting with the last word of ``text``, then
    those whose title or text match ``text`` as search words; nothing (not an error) for a
    knowledge base that is missing or not granted. InvalidArgument for a string the tools
    refuse (a NUL, a lone surrogate)."""
    check_text(text, "argument.value")
    check_text(kb_id, "context.arguments.knowledge_base_id")
    db = ctx.db
    with db.read():
        try:
            kb = access.knowledge_base(db, kb_id, granted)
        except NotFound:
            return [], False
        values = db.articles.published_ids_with_prefix(kb["pk"], text, COMPLETIONS_MAX + 1)
        words = tokens(text)
        if words and len(values) <= COMPLETIONS_MAX:
            # The word being typed is a prefix: "reset pass" finds "Resetting your password".
            for article_id in db.articles.title_prefix_ids(kb["pk"], words[-1],
                                                           COMPLETIONS_MAX + 1):
                if article_id not in values:
                    values.append(article_id)
    has_more = len(values) > COMPLETIONS_MAX
    values = values[:COMPLETIONS_MAX]
    if len(values) < COMPLETIONS_MAX and len(text.strip()) >= 2:
        args = {"knowledge_base_id": kb_id, "query": text.strip()[:200],
                "limit": COMPLETION_SEARCH_HITS}
        try:
            found = hits.search(ctx, args, granted)["results"]
        except InvalidArgument:  # words the search cannot take (a lone operator): no hits
            found = []
        seen = set(values)
        for hit in found:
            if hit["article_id"] not in seen and len(values) < COMPLETIONS_MAX:
                seen.add(hit["article_id"])
                values.append(hit["article_id"])
    return values, has_more
