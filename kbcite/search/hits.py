"""The search tool: a query's ranked hits in one granted knowledge base, each with its citation.

One read transaction: the tiers (``tiers.ranked``) find the hits, their rows come with the
first ``SNIPPET_SCAN_CHARS`` characters of content only, and each gets a snippet (cached by
article version).
"""

from .. import access
from ..errors import StoreDamaged
from ..limits import SEARCH_LIMIT_DEFAULT
from ..tools import citation
from .snippets import SNIPPET_SCAN_CHARS
from .tiers import ranked


def hit_rows(db, kb, pks):
    """The hits' rows (content cut to the snippet window), checked against the index."""
    rows = {row["pk"]: row for row in db.article_hits(pks, SNIPPET_SCAN_CHARS)}
    if len(rows) != len(pks):
        raise StoreDamaged(
            "the search index of knowledge base %r lists %d article(s) that are not in the "
            "articles table. A retry will not help; the store's operator must run the audit "
            "and rebuild the index (kb reindex %s)." % (kb["kb_id"], len(set(pks) - set(rows)),
                                                       kb["kb_id"]),
            knowledge_base_id=kb["kb_id"], retryable=False)
    return rows


def search(ctx, args, granted, actor=None):
    """The ``search_knowledge_base`` tool."""
    limit = args.get("limit", SEARCH_LIMIT_DEFAULT)
    db, work = ctx.db, {}
    ctx.last_search = work
    with db.read():
        kb = access.knowledge_base(db, args["knowledge_base_id"], granted)
        hits, terms = ranked(db, kb, args["query"], limit, work)
        rows = hit_rows(db, kb, hits) if hits else {}
    kb_id = kb["kb_id"]
    results = []
    for pk in hits:
        row = rows[pk]
        results.append({
            "article_id": row["article_id"],
            "title": row["title"],
            "snippet": ctx.snippets.get(row, terms, work),
            "updated_at": row["updated_at"],
            # Where an import found it (a path in the folder), else None: two articles of one
            # title are told apart by it.
            "source": row["source"],
            "citation": citation(kb_id, row["article_id"], row["updated_at"]),
        })
    return {"knowledge_base_id": kb_id, "query": args["query"], "results": results,
            "head_sequence": kb["head_sequence"]}
