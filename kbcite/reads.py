"""The read tool: one published article of a granted knowledge base, or one of its versions.

A read names the article, and optionally a ``version`` (the ``updated_at`` of a citation):
that version's title and content with its citation, and the citation of now (``current``).
Whether the article may be read at all is decided first, exactly as for a plain read, so a
draft, an unpublished article and an ungranted knowledge base answer the same ``not_found``
whatever version is asked; only then is the history looked at, and only the versions the
article had while published can be read.
"""

from . import access, history
from .tools import citation


def read(ctx, args, granted, actor=None, issuer=None):
    """The ``read_knowledge_article`` tool."""
    db = ctx.db
    with db.read():
        kb = access.knowledge_base(db, args["knowledge_base_id"], granted)
        row = access.article(db, kb, args["article_id"], published_only=True)
        title, content, updated_at = row["title"], row["content"], row["updated_at"]
        if "version" in args:
            found, content = history.find(db, kb, row, args["version"])
            title, updated_at = found["title"], found["updated_at"]
    kb_id = kb["kb_id"]
    result = {
        "knowledge_base_id": kb_id,
        "article_id": row["article_id"],
        "title": title,
        "content": content,
        "updated_at": updated_at,
        "citation": citation(kb_id, row["article_id"], updated_at),
        "head_sequence": kb["head_sequence"],
    }
    if "version" in args:
        result["current"] = citation(kb_id, row["article_id"], row["updated_at"])
    return result
