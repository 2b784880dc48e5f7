"""The agent's edit: a compare-and-swap on the version it read, applied at most once per key.

``edit_knowledge_article`` names the version it was made from (``expected_version``, the
``updated_at`` of a citation) and an idempotency key. In one write transaction: the key is
looked up (scoped to the knowledge base, its request fingerprinted, as the IETF
idempotency-key draft and Stripe do: the same key with another request is refused, the same
request is replayed with its first result, marked); the version is compared; the article is
written through ``articles.write`` (the compare-and-swap itself); and the result is recorded
under the key. Only successful edits are recorded. An edit whose title and content are the
current version's (line breaks aside) succeeds without writing: ``changed: false``, the
current citation, no event, and its key keeps that answer. ``preview`` runs the same checks in
a read, for an approval prompt, and says whether the edit would change anything.
"""

import hashlib
import json

from . import access, articles
from .changes import same_version
from .errors import IdempotencyKeyReused, VersionConflict
from .limits import IDEMPOTENCY_TTL_US
from .tools import citation
from .validation import check_content, check_title
from .versions import parse_version


def fingerprint(kb_id, article_id, content, title, expected_us, summary=None):
    """SHA-256 of the request as the store understands it, so a respelled version still matches."""
    # A summary joins the request only when given: a key stored before summaries existed
    # still matches its own request.
    request = [kb_id, article_id, content, title, expected_us] + ([summary] if summary else [])
    canonical = json.dumps(request, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def checks(ctx, args, granted, lock):
    """Everything an edit decides before writing: replay, key reuse, article, version.

    Runs inside the caller's transaction. Returns ``(kb, row, fingerprint, stored)``
    where ``stored`` is the first result of an exact replay, else ``None``.
    """
    db = ctx.db
    check_content(args["content"])
    if "title" in args:
        check_title(args["title"])
    expected_us = parse_version(args["expected_version"])
    kb = access.knowledge_base(db, args["knowledge_base_id"], granted, lock=lock)
    print_ = fingerprint(
        kb["kb_id"], args["article_id"], args["content"], args.get("title"), expected_us,
        args.get("summary"),
    )
    stored = db.events.key_get(kb["pk"], args["idempotency_key"],
                                ctx.now_us() - IDEMPOTENCY_TTL_US)
    if stored is not None:
        if stored["fingerprint"] != print_:
            raise IdempotencyKeyReused(
                "idempotency_key %r was already used in knowledge base %r for a different "
                "edit; use a new key for a new change" % (args["idempotency_key"],
                                                          kb["kb_id"]),
                argument="idempotency_key",
                idempotency_key=args["idempotency_key"],
            )
        result = json.loads(stored["result"])
        result["replayed"] = True
        return kb, None, print_, result
    row = access.article(db, kb, args["article_id"], published_only=True)
    if expected_us != row["version_us"]:
        raise articles.conflict_error(db, kb, row, args["expected_version"])
    return kb, row, print_, None


def edit(ctx, args, granted, actor=None, issuer=None):
    """The ``edit_knowledge_article`` tool; ``actor`` (with the ``issuer`` that vouched for
    them) is recorded as who made the version."""
    db = ctx.db
    with articles.transaction(db):
        kb, row, print_, stored = checks(ctx, args, granted, lock=True)
        if stored is not None:
            return stored
        written = articles.write(
            ctx, kb, row, content=args["content"], title=args.get("title", row["title"]),
            published=True, action="edit", actor=actor, summary=args.get("summary"),
            issuer=issuer,
        )
        return record(ctx, kb, row, args, print_, written)


def record(ctx, kb, row, args, print_, written):
    """The edit's result for what ``written`` did to ``row``, kept under its key (in the
    caller's transaction): a later call with the key gets it back, marked a replay."""
    db = ctx.db
    kb_id = kb["kb_id"]
    result = {
        "knowledge_base_id": kb_id,
        "article_id": row["article_id"],
        "title": args.get("title", row["title"]),
        "updated_at": written.updated_at,
        "previous_version": row["updated_at"],
        "citation": citation(kb_id, row["article_id"], written.updated_at),
        "event": written.event,
        "replayed": False,
        "changed": written.changed,
    }
    now_us = ctx.now_us()
    db.events.key_put(kb["pk"], args["idempotency_key"], print_,
                       json.dumps(result, ensure_ascii=False), now_us,
                       now_us - IDEMPOTENCY_TTL_US)
    return result


def unchanged(row, args):
    """Whether an edit with ``args`` of the article ``row`` would change nothing."""
    return same_version(row, args.get("title", row["title"]), args["content"], True)


def preview(ctx, args, granted):
    """What an edit with these (validated) arguments would do now, for an approval prompt;
    raises what the edit would raise."""
    try:
        with ctx.db.read():
            kb, row, _, stored = checks(ctx, args, granted, lock=False)
    except VersionConflict as error:
        raise articles.settle(error) from None
    if stored is not None:
        return {"replay": True, "result": stored}
    return {
        "replay": False,
        "unchanged": unchanged(row, args),
        "knowledge_base_id": kb["kb_id"],
        "article_id": row["article_id"],
        "title": row["title"],
        "new_title": args.get("title"),
        "current_version": row["updated_at"],
        "current_bytes": len(row["content"].encode("utf-8")),
        "new_bytes": len(args["content"].encode("utf-8")),
        "current_content": row["content"],
        "new_content": args["content"],
    }
