"""The store's side of ``kb merge``: an article, the base a file was made from, and the merge
written back with compare-and-swap.

The base is the version a file was imported from (the store's import record, kept through
a prune) unless the caller names one (``--base``, an export's front matter, a conflict left
to resolve). The merged text is written as an edit, only if the article is still at the
version the merge read (one transaction, one event, one version, drafts too); the import
record moves to the new version only once the file holds it too (``mark_imported``), so an
import never takes a file that lacks the merge for the article's own.
"""

import os

from . import access, articles, history
from .errors import InvalidArgument, VersionNotFound, VersionPruned
from .limits import TITLE_MAX
from .validation import check_content, check_people_string, check_title
from .versions import parse_version


def _imported_path(kb, row):
    """Where the article's imported file is (the last import's folder and its source), or
    None where no import made it or the folder is not known."""
    if not (row["source"] and row["import_version"] and kb["import_root"]):
        return None
    return os.path.join(kb["import_root"], *row["source"].split("/"))


def sides(ctx, kb_id, article_id, base=None):
    """``{current, base, base_from, imported_path}``: the article as it is now (title,
    content, version, published, source), the base version's title and content (``base``,
    else the import's version), where the base came from, and the imported file's path.
    InvalidArgument naming ``--base`` where there is no base, or its text was pruned."""
    db = ctx.db
    with db.read():
        kb = access.knowledge_base(db, kb_id)
        row = access.article(db, kb, article_id, published_only=False)
        base_from = "given"
        if base is None:
            base, base_from = row["import_version"], "import"
        if base is None:
            raise InvalidArgument(
                "article %s of knowledge base %s was not imported from a file, so its merge "
                "has no common base: name the version the file was made from with --base V "
                "(kb history %s %s lists them), or compare them with kb diff --file"
                % (article_id, kb_id, kb_id, article_id), argument="--base")
        parse_version(base, "--base")
        try:
            version, content = history.find(db, kb, row, base, argument="--base",
                                            agents=False)
        except VersionPruned:
            raise InvalidArgument(
                "the base version %s of article %s was pruned (kb history prune), so the "
                "merge cannot tell what each side changed: name a kept version with --base V, "
                "or compare with kb diff --file and edit by hand" % (base, article_id),
                argument="--base") from None
        except VersionNotFound:
            raise InvalidArgument(
                "article %s of knowledge base %s has no version %s to merge from: name one of "
                "kb history %s %s with --base V" % (article_id, kb_id, base, kb_id, article_id),
                argument="--base") from None
        current = {key: row[key] for key in ("title", "content", "updated_at", "source")}
        current["published"] = bool(row["published"])
        return {"current": current, "base": {"version": base, "title": version["title"],
                                             "content": content},
                "base_from": base_from, "imported_path": _imported_path(kb, row)}


def write(ctx, kb_id, article_id, *, title, content, expected_version, actor=None,
          summary=None):
    """The merged text as a new version (an ``edit``), only if the article is still at
    ``expected_version``; its visibility stays. Returns ``(updated_at, event or None)``."""
    check_people_string(content, "content", None)
    check_content(content)
    check_people_string(title, "title", TITLE_MAX)
    check_title(title)
    history.check_actor(actor, summary)
    db = ctx.db
    with articles.transaction(db):
        kb = access.knowledge_base(db, kb_id, lock=True)
        row = access.article(db, kb, article_id, published_only=False)
        if parse_version(expected_version, "expected_version") != row["version_us"]:
            raise articles.conflict_error(db, kb, row, expected_version)
        return articles.write(ctx, kb, row, content=content, title=title,
                              published=bool(row["published"]), action="edit", actor=actor,
                              summary=summary)[:2]


def mark_imported(ctx, kb_id, article_id, version):
    """Record ``version`` as what the article's file holds (its import record), if the
    article is still at it; returns whether it was recorded."""
    db = ctx.db
    with db.write():
        kb = access.knowledge_base(db, kb_id, lock=True)
        row = access.article(db, kb, article_id, published_only=False)
        if row["updated_at"] != version:
            return False
        db.articles.mark_imported(row["pk"])
        return True
