"""Import: a folder of Markdown files synced into a knowledge base, honouring later edits.

``kbcite.folder_scan`` reads and checks every file first (the only I/O of an import), naming every
bad one; ``sync_plan`` decides what to do with each file and article (pure: it reads nothing
and writes nothing); ``sync_apply`` carries one decision out in the sync's one write
transaction. An article edited since the import wrote it (by a person or an agent) is left
alone and reported as a conflict, unless forced, or unless the file was written from the
article's current version (an export: its front matter names the version). A file whose front
matter names an article (``article_id``, as an export writes it) is that article's file,
wherever it moved. Pruning is guarded: the store remembers the folder each knowledge base was
last imported from, and pruning from another one, or unpublishing more than half of what the
imports made, needs ``yes``.
"""

import collections

from . import access, articles
from .changes import normalized
from .errors import InvalidArgument
from .folder_scan import bad_files_error, read_folder
from .limits import SYNC_ACTIONS
from .linediff import similarity
from .validation import check_new_article, check_source

# Who the history says made an import's versions.
IMPORT_ACTOR = "import"
# A vanished file and a new one are one file renamed when they share this much of their text:
# git's default (diff -M50%).
RENAME_SIMILARITY = 0.5
# New files times vanished ones compared for renames at most (each comparison bounded): past
# it, none is paired, and the import says so. Git stops at a like number (diff.renameLimit).
RENAME_PAIRS_MAX = 40000

# The actions that write nothing, so the progress of writing leaves them out.
QUIET_ACTIONS = frozenset(("unchanged", "conflict", "orphan"))


def import_directory(ctx, kb_id, directory, *, prune=False, force=False, dry_run=False,
                     skip_bad=False, yes=False, progress=None):
    """Sync a folder of Markdown files into a knowledge base; returns the plan it carried out,
    with the files it could not import (``bad``) and those it left out (``skipped``).

    Every file is read and checked first: a bad one stops the import, naming all of them,
    unless ``skip_bad`` imports the others. See ``sync_articles`` for the rest.
    """
    with ctx.db.read():
        access.knowledge_base(ctx.db, kb_id)
    found = read_folder(directory, progress)
    if found.bad and not skip_bad:
        raise bad_files_error(found)
    result = sync_articles(ctx, kb_id, found.documents, prune=prune, force=force,
                           dry_run=dry_run, yes=yes, root=found.root, progress=progress)
    result.update(bad=found.bad, skipped=found.skipped)
    return result


def sync_articles(ctx, kb_id, documents, *, prune=False, force=False, dry_run=False,
                  yes=False, root=None, progress=None):
    """Make the articles imported from ``documents`` match them, honouring later edits.

    Each imported article remembers its source path and the version the import wrote.
    An article whose version is still that one (or the version a document's front matter
    names) is updated to its file; one edited since (by a person or an agent) is left alone
    and reported as a ``conflict``, unless ``force``. A document naming an article
    (``article_id``) is that article's, wherever it moved; a new path whose text equals an
    article whose file is gone is a rename. With ``prune``, articles whose file is gone are
    unpublished (their text is kept); without ``yes`` a prune is refused from another
    ``root`` than the last import's, or when it would unpublish more than half of the
    imported articles. One transaction: all of it is written, or none. ``dry_run`` writes
    nothing (and warns where a prune would be refused). Returns ``{"actions", "counts",
    "dry_run", "warnings", "root"}``; actions are ``create``, ``update``, ``rename``,
    ``adopt`` (a store-made article that a file now holds), ``unchanged``, ``conflict``,
    ``unpublish`` and ``orphan`` (file gone, article kept: no ``prune``).
    """
    documents = list(documents)
    seen = set()
    for doc in documents:
        check_source(doc.source)
        check_new_article(doc.title, doc.content, "title of %s" % doc.source,
                          "content of %s" % doc.source)
        if doc.source in seen:
            raise InvalidArgument("source %r appears twice" % doc.source, argument="source")
        seen.add(doc.source)
    db = ctx.db
    with articles.transaction(db):
        kb = access.knowledge_base(db, kb_id, lock=True)
        rows = {row["source"]: row for row in db.articles.imported(kb["pk"])}
        named = sorted({doc.article_id for doc in documents if doc.article_id})
        by_id = db.articles.by_ids(kb["pk"], named) if named else {}
        notes: list[str] = []
        actions = sync_plan(rows, by_id, documents, prune, force, notes)
        warnings = prune_warnings(kb, rows, actions, root) if prune else []
        if warnings and not (yes or dry_run):
            raise InvalidArgument(
                "the import would prune: %s. Nothing was written; run it again with yes=True "
                "if that is what you mean" % "; and ".join(warnings),
                argument="prune")
        if not dry_run:
            writing = sum(1 for a in actions if a["action"] not in QUIET_ACTIONS)
            written = 0
            for action in actions:
                sync_apply(ctx, kb, rows, by_id, action)
                if action["action"] not in QUIET_ACTIONS:
                    written += 1
                    if progress is not None:
                        progress("write", written, writing)
            if any(a["action"] in ("create", "update") for a in actions):
                db.optimize(kb["pk"])
            if root is not None:
                db.kbs.set_import_root(kb["pk"], root)
        for action in actions:
            action.pop("document", None)
    counts = collections.Counter(action["action"] for action in actions)
    return {"actions": actions, "counts": {name: counts[name] for name in SYNC_ACTIONS},
            "dry_run": dry_run, "warnings": warnings, "notes": notes, "root": root}


def prune_warnings(kb, rows, actions, root):
    """Why a prune needs ``yes``: another folder than the last import's, or most of what the
    imports made unpublished at once."""
    out = []
    if root is not None and kb["import_root"] and kb["import_root"] != root:
        out.append("knowledge base %s was last imported from %s, not %s, and every article "
                   "this folder does not hold would be unpublished"
                   % (kb["kb_id"], kb["import_root"], root))
    published = sum(1 for row in rows.values() if row["published"])
    going = sum(1 for a in actions if a["action"] == "unpublish")
    if going and going * 2 > published:
        out.append("it would unpublish %d of the %d published articles imports made"
                   % (going, published))
    return out


def _text_of(title, content):
    """An article's or a file's text as a rename compares it: the title, then the text."""
    return "%s\n%s\n" % (title, normalized(content))


def renamed_pairs(docs, gone):
    """``[(doc, source, similarity)]``: the files ``docs`` that no article holds, each paired
    with the article of a vanished file (``gone``: source to row) whose text it shares at
    least ``RENAME_SIMILARITY`` of, as git pairs a rename; the most similar pairs first, each
    file and article in one pair at most. Past ``RENAME_PAIRS_MAX`` comparisons none are
    paired (returns None)."""
    if not docs or not gone:
        return []
    if len(docs) * len(gone) > RENAME_PAIRS_MAX:
        return None
    texts = {source: _text_of(row["title"], row["content"]) for source, row in gone.items()}
    scored = []
    for doc in docs:
        text = _text_of(doc.title, doc.content)
        for source, old in texts.items():
            # The shared part is at most the shorter text: a cheap bound before the diff.
            if min(len(text), len(old)) < RENAME_SIMILARITY * max(len(text), len(old)):
                continue
            score = similarity(old, text)
            if score >= RENAME_SIMILARITY:
                scored.append((-score, doc.source, source, doc))
    pairs, taken_docs, taken_rows = [], set(), set()
    for score, doc_source, source, doc in sorted(scored, key=lambda item: item[:3]):
        if doc_source in taken_docs or source in taken_rows:
            continue
        taken_docs.add(doc_source)
        taken_rows.add(source)
        pairs.append((doc, source, -score))
    return pairs


def sync_plan(rows, by_id, documents, prune, force, notes=None):
    """What a sync would do, as a list of action dicts (pure: reads nothing, writes nothing).

    ``rows`` are the imported articles by source, ``by_id`` the articles that documents'
    front matter names, by article ID. A file that no article holds is the article of a
    vanished file whose text it equals, else whose text it shares at least half of (git's
    rename); ``notes`` (a list) hears why such renames were not looked for.
    """
    claimed = set()
    # A document that names its article (an export's front matter) is that article's file.
    owner = {}
    for doc in documents:
        row = by_id.get(doc.article_id) if doc.article_id else None
        if row is not None and row["pk"] not in claimed:
            owner[doc.source] = row
            claimed.add(row["pk"])
    by_path = {doc.source for doc in documents}
    gone = {source: row for source, row in rows.items()
            if source not in by_path and row["pk"] not in claimed}
    # A file moved without a change: same title and text as an article whose file is gone.
    by_text: dict[tuple[str, str], str] = {}
    for source, row in sorted(gone.items()):
        by_text.setdefault((row["title"], normalized(row["content"])), source)
    found = {}  # a file's source: (its article's row, the action so far)
    unmatched = []
    for doc in documents:
        action = {"source": doc.source, "title": doc.title, "document": doc}
        row = owner.get(doc.source)
        if row is not None and row["source"] != doc.source:
            if row["source"] is None:
                action.update(action="adopt")
            else:
                action.update(action="rename", previous_source=row["source"])
                gone.pop(row["source"], None)
        if row is None:
            row = rows.get(doc.source)
            if row is not None and row["pk"] in claimed and doc.source not in owner:
                row = None  # its article went to the file that names it
        if row is None:
            old = by_text.pop((doc.title, normalized(doc.content)), None)
            if old is not None and old in gone:
                row = gone.pop(old)
                action.update(action="rename", previous_source=old, similarity=100)
            else:
                unmatched.append(doc)
        if row is not None:
            claimed.add(row["pk"])
        found[doc.source] = (row, action)
    # Files moved and changed: paired with a vanished file's article by how much they share.
    pairs = renamed_pairs(unmatched, gone)
    if pairs is None:
        if notes is not None:
            notes.append("%d new files and %d vanished ones are more than %d pairs to compare, "
                         "so renamed files were not looked for by their text (each is a new "
                         "article, its old one an orphan); move files in smaller commits"
                         % (len(unmatched), len(gone), RENAME_PAIRS_MAX))
        pairs = []
    for doc, source, score in pairs:
        row = gone.pop(source)
        claimed.add(row["pk"])
        found[doc.source][1].update(action="rename", previous_source=source,
                                    similarity=int(score * 100))
        found[doc.source] = (row, found[doc.source][1])
    actions = []
    for doc in documents:
        row, action = found[doc.source]
        if row is None:
            action["action"] = "create"
            actions.append(action)
            continue
        action.update(article_id=row["article_id"], current_version=row["updated_at"],
                      import_version=row["import_version"])
        # Ours to write: the import wrote this version, or the file was made from it.
        owned = row["import_version"] == row["updated_at"] or doc.version == row["updated_at"]
        same = (row["title"], normalized(row["content"])) == (doc.title, normalized(doc.content))
        # A file that says it is a draft's (an export's published: false) leaves the
        # article's visibility as it is; any other file is of a published article.
        if same and (row["published"] or not doc.published):
            action.setdefault("action", "unchanged")
        elif owned or force:
            action.setdefault("action", "update")
            action["write"] = True
        else:
            action["action"] = "conflict"
        actions.append(action)
    for source, row in sorted(gone.items()):
        if not row["published"] or row["pk"] in claimed:
            continue
        actions.append({"source": source, "title": row["title"],
                        "article_id": row["article_id"],
                        "current_version": row["updated_at"],
                        "import_version": row["import_version"],
                        "action": "unpublish" if prune else "orphan"})
    return actions


def sync_apply(ctx, kb, rows, by_id, action):
    """Carry out one planned action in the caller's transaction."""
    kind, doc = action["action"], action.get("document")
    if kind in ("conflict", "orphan"):
        return
    if kind == "create":
        action["article_id"] = articles.insert(
            ctx, kb, [(doc.title, doc.content, doc.source)], doc.published, action="import",
            actor=IMPORT_ACTOR)[0]
        pk = ctx.db.articles.visibility(kb["pk"], action["article_id"])["pk"]
    else:
        row = by_id.get(action["article_id"]) if doc is not None and doc.article_id else None
        if row is None or row["article_id"] != action["article_id"]:
            row = rows[action.get("previous_source", action["source"])]
        pk = row["pk"]
        if kind == "unchanged" and row["import_version"] == row["updated_at"]:
            # Already marked as this import would mark it: nothing to write or read back.
            action["version"] = row["updated_at"]
            return
        if kind in ("rename", "adopt"):
            ctx.db.articles.set_source(pk, doc.source)
        if kind == "unpublish":
            articles.write(ctx, kb, row, content=row["content"], title=row["title"],
                           published=False, action="unpublish", actor=IMPORT_ACTOR)
        elif action.get("write"):
            articles.write(ctx, kb, row, content=doc.content, title=doc.title,
                           published=True if doc.published else bool(row["published"]),
                           action="import", actor=IMPORT_ACTOR)
    # What the import wrote, or found equal to its file: later edits are told apart by it.
    ctx.db.articles.mark_imported(pk)
    action["version"] = ctx.db.articles.get(pk)["updated_at"]
