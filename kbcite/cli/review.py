"""``kb review``: the people's side of writes mode ``review``, the agents' proposed edits.

``list`` shows the queue (who, when, which article, the size of the change, stale or not),
``show`` one proposal as the diff a person approves (the same text an approval question
shows), ``approve`` writes it (exit 3 when the article changed since; ``--rebase``
re-applies it), ``reject`` refuses it with a reason the agent reads in the event log.
"""

from ..errors import VersionConflict
from ..linediff import CHANGED_CHARS, printable, unified
from ..server.approval import question_text
from .messages import CommandError
from .output import emit, print_json, stale

LIST_COLUMNS = [
    ("proposal_id", "ID", lambda r: r["proposal_id"]),
    ("created_at", "PROPOSED", lambda r: r["created_at"]),
    ("actor", "BY", lambda r: r["actor"] or "-"),
    ("article_id", "ARTICLE", lambda r: r["article_id"]),
    ("bytes_change", "CHANGE", lambda r: "%+d" % r["bytes_change"]),
    ("stale", "STALE", lambda r: "gone" if r["gone"] else "yes" if r["stale"] else "no"),
    ("state", "STATE", lambda r: r["state"]),
    ("summary", "SUMMARY", lambda r: r["summary"] or ""),
    ("base_version", "BASE", lambda r: r["base_version"]),
    ("current_version", "CURRENT", lambda r: r["current_version"] or "-"),
    ("decided_by", "DECIDED_BY", lambda r: r["decided_by"] or "-"),
    ("reason", "REASON", lambda r: r["reason"] or ""),
    ("version", "VERSION", lambda r: r["version"] or "-"),
]


def cmd_review(store, args, out):
    """``kb review list|show|approve|reject``."""
    if args.review_command in ("approve", "reject") and not args.actor:
        raise CommandError("who decides is recorded: pass --actor NAME (no login name was "
                           "found)")
    return {"list": review_list, "show": review_show, "approve": review_approve,
            "reject": review_reject}[args.review_command](store, args, out)


def review_list(store, args, out):
    """The pending proposals (``--all``: every one), oldest first."""
    states = ("pending", "approved", "rejected", "expired") if args.all else ("pending",)
    rows = store.proposals.list(args.kb, states=states, expire_days=args.expire_days)
    if args.json:
        return print_json(rows, out)
    if not rows and not getattr(args, "format", None):
        print("no %sproposals in %s" % ("" if args.all else "pending ", args.kb), file=out)
        return None
    columns = LIST_COLUMNS if args.all else LIST_COLUMNS[:8]
    return emit(rows, columns, args, out)


def _preview(found, against):
    """What ``question_text`` reads, for a proposal against one of its texts."""
    return {"knowledge_base_id": found["knowledge_base_id"], "article_id": found["article_id"],
            "title": against["title"], "new_title": found["new_title"],
            "current_version": against["version"], "version_note": against["note"],
            "current_bytes": len(against["content"].encode("utf-8")),
            "new_bytes": found["bytes"], "current_content": against["content"],
            "new_content": found["content"]}


def review_show(store, args, out):
    """One proposal: the diff against its base and, where the article moved on, against the
    current version too."""
    found = dict(store.proposals.show(args.kb, args.id, expire_days=args.expire_days),
                 knowledge_base_id=args.kb)
    diffs = {}
    if found["base"] is not None:
        diffs["base"] = unified(found["base"]["title"], found["base"]["content"],
                                found["new_title"], found["content"])
    if found["current"] is not None and found["stale"]:
        diffs["current"] = unified(found["current"]["title"], found["current"]["content"],
                                   found["new_title"], found["content"],
                                   old_name="now", new_name="as proposed")
    if args.json:
        return print_json(dict(found, diffs={k: v["text"] for k, v in diffs.items()}), out)
    print("Proposal %d of knowledge base %s: %s, by %s at %s%s." % (
        found["proposal_id"], args.kb, found["state"], found["actor"] or "-",
        found["created_at"], " (%s)" % found["summary"] if found["summary"] else ""), file=out)
    if found["state"] != "pending":
        print("Decided by %s at %s%s%s." % (
            found["decided_by"] or "nobody", found["decided_at"],
            ": version %s" % found["version"] if found["version"] else "",
            ", because: %s" % found["reason"] if found["reason"] else ""), file=out)
    print(file=out)
    if found["base"] is not None:
        print(question_text(_preview(found, dict(
            found["base"], version=found["base_version"],
            note="its base; %s" % ("the article is now at %s" % found["current_version"]
                                   if found["stale"] and not found["gone"] else
                                   "the article is gone" if found["gone"] else
                                   "the current one"))), asking=False), file=out)
    elif found["gone"]:
        print("The article is gone (deleted or unpublished): it can only be rejected. The "
              "proposal's own text:\n", file=out)
        print(printable(found["content"], CHANGED_CHARS), file=out)
    else:
        print("Its base version %s was pruned from the history." % found["base_version"],
              file=out)
    if "current" in diffs:
        print("\nAgainst the current version %s (what approving with --rebase would have to "
              "keep):\n\n%s" % (found["current_version"], diffs["current"]["text"]), file=out)
    return None


def review_approve(store, args, out):
    """Write a proposal; exit 3 when the article changed since (``--rebase`` re-applies)."""
    try:
        done = store.proposals.approve(args.kb, args.id, approver=args.actor, rebase=args.rebase,
                                      expire_days=args.expire_days)
    except VersionConflict as exc:
        raise stale(exc, args, out) from None
    if args.json:
        return print_json(done, out)
    if not done["changed"]:
        print("approved proposal %d: %s already held its text, so no version was made (it is "
              "still at %s)" % (done["proposal_id"], done["article_id"], done["version"]),
              file=out)
        return None
    print("approved proposal %d: %s is now at version %s (by %s, approved by %s%s)" % (
        done["proposal_id"], done["article_id"], done["version"], done["actor"] or "-",
        done["approver"] or "-", ", re-applied onto %s" % done["previous_version"]
        if done["rebased"] else ""), file=out)
    return None


def review_reject(store, args, out):
    """Refuse a proposal with a reason."""
    done = store.proposals.reject(args.kb, args.id, approver=args.actor, reason=args.reason,
                                 expire_days=args.expire_days)
    if args.json:
        return print_json(done, out)
    print("rejected proposal %d of %s (event %d): %s" % (
        done["proposal_id"], done["article_id"], done["event"]["sequence"], done["reason"]),
        file=out)
    return None
