"""The history: every version of every article, kept with who made it and how.

Each change of an article (a create, a person's save, an agent's edit, an import write, a
publish, an unpublish, a revert) appends one version row in the transaction of the change and
its event (``record``); the text of each version is stored once, in ``texts``, and shared by
the versions that keep it. Everything is kept until a person prunes it (``prune``): a pruned
version keeps its row, so reading it says it was pruned rather than that it never was.

What agents may see of it is what they could see of the article: the versions it had while
published, of an article that is published now, in a granted knowledge base (``agent_version``
is called only after ``access`` has let the article through). The people's side sees all.
"""

from datetime import timedelta

from . import access
from . import events as events_module
from .errors import InvalidArgument, VersionNotFound, VersionPruned
from .limits import (
    ACTOR_MAX,
    EVENT_DELETED,
    EVENTS_LIMIT_MAX,
    ISSUER_MAX,
    KEEP_DAYS_MAX,
    PROPOSAL_EVENTS,
    SUMMARY_MAX,
)
from .validation import check_people_string, int_text, json_type
from .versions import format_version, parse_version

DAY_US = timedelta(days=1) // timedelta(microseconds=1)


def check_actor(actor, summary, issuer=None):
    """Refuse an actor, an issuer or a summary that is not a short string (None is allowed:
    unknown, or no issuer)."""
    if actor is not None:
        check_people_string(actor, "actor", ACTOR_MAX)
    if issuer is not None:
        check_people_string(issuer, "issuer", ISSUER_MAX)
    if summary is not None:
        check_people_string(summary, "summary", SUMMARY_MAX)


def record(db, kb, article_pk, version_us, updated_at, *, action, published, title, text_pk,
           size, event=None, actor=None, summary=None, approver=None, issuer=None):
    """Append one version of an article to the history, in the caller's write transaction
    (``approver``: the person who approved an agent's proposal; ``issuer``: the team issuer
    that vouched for the actor)."""
    db.history.insert(kb["pk"], [{
        "article_pk": article_pk, "version_us": version_us, "updated_at": updated_at,
        "action": action, "sequence": event["sequence"] if event else None,
        "event": event["type"] if event else None, "published": int(published),
        "title": title, "text_pk": text_pk, "bytes": size, "actor": actor,
        "summary": summary, "approver": approver, "actor_issuer": issuer}])


def not_found(kb, article_id, version):
    """The version_not_found error: the article had no such version agents could see."""
    return VersionNotFound(
        "article %r of knowledge base %r has no version %s that can be read; the versions a "
        "citation can name are the updated_at values of its search hits and reads (kb history "
        "lists an article's versions)" % (article_id, kb["kb_id"], version),
        knowledge_base_id=kb["kb_id"], article_id=article_id, version=version)


def pruned(kb, article_id, version):
    """The version_pruned error: the version was kept, then pruned from the history."""
    return VersionPruned(
        "version %s of article %r of knowledge base %r was pruned from the history (kb history "
        "prune); its text is no longer kept. Read the current article instead."
        % (version, article_id, kb["kb_id"]),
        knowledge_base_id=kb["kb_id"], article_id=article_id, version=version)


def find(db, kb, article, version, *, argument="version", agents=True):
    """``(version row, its content)`` of ``article`` (a whole row) at ``version`` (text).

    For agents only versions the article had while published; a draft's version reads as
    missing. Raises InvalidArgument for a malformed version, VersionNotFound, VersionPruned.
    """
    version_us = parse_version(version, argument)
    if version_us == article["version_us"]:
        return db.history.version(article["pk"], version_us), article["content"]
    row = db.history.version(article["pk"], version_us) if version_us is not None else None
    if row is None or (agents and not row["published"]):
        raise not_found(kb, article["article_id"], version)
    if row["text_pk"] is None:
        raise pruned(kb, article["article_id"], version)
    return row, db.articles.texts([row["text_pk"]])[row["text_pk"]]


def listing(db, kb_id, article_id):
    """Every version of an article, oldest first, as the people's side shows it: time, how,
    who, the event, the size and its change, the summary, and whether it was pruned."""
    with db.read():
        kb = access.knowledge_base(db, kb_id)
        article = access.article(db, kb, article_id, published_only=False)
        rows = db.history.of(article["pk"])
    out, previous = [], None
    for row in rows:
        out.append({
            "updated_at": row["updated_at"], "action": row["action"], "actor": row["actor"],
            "actor_issuer": row["actor_issuer"], "approver": row["approver"],
            "event": row["event"], "sequence": row["sequence"],
            "published": bool(row["published"]), "title": row["title"], "bytes": row["bytes"],
            "bytes_change": row["bytes"] - previous["bytes"] if previous else row["bytes"],
            "summary": row["summary"], "pruned": row["text_pk"] is None,
            "current": row["version_us"] == article["version_us"]})
        previous = row
    return out


def texts_of(db, kb_id, article_id, versions):
    """``{version: (title, content)}`` of an article at the given versions (the people's
    side: drafts too), in one read."""
    with db.read():
        kb = access.knowledge_base(db, kb_id)
        article = access.article(db, kb, article_id, published_only=False)
        out = {}
        for version in versions:
            row, content = find(db, kb, article, version, agents=False)
            out[version] = (row["title"], content)
    return out


def check_keep_days(keep_days):
    """Refuse a retention that is not a whole number of days from 0 to ``KEEP_DAYS_MAX``."""
    if isinstance(keep_days, bool) or not isinstance(keep_days, int):
        raise InvalidArgument("keep_days must be an integer, got %s" % json_type(keep_days),
                              argument="keep_days")
    if not 0 <= keep_days <= KEEP_DAYS_MAX:
        raise InvalidArgument("keep_days must be from 0 to %d, got %s"
                              % (KEEP_DAYS_MAX, int_text(keep_days)), argument="keep_days")


def prune(ctx, kb_id, keep_days, *, dry_run=False):
    """Drop the texts of a knowledge base's versions older than ``keep_days`` days (never an
    article's current version, nor the one its import wrote: its file's base); returns
    ``{"pruned": n, "before": time}``."""
    check_keep_days(keep_days)
    db = ctx.db
    before_us = ctx.now_us() - keep_days * DAY_US
    with db.write():
        kb = access.knowledge_base(db, kb_id, lock=True)
        if dry_run:
            count = db.history.prunable(kb["pk"], before_us)
        else:
            count = db.history.prune(kb["pk"], before_us)
    return {"knowledge_base_id": kb["kb_id"], "pruned": count,
            "before": format_version(before_us), "dry_run": dry_run}


def events(ctx, kb_id, after=0, limit=EVENTS_LIMIT_MAX):
    """The next page of the event log after ``after`` (as ``poll_resource_events`` gives it,
    gaps refused alike), each event with the actor of the version it announced: the people's
    side (agents' polls carry no actor)."""
    page = events_module.poll(ctx, {"resource_type": "knowledge_base", "resource_id": kb_id,
                                    "after_sequence": after, "limit": limit}, None)
    db = ctx.db
    with db.read():
        kb = access.knowledge_base(db, kb_id)
        ids = sorted({event["article_id"] for event in page["events"]})
        pks = {a: row["pk"] for a, row in db.articles.visibility_of(kb["pk"], ids).items()} \
            if ids else {}
        keys = {e["sequence"]: (pks.get(e["article_id"]), parse_version(e["updated_at"]))
                for e in page["events"]}
        rows = db.history.at([key for key in keys.values() if key[0] is not None])
        proposed = db.proposals.by_sequences(kb["pk"], [
            e["sequence"] for e in page["events"] if e["type"] in PROPOSAL_EVENTS]) \
            if any(e["type"] in PROPOSAL_EVENTS for e in page["events"]) else {}
        own = db.events.actors(kb["pk"], [e["sequence"] for e in page["events"]
                                         if e["type"] == EVENT_DELETED])
    out = []
    for e in page["events"]:
        if e["type"] in PROPOSAL_EVENTS:
            # A proposal's event was made by the agent (proposed) or a person (decided).
            row = proposed.get(e["sequence"]) or {}
            if e["type"] == "proposal.created":
                out.append(dict(e, actor=row.get("actor"),
                                actor_issuer=row.get("actor_issuer")))
            else:
                out.append(dict(e, actor=e.get("decided_by"), actor_issuer=None))
            continue
        # A deletion records its own actor (the article's history went with it).
        version = own.get(e["sequence"]) or rows.get(keys[e["sequence"]]) or {}
        event = dict(e, actor=version.get("actor"), actor_issuer=version.get("actor_issuer"))
        if version.get("approver"):
            event["approver"] = version["approver"]
        out.append(event)
    page["events"] = out
    return page
