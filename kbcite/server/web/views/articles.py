"""An article's pages: the article (current or pinned), its history, the diff of two versions."""

import json
import secrets

from ..diffs import compare


def split_version(value):
    """``(article ID, version or None)`` of a path's ``{id}`` or ``{id}@{updated_at}``."""
    article_id, sep, version = value.rpartition("@")
    return (article_id, version) if sep and article_id else (value, None)


def read(store, page, article_id, version=None):
    """The read tool's result for the person's grants (a version too): what they may see."""
    args = {"knowledge_base_id": page.params["kb"], "article_id": article_id}
    if version is not None:
        args["version"] = version
    return store.call_tool("read_knowledge_article", args, granted=page.person.grants)


def article(page, notice=None):
    """``/kb/{kb}/articles/{id}`` and ``...@{updated_at}``: the article rendered, its version,
    citation and source; a pinned one says when a newer version exists. ``notice``: what a
    write that changed nothing says above it."""
    kb_id = page.params["kb"]
    article_id, version = split_version(page.params["id"])
    with page.reading() as store:
        found = read(store, page, article_id, version)
        current = store.get_article(kb_id, article_id)
    citation = found["citation"]
    return page.render(
        "article.html", kb=kb_id, article=found, pinned=version is not None,
        current=current["updated_at"], source=current.get("source"),
        body=page.web.renderer.version(kb_id, article_id, found["updated_at"],
                                       found["content"]),
        citation_json=json.dumps(citation, ensure_ascii=False),
        uri="kb://%s/articles/%s@%s" % (kb_id, article_id, found["updated_at"]),
        key=secrets.token_urlsafe(16), notice=notice)


def history(page):
    """``/kb/{kb}/articles/{id}/history``: every version the person may read, newest first:
    time, actor, approver, action, summary, size change; two to compare."""
    kb_id, article_id = page.params["kb"], page.params["id"]
    with page.reading() as store:
        found = read(store, page, article_id)
        rows = [row for row in store.history(kb_id, article_id) if row["published"]]
    rows.reverse()
    return page.render("history.html", kb=kb_id, article=found, versions=rows)


def diff(page):
    """``/kb/{kb}/articles/{id}/diff?from=V&to=W``: side by side (or ``view=inline``), words
    marked within changed paragraphs."""
    kb_id, article_id = page.params["kb"], page.params["id"]
    old_version, new_version = page.arg("from"), page.arg("to")
    with page.reading() as store:
        current = read(store, page, article_id)
        if not old_version or not new_version:
            return page.not_found()
        old = read(store, page, article_id, old_version)
        new = read(store, page, article_id, new_version)
    view = "inline" if page.arg("view") == "inline" else "side"
    return page.render("diff.html", kb=kb_id, article=current, old=old, new=new, view=view,
                       diff=compare(old["title"], old["content"], new["title"],
                                    new["content"]))
