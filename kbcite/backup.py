"""A knowledge base as one JSON document, and back: moved to another store, or kept apart,
with its article IDs, versions, history, event log and texts exactly as they were.

``dump`` reads a knowledge base in one read transaction (a consistent snapshot while others
write); ``restore`` writes it into a store as a new knowledge base in one write transaction:
all of it, or nothing. Unlike an export and an import, nothing is renumbered and no text is
normalized (a trailing newline stays). What is not carried: the search index, which the
restore builds anew, and what belongs to the store rather than to the knowledge base (tokens,
sessions, edits' idempotency keys, proposals awaiting review).
"""

from . import access
from .engines.sql.history import VERSION_COLUMNS
from .errors import InvalidArgument
from .limits import EVENT_DELETED
from .search import index
from .validation import check_kb_id, check_people_string
from .versions import parse_version

# What a dump says it is: a restore refuses anything else, and a later format a new number.
DUMP_FORMAT = "kbcite-dump"
DUMP_VERSION = 1
# A version row's fields, as the dump names them: the history's columns but the keys (its
# text is ``content``, or None: pruned). A dump older than a column restores it as null.
VERSION_FIELDS = tuple(c for c in VERSION_COLUMNS if c not in ("article_pk", "text_pk"))


def _bad(message, *args):
    """The refusal of a file that is not a dump this store can restore."""
    return InvalidArgument(("the dump " + message) % args, argument="file")


def dump(ctx, kb_id):
    """A knowledge base as a JSON-ready dict: its articles with every version and text, and
    its event log."""
    db = ctx.db
    with db.read():
        kb = access.knowledge_base(db, kb_id)
        info = db.kbs.dump_row(kb["pk"])
        rows = db.articles.of_kb(kb["pk"])
        histories = {row["pk"]: db.history.of(row["pk"]) for row in rows}
        texts = db.articles.texts([v["text_pk"] for vs in histories.values() for v in vs
                          if v["text_pk"] is not None])
        log, after = [], 0
        while True:
            page = db.events.after(kb["pk"], after, 1000)
            log += [dict(event) for event in page]
            if len(page) < 1000:
                break
            after = page[-1]["sequence"]
        # A deletion's event keeps who deleted (no version is left to say so).
        own = db.events.actors(kb["pk"], [e["sequence"] for e in log
                                         if e["type"] == EVENT_DELETED])
        log = [dict(e, **{k: own[e["sequence"]][k] for k in ("actor", "actor_issuer")})
               if e["sequence"] in own else e for e in log]
    articles = [{
        "article_id": row["article_id"], "source": row["source"],
        "import_version": row["import_version"], "published": bool(row["published"]),
        "updated_at": row["updated_at"], "title": row["title"], "content": row["content"],
        "versions": [dict({name: version[name] for name in VERSION_FIELDS},
                          published=bool(version["published"]),
                          content=texts.get(version["text_pk"]))
                     for version in histories[row["pk"]]]} for row in rows]
    return {"format": DUMP_FORMAT, "version": DUMP_VERSION, "knowledge_base_id": kb["kb_id"],
            "name": info["name"], "head_sequence": kb["head_sequence"],
            "articles_created": info["articles_created"], "import_root": kb["import_root"],
            "articles": articles, "events": log}


def check_dump(data):
    """Refuse a document that is not a dump of this format, naming what is wrong."""
    if not isinstance(data, dict) or data.get("format") != DUMP_FORMAT:
        raise _bad("is not a knowledge-base dump (made by kb dump): its format is %r",
                   data.get("format") if isinstance(data, dict) else type(data).__name__)
    if data.get("version") != DUMP_VERSION:
        raise _bad("is of format version %r; this kbcite restores version %d",
                   data.get("version"), DUMP_VERSION)
    for name in ("articles", "events"):
        if not isinstance(data.get(name), list):
            raise _bad("has no list of %s", name)
    for article in data["articles"]:
        if not isinstance(article, dict) or not isinstance(article.get("versions"), list) or \
                not article["versions"] or not isinstance(article.get("content"), str):
            raise _bad("has an article without its versions or content: %r",
                       article.get("article_id") if isinstance(article, dict) else article)
        if article["versions"][-1]["updated_at"] != article["updated_at"]:
            raise _bad("has article %s whose last version is not its current one",
                       article["article_id"])
        for version in article["versions"]:
            parse_version(version["updated_at"])


def restore(ctx, data, as_id=None):
    """Make a new knowledge base from a dump (under ``as_id``, else its own ID), with the
    same article IDs, versions, history and events; returns what it made."""
    check_dump(data)
    kb_id = data["knowledge_base_id"] if as_id is None else as_id
    if as_id is not None:
        check_kb_id(as_id, "--as")
    else:
        check_people_string(kb_id, "knowledge_base_id", None)
    articles = data["articles"]
    db = ctx.db
    with db.write():
        db.lock_new_kb()
        if db.kbs.row(kb_id) is not None:
            raise InvalidArgument(
                "knowledge base %s already exists in this store; restore it under another ID "
                "(--as NEW_ID), or delete that one first" % kb_id, argument="kb_id")
        kb_pk = db.kbs.insert(kb_id, data.get("name"))
        contents = sorted({v["content"] for a in articles for v in a["versions"]
                           if v["content"] is not None} | {a["content"] for a in articles})
        text_pk = dict(zip(contents, db.articles.texts_insert(kb_pk, contents))) if contents else {}
        ordered = sorted(articles, key=lambda a: a["article_id"])
        pks = db.articles.insert(kb_pk, [
            (a["article_id"], a["title"], text_pk[a["content"]], a["published"],
             a["versions"][-1]["version_us"], a["updated_at"], a["source"])
            for a in ordered]) if ordered else []
        for pk, article in zip(pks, ordered):
            if article["import_version"] is not None:
                db.articles.set_import_version(pk, article["import_version"])
            db.history.insert(kb_pk, [dict(
                {name: version.get(name) for name in VERSION_FIELDS}, article_pk=pk,
                published=int(version["published"]),
                text_pk=None if version["content"] is None else text_pk[version["content"]])
                for version in article["versions"]])
        if data["events"]:
            db.events.insert(kb_pk, data["events"])
        db.kbs.next(kb_pk, "head_sequence", data["head_sequence"])
        db.kbs.next(kb_pk, "articles_created", data["articles_created"])
        if data.get("import_root"):
            db.kbs.set_import_root(kb_pk, data["import_root"])
        index.index_all(db, db.kbs.by_pk(kb_pk), ctx.semantic)
    return {"knowledge_base_id": kb_id, "articles": len(articles),
            "versions": sum(len(a["versions"]) for a in articles),
            "events": len(data["events"]), "head_sequence": data["head_sequence"]}
