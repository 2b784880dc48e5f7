"""The check_citations tool: for each of up to 100 citations, is it current, changed or gone?

One read transaction whatever the number of citations: the current rows of the cited articles
that are published in one statement, the cited versions and their texts in one each. For a
changed citation the answer carries the change from the cited version to now
(``kbcite.changes``), so an agent learns what changed without reading the article again, and
whether the passage it relied on still stands. The changes are computed after the read, in
one budget of work for the whole call (``changes.Budget``).

What the store hides stays hidden: a citation of another knowledge base is ``not_found``
without that knowledge base being looked at; a missing, draft or unpublished article is
``gone`` alike, decided on the small columns before any text is read; a cited version the
article never had while published is ``changed`` with no change given (``version_not_found``),
as a version the history no longer holds is (``version_pruned``).
"""

from typing import Any

from . import access, changes
from .tools import citation
from .versions import parse_version


def check(ctx, args, granted, actor=None, issuer=None):
    """The ``check_citations`` tool."""
    cited = args["citations"]
    versions = []
    for i, item in enumerate(cited):
        argument = "citations[%d].updated_at" % i
        versions.append(parse_version(item["updated_at"], argument))
    db = ctx.db
    with db.read():
        kb = access.knowledge_base(db, args["knowledge_base_id"], granted)
        own = sorted({item["article_id"] for item in cited
                      if item["knowledge_base_id"] == kb["kb_id"]})
        # Published articles only: a draft's or an unpublished article's text is never read.
        rows = db.articles.published(kb["pk"], own) if own else {}
        wanted = [(rows[item["article_id"]]["pk"], us) for item, us in zip(cited, versions)
                  if item["knowledge_base_id"] == kb["kb_id"] and item["article_id"] in rows
                  and us is not None and us != rows[item["article_id"]]["version_us"]]
        found = db.history.at(wanted)
        texts = db.articles.texts(row["text_pk"] for row in found.values()
                         if row["published"] and row["text_pk"] is not None)
    # One budget of diff work for the whole call, and each distinct change computed once.
    diff = _Differ(changes.Budget())
    results = []
    for item, us in zip(cited, versions):
        results.append(_status(kb, item, us, rows, found, texts, diff))
    return {"knowledge_base_id": kb["kb_id"], "results": results,
            "head_sequence": kb["head_sequence"]}


class _Differ:
    """The changes of one call: computed once per (cited text, current row), in one budget."""

    def __init__(self, budget):
        self.budget = budget
        self.done = {}

    def __call__(self, version, text, row):
        key = (version["title"], version["text_pk"], row["pk"])
        if key not in self.done:
            self.done[key] = changes.changes(version["title"], text, row["title"],
                                             row["content"], budget=self.budget)
        return self.done[key]


def _status(kb, item, us, rows, found, texts, diff):
    """One citation's answer, from what the read transaction gathered."""
    answer: dict[str, Any] = {"citation": dict(item), "status": None, "current": None,
                              "changes": None}
    if item["knowledge_base_id"] != kb["kb_id"]:
        answer["status"] = "not_found"
        answer["reason"] = "the citation names another knowledge base than this call"
        return answer
    row = rows.get(item["article_id"])
    if row is None:
        answer["status"] = "gone"
        return answer
    answer["current"] = citation(kb["kb_id"], row["article_id"], row["updated_at"])
    if us == row["version_us"]:
        answer["status"] = "current"
        return answer
    answer["status"] = "changed"
    version = found.get((row["pk"], us))
    if version is None or not version["published"]:
        answer["reason"] = "version_not_found"
    elif version["text_pk"] is None:
        answer["reason"] = "version_pruned"
    else:
        answer["changes"] = diff(version, texts[version["text_pk"]], row)
    return answer

