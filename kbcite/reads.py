"""The read tool: one published article of a granted knowledge base, and its citation."""

from . import access
from .tools import citation


def read(ctx, args, granted):
    """The ``read_knowledge_article`` tool."""
    db = ctx.db
    with db.read():
        kb = access.knowledge_base(db, args["knowledge_base_id"], granted)
        row = access.article(db, kb, args["article_id"], published_only=True)
    kb_id = kb["kb_id"]
    return {
        "knowledge_base_id": kb_id,
        "article_id": row["article_id"],
        "title": row["title"],
        "content": row["content"],
        "updated_at": row["updated_at"],
        "citation": citation(kb_id, row["article_id"], row["updated_at"]),
        "head_sequence": kb["head_sequence"],
    }
