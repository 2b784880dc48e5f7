"""Import: a folder of Markdown files synced into a knowledge base, honouring later edits.

``read_markdown_folder`` reads and checks every file first (the only I/O here); ``sync_plan``
decides what to do with each file and article (pure: it reads nothing and writes nothing);
``sync_apply`` carries one decision out in the sync's one write transaction. An article
edited since the import wrote it (by a person or an agent) is left alone and reported as a
conflict, unless forced.
"""

import collections
import os

from . import access, articles
from .errors import InvalidArgument, ToolError
from .limits import SYNC_ACTIONS
from .markdown import SourceDocument, parse_markdown, read_utf8_file
from .validation import check_new_article, check_people_string

# Who the history says made an import's versions.
IMPORT_ACTOR = "import"

def read_markdown_folder(directory, progress=None):
    """Every ``*.md`` file below ``directory`` as SourceDocuments, sorted by path.

    Reads and checks them all before anything is written, so a bad file stops an import
    before it starts. Raises InvalidArgument naming the folder or file and what is wrong.
    """
    if not os.path.isdir(directory):
        raise InvalidArgument("%s is not a folder" % directory, argument="directory",
                              path=str(directory))
    failures = []

    def walk_error(exc):
        failures.append(exc)

    paths = []
    for root, dirs, files in os.walk(directory, onerror=walk_error):
        dirs.sort()
        paths.extend(os.path.join(root, name) for name in sorted(files) if name.endswith(".md"))
    if failures:
        exc = failures[0]
        raise InvalidArgument("cannot read the folder %s: %s" % (exc.filename, exc.strerror),
                              argument="directory", path=str(exc.filename))
    documents = []
    for done, path in enumerate(paths, 1):
        source = os.path.relpath(path, directory).replace(os.sep, "/")
        text = read_utf8_file(path, path, "directory")
        try:
            title, content = parse_markdown(text, os.path.splitext(os.path.basename(path))[0])
            check_new_article(title, content, "title", "content")
        except (ValueError, ToolError) as exc:
            raise InvalidArgument("%s cannot be imported: %s" % (
                path, exc.message if isinstance(exc, ToolError) else exc),
                argument="directory", path=path) from None
        documents.append(SourceDocument(source, title, content))
        if progress is not None:
            progress("read", done, len(paths))
    return documents


def import_directory(ctx, kb_id, directory, *, prune=False, force=False, dry_run=False,
                     progress=None):
    """Sync a folder of Markdown files into a knowledge base; returns the plan it carried out.

    See ``sync_articles``; the files are all read and checked first (``read_markdown_folder``).
    """
    with ctx.db.read():
        access.knowledge_base(ctx.db, kb_id)
    documents = read_markdown_folder(directory, progress)
    return sync_articles(ctx, kb_id, documents, prune=prune, force=force, dry_run=dry_run,
                         progress=progress)


def sync_articles(ctx, kb_id, documents, *, prune=False, force=False, dry_run=False,
                  progress=None):
    """Make the articles imported from ``documents`` match them, honouring later edits.

    Each imported article remembers its source path and the version the import wrote.
    An article whose version is still that one is updated to its file; one edited since
    (by a person or an agent) is left alone and reported as a ``conflict``, unless
    ``force``. A new path whose text equals an article whose file is gone is a rename.
    With ``prune``, articles whose file is gone are unpublished (their text is kept).
    One transaction: all of it is written, or none. ``dry_run`` writes nothing.
    Returns ``{"actions": [...], "counts": {action: n}}``; actions are ``create``,
    ``update``, ``unchanged``, ``conflict``, ``rename``, ``unpublish`` and ``orphan``
    (file gone, article kept: no ``prune``).
    """
    documents = list(documents)
    seen = set()
    for doc in documents:
        check_people_string(doc.source, "source", None)
        check_new_article(doc.title, doc.content, "title of %s" % doc.source,
                          "content of %s" % doc.source)
        if doc.source in seen:
            raise InvalidArgument("source %r appears twice" % doc.source, argument="source")
        seen.add(doc.source)
    db = ctx.db
    with db.write():
        kb = access.knowledge_base(db, kb_id, lock=True)
        rows = {row["source"]: row for row in db.articles_imported(kb["pk"])}
        actions = sync_plan(rows, documents, prune, force)
        if not dry_run:
            for done, action in enumerate(actions, 1):
                sync_apply(ctx, kb, rows, action)
                if progress is not None:
                    progress("write", done, len(actions))
            if any(a["action"] in ("create", "update") for a in actions):
                db.optimize(kb["pk"])
        for action in actions:
            action.pop("document", None)
    counts = collections.Counter(action["action"] for action in actions)
    return {"actions": actions, "counts": {name: counts[name] for name in SYNC_ACTIONS},
            "dry_run": dry_run}


def sync_plan(rows, documents, prune, force):
    """What a sync would do, as a list of action dicts (pure: reads nothing, writes nothing)."""
    by_path = {doc.source: doc for doc in documents}
    gone = {source: row for source, row in rows.items() if source not in by_path}
    # A file moved without a change: same title and text as an article whose file is gone.
    by_text = {}
    for source, row in sorted(gone.items()):
        by_text.setdefault((row["title"], row["content"]), source)
    actions = []
    for doc in documents:
        row = rows.get(doc.source)
        action = {"source": doc.source, "title": doc.title, "document": doc}
        if row is None:
            old = by_text.pop((doc.title, doc.content), None)
            if old is not None and old in gone:
                row = gone.pop(old)
                action.update(action="rename", previous_source=old)
            else:
                action["action"] = "create"
                actions.append(action)
                continue
        action.update(article_id=row["article_id"], current_version=row["updated_at"],
                      import_version=row["import_version"])
        owned = row["import_version"] == row["updated_at"]
        if row["published"] and (row["title"], row["content"]) == (doc.title, doc.content):
            action.setdefault("action", "unchanged")
        elif owned or force:
            action.setdefault("action", "update")
            action["write"] = True
        else:
            action["action"] = "conflict"
        actions.append(action)
    for source, row in sorted(gone.items()):
        if not row["published"]:
            continue
        actions.append({"source": source, "title": row["title"],
                        "article_id": row["article_id"],
                        "current_version": row["updated_at"],
                        "import_version": row["import_version"],
                        "action": "unpublish" if prune else "orphan"})
    return actions


def sync_apply(ctx, kb, rows, action):
    """Carry out one planned action in the caller's transaction."""
    kind, doc = action["action"], action.get("document")
    if kind in ("conflict", "orphan"):
        return
    if kind == "create":
        action["article_id"] = articles.insert(
            ctx, kb, [(doc.title, doc.content, doc.source)], True, action="import",
            actor=IMPORT_ACTOR)[0]
        pk = ctx.db.article_visibility(kb["pk"], action["article_id"])["pk"]
    else:
        row = rows[action.get("previous_source", action["source"])]
        pk = row["pk"]
        if kind == "rename":
            ctx.db.article_set_source(pk, doc.source)
        if kind == "unpublish":
            articles.write(ctx, kb, row, content=row["content"], title=row["title"],
                           published=False, action="unpublish", actor=IMPORT_ACTOR)
        elif action.get("write"):
            articles.write(ctx, kb, row, content=doc.content, title=doc.title, published=True,
                           action="import", actor=IMPORT_ACTOR)
    # What the import wrote, or found equal to its file: later edits are told apart by it.
    ctx.db.article_mark_imported(pk)
    action["version"] = ctx.db.article(pk)["updated_at"]
