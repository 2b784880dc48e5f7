"""The search tool: a query's ranked hits in one granted knowledge base, each with its citation.

One read transaction: the tiers (``tiers.ranked``) find the hits (fused with the nearest
vectors' where the store's semantic half is on: ``semantic.fuse``), their rows come with the
first ``SNIPPET_SCAN_CHARS`` characters of content only, and each gets a snippet (cached by
article version).
"""

from typing import Any

from .. import access
from ..errors import StoreDamaged
from ..limits import SEARCH_LIMIT_DEFAULT
from ..tools import citation
from .semantic import FUSION_DEPTH, fuse
from .snippets import SNIPPET_SCAN_CHARS, SnippetTerms
from .tiers import ranked


def hit_rows(db, kb, pks):
    """The hits' rows (content cut to the snippet window), checked against the index."""
    rows = {row["pk"]: row for row in db.articles.hits(pks, SNIPPET_SCAN_CHARS)}
    if len(rows) != len(pks):
        raise StoreDamaged(
            "the search index of knowledge base %r lists %d article(s) that are not in the "
            "articles table. A retry will not help; the store's operator must run the audit "
            "and rebuild the index (kb reindex %s)." % (kb["kb_id"], len(set(pks) - set(rows)),
                                                       kb["kb_id"]),
            knowledge_base_id=kb["kb_id"], retryable=False)
    return rows


def search(ctx, args, granted, actor=None, issuer=None):
    """The ``search_knowledge_base`` tool."""
    limit = args.get("limit", SEARCH_LIMIT_DEFAULT)
    db = ctx.db
    work: dict[str, Any] = {}
    ctx.last_search = work
    semantic = ctx.semantic
    with db.read():
        kb = access.knowledge_base(db, args["knowledge_base_id"], granted)
        if semantic is not None and semantic.on:
            # Hybrid: both rankings, deeper than asked, fused under exact-title-first.
            depth = max(limit, FUSION_DEPTH)
            lexical, terms, in_body = ranked(db, kb, args["query"], depth, work)
            nearest = semantic.nearest(db, kb, args["query"], depth)
            work["semantic"] = len(nearest)
            hits = fuse(lexical, work.get("named", ()), nearest, limit)
        else:
            lexical, terms, in_body = ranked(db, kb, args["query"], limit, work)
            hits = [(pk, "lexical") for pk in lexical]
        rows = hit_rows(db, kb, [pk for pk, _ in hits]) if hits else {}
    kb_id = kb["kb_id"]
    terms = SnippetTerms(terms)  # made once, for every hit's snippet
    results = []
    for pk, match in hits:
        row = rows[pk]
        results.append({
            "article_id": row["article_id"],
            "title": row["title"],
            # A semantic hit's body was not scored: every term is looked for.
            "snippet": ctx.snippets.get(row, terms, work, in_body.get(pk, -1)),
            "updated_at": row["updated_at"],
            # Where an import found it (a path in the folder), else None: two articles of one
            # title are told apart by it.
            "source": row["source"],
            "citation": citation(kb_id, row["article_id"], row["updated_at"]),
            # Which half found it: its words (lexical), its meaning (semantic), or both.
            "match": match,
        })
    return {"knowledge_base_id": kb_id, "query": args["query"], "results": results,
            "head_sequence": kb["head_sequence"]}
