"""Proposals: an agent's edit kept for a person to review (writes mode ``review``).

An edit in this mode is not written: it is checked exactly as an edit is (arguments, limits,
grant, the version it was made from, its idempotency key) and stored as a proposal, with its
``proposal.created`` event, in one transaction (``propose``). A person then approves it
(``approve``: a compare-and-swap against the version the agent read, one new version whose
actor is the agent and whose approver is the person, ``--rebase`` re-applying its lines onto
a version that moved on when they do not overlap), rejects it with a reason (``reject``), or
lets it lapse (``expire``). Each decision is made once, with its event; a proposal's events
are polled like every other, so the agent learns the outcome.
"""

from datetime import timedelta

from . import access, articles, edits, events, history
from .edits import fingerprint
from .errors import (
    IdempotencyKeyReused,
    InvalidArgument,
    NotFound,
    VersionConflict,
    VersionNotFound,
    VersionPruned,
)
from .limits import ID_MAX, SUMMARY_MAX
from .linediff import merge
from .tools import citation
from .validation import check_content, check_people_string, check_title, int_text
from .versions import format_version, parse_version

PENDING, APPROVED, REJECTED, EXPIRED = "pending", "approved", "rejected", "expired"
STATES = (PENDING, APPROVED, REJECTED, EXPIRED)
EVENT_OF = {PENDING: "proposal.created", APPROVED: "proposal.approved",
            REJECTED: "proposal.rejected", EXPIRED: "proposal.expired"}

# A proposal nobody decided within this many days lapses: the agent has moved on by then, and
# a queue that only grows is one nobody reads.
EXPIRE_DAYS_DEFAULT = 14
EXPIRE_DAYS_MAX = 3650

# A rejection says why in a line, as a summary does.
REASON_MAX = 500

DAY_US = timedelta(days=1) // timedelta(microseconds=1)

# A proposal the person changed before approving says so where the agent and the history's
# readers look: the proposal's reason (in its proposal.approved event) and the version's
# summary, so nobody takes the person's words for the agent's.
EDITED = "edited by %s before approval"


def where_to_review(kb_id, number):
    """The command a person runs to review a proposal."""
    return "kb review show %s %d" % (kb_id, number)


def _result(kb_id, row, event, replayed):
    """The tool's answer for a proposal: success, status proposed, where it is reviewed."""
    return {"status": "proposed", "proposal_id": row["pk"], "knowledge_base_id": kb_id,
            "article_id": row["article_id"], "base_version": row["base_version"],
            "citation": citation(kb_id, row["article_id"], row["base_version"]),
            "review": "a person reviews it: %s (until then the article is unchanged; poll "
                      "the events for proposal.approved or proposal.rejected)"
                      % where_to_review(kb_id, row["pk"]),
            "event": event, "replayed": replayed}


def propose(ctx, args, granted, actor=None, issuer=None):
    """An edit kept as a proposal, checked as the edit would be; returns the tool's result.
    An edit that would change nothing is no proposal: it is answered as the edit tool answers
    it (``changed: false``, its key kept), with nothing for a person to review."""
    db = ctx.db
    check_content(args["content"])
    if "title" in args:
        check_title(args["title"])
    expected_us = parse_version(args["expected_version"])
    with articles.transaction(db):
        kb = access.knowledge_base(db, args["knowledge_base_id"], granted, lock=True)
        print_ = fingerprint(kb["kb_id"], args["article_id"], args["content"],
                             args.get("title"), expected_us, args.get("summary"))
        stored = db.proposals.by_key(kb["pk"], args["idempotency_key"])
        if stored is not None:
            if stored["fingerprint"] != print_:
                raise IdempotencyKeyReused(
                    "idempotency_key %r was already used in knowledge base %r for a different "
                    "proposal; use a new key for a new change" % (args["idempotency_key"],
                                                                  kb["kb_id"]),
                    argument="idempotency_key", idempotency_key=args["idempotency_key"])
            return _result(kb["kb_id"], stored, _event_of(stored, PENDING), True)
        kb, row, print_, replayed = edits.checks(ctx, args, granted, lock=True)
        if replayed is not None:
            return replayed  # an edit that changed nothing, sent again
        if edits.unchanged(row, args):
            return edits.record(ctx, kb, row, args, print_, articles.write(
                ctx, kb, row, content=args["content"], title=args.get("title", row["title"]),
                published=True, action="edit"))
        now_us = ctx.now_us()
        event = events.append(db, kb, [("proposal.created", row["article_id"],
                                        row["updated_at"])])[0]
        proposal = {"article_id": row["article_id"], "base_version": row["updated_at"],
                    "base_bytes": len(row["content"].encode("utf-8")),
                    "title": args.get("title"), "content": args["content"],
                    "bytes": len(args["content"].encode("utf-8")), "actor": actor,
                    "summary": args.get("summary"), "idempotency_key": args["idempotency_key"],
                    "fingerprint": print_, "created_at": format_version(now_us),
                    "created_us": now_us, "created_sequence": event["sequence"],
                    "state": PENDING, "actor_issuer": issuer}
        proposal["pk"] = db.proposals.insert(kb["pk"], proposal)
        event["proposal_id"] = proposal["pk"]
        return _result(kb["kb_id"], proposal, event, False)


def _event_of(row, state):
    """The event a proposal's ``state`` was announced by, as a poll shows it."""
    sequence = row["created_sequence"] if state == PENDING else row["decided_sequence"]
    version = row["version"] if state == APPROVED else row["base_version"]
    return dict({"sequence": sequence, "type": EVENT_OF[state], "article_id": row["article_id"],
                 "updated_at": version}, **events.proposal_details(row, EVENT_OF[state]))


# -- the people's side ---------------------------------------------------------------------


def check_number(number):
    """Refuse a proposal ID that is not a positive whole number."""
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise InvalidArgument("a proposal ID is a whole number from 1 (kb review list shows "
                              "them), got %s" % int_text(number), argument="id")


def check_expire_days(days):
    """Refuse an expiry that is not a whole number of days from 1 to ``EXPIRE_DAYS_MAX``."""
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= EXPIRE_DAYS_MAX:
        raise InvalidArgument("expire_days must be a whole number from 1 to %d, got %r"
                              % (EXPIRE_DAYS_MAX, days), argument="expire_days")


def _find(db, kb, number):
    """A proposal of ``kb`` by ID, with its text; NotFound names it and what to do."""
    check_number(number)
    row = db.proposals.get(number)
    if row is None:
        raise NotFound("there is no proposal %d in this store (kb review list %s lists the "
                       "pending ones)" % (number, kb["kb_id"]), knowledge_base_id=kb["kb_id"],
                       proposal_id=number)
    if row["kb_pk"] != kb["pk"]:
        other = db.kbs.by_pk(row["kb_pk"])["kb_id"]
        raise NotFound("proposal %d is of knowledge base %s, not %s: run the command with "
                       "KB %s" % (number, other, kb["kb_id"], other),
                       knowledge_base_id=kb["kb_id"], proposal_id=number)
    return row


def _pending(kb, row):
    """Refuse a proposal already decided or expired, saying how it ended."""
    if row["state"] == PENDING:
        return
    how = {APPROVED: "approved by %s at %s (version %s)" % (row["decided_by"], row["decided_at"],
                                                           row["version"]),
           REJECTED: "rejected by %s at %s" % (row["decided_by"], row["decided_at"]),
           EXPIRED: "expired at %s, undecided" % row["decided_at"]}[row["state"]]
    raise InvalidArgument("proposal %d of knowledge base %s was already %s: a proposal is "
                          "decided once (kb review show %s %d shows it)"
                          % (row["pk"], kb["kb_id"], how, kb["kb_id"], row["pk"]),
                          argument="id", proposal_id=row["pk"], state=row["state"])


def _pending_locked(db, kb_id, number):
    """Inside a write: ``(kb, row)`` of a pending proposal, its knowledge base locked."""
    kb = access.knowledge_base(db, kb_id, lock=True)
    row = _find(db, kb, number)
    _pending(kb, row)
    return kb, row


def expire(ctx, kb_id, days=EXPIRE_DAYS_DEFAULT):
    """Expire the pending proposals older than ``days`` days, each with its event; returns
    how many. Reads first, so a queue with none overdue costs no write."""
    check_expire_days(days)
    db = ctx.db
    before_us = ctx.now_us() - days * DAY_US
    with db.read():
        kb = access.knowledge_base(db, kb_id)
        if not db.proposals.overdue(kb["pk"], before_us):
            return 0
    with db.write():
        kb = access.knowledge_base(db, kb_id, lock=True)
        overdue = db.proposals.overdue(kb["pk"], before_us)
        if not overdue:
            return 0
        appended = events.append(db, kb, [("proposal.expired", row["article_id"],
                                           row["base_version"]) for row in overdue])
        now = format_version(ctx.now_us())
        for row, event in zip(overdue, appended):
            db.proposals.decide(row["pk"], EXPIRED, now, None, None, None, event["sequence"])
    return len(overdue)


def _listed(row):
    """A proposal as the people's side lists it: who, when, what, how big, stale or not."""
    gone = row["current_version"] is None or not row["current_published"]
    return {"proposal_id": row["pk"], "article_id": row["article_id"], "actor": row["actor"],
            "created_at": row["created_at"], "state": row["state"],
            "base_version": row["base_version"], "title": row["title"],
            "base_bytes": row["base_bytes"], "bytes": row["bytes"],
            "bytes_change": row["bytes"] - row["base_bytes"], "summary": row["summary"],
            "current_version": None if gone else row["current_version"], "gone": gone,
            "stale": gone or row["current_version"] != row["base_version"],
            "decided_at": row["decided_at"], "decided_by": row["decided_by"],
            "reason": row["reason"], "version": row["version"]}


def listing(ctx, kb_id, states=(PENDING,), expire_days=EXPIRE_DAYS_DEFAULT):
    """A knowledge base's proposals in ``states`` (pending by default), oldest first, after
    expiring the overdue."""
    expire(ctx, kb_id, expire_days)
    db = ctx.db
    with db.read():
        kb = access.knowledge_base(db, kb_id)
        return [_listed(row) for row in db.proposals.list(kb["pk"], list(states))]


def show(ctx, kb_id, number, expire_days=EXPIRE_DAYS_DEFAULT):
    """One proposal with the texts a review compares: its base's, its own, the current one's
    (None where the article is gone, or the base's where it was pruned)."""
    expire(ctx, kb_id, expire_days)
    db = ctx.db
    with db.read():
        kb = access.knowledge_base(db, kb_id)
        row = _find(db, kb, number)
        out = dict(_listed(dict(row, current_version=None, current_published=None)),
                   content=row["content"], base=None, current=None)
        article = db.articles.by_id(kb["pk"], row["article_id"])
        if article is not None and article["published"]:
            # What its reviewers may read: the published article, now and at the proposal's
            # base. An article unpublished (a draft, perhaps, being written in it) or deleted
            # since is gone: the proposal's own text is all there is to show.
            out.update(current_version=article["updated_at"], gone=False,
                       stale=article["updated_at"] != row["base_version"],
                       current={"title": article["title"], "content": article["content"]})
            try:
                base, content = history.find(db, kb, article, row["base_version"])
            except (VersionNotFound, VersionPruned):  # the review compares with now only
                base = None
            if base is not None:
                out["base"] = {"title": base["title"], "content": content}
        out["new_title"] = row["title"] or (out["base"] or out["current"] or {}).get("title")
        return out


def _edited_summary(summary, note):
    """The agent's summary with the person's edit said after it, within ``SUMMARY_MAX``."""
    if not summary:
        return note
    room = SUMMARY_MAX - len(note) - 3
    if len(summary) > room:
        summary = summary[:room - 1].rstrip() + "\u2026"
    return "%s (%s)" % (summary, note)


def _check_edited(edited):
    """Refuse a person's edit of a proposal whose text, title or version is not valid (as
    the edit tool would: the text not empty either)."""
    if not isinstance(edited.get("content"), str) or not edited["content"]:
        raise InvalidArgument("content must be the article's whole new text, not empty",
                              argument="content")
    check_content(edited["content"])
    check_title(edited["title"])
    return parse_version(edited["expected_version"], "expected_version")


def approve(ctx, kb_id, number, approver, *, rebase=False, edited=None,
            expire_days=EXPIRE_DAYS_DEFAULT):
    """Write a pending proposal as one new version (actor: the agent; approver: the person),
    only if the article is still at its base version or, with ``rebase``, its lines re-apply
    cleanly onto the current one. ``edited`` (``content``, ``title``, ``expected_version``)
    is the person's edit of it: written instead, only if the article is still at the
    version their page showed, and said so in the version's summary and the proposal's
    reason. Returns ``{proposal_id, version, event, rebased, edited}``."""
    check_people_string(approver, "approver", ID_MAX)
    expected_us = None if edited is None else _check_edited(edited)
    expire(ctx, kb_id, expire_days)
    db = ctx.db
    with articles.transaction(db):
        kb, row = _pending_locked(db, kb_id, number)
        article = db.articles.by_id(kb["pk"], row["article_id"])
        if article is None or not article["published"]:
            raise NotFound("proposal %d of knowledge base %s is about article %s, which is gone "
                           "(deleted or unpublished since it was proposed): nothing to approve; "
                           "reject it (kb review reject %s %d --reason ...)"
                           % (number, kb["kb_id"], row["article_id"], kb["kb_id"], number),
                           knowledge_base_id=kb["kb_id"], article_id=row["article_id"],
                           proposal_id=number, gone=True)
        content, title = row["content"], row["title"] or article["title"]
        rebased = article["updated_at"] != row["base_version"]
        summary, note = row["summary"], None
        if edited is not None:
            # One compare-and-swap against what the person's page showed, whichever version
            # the agent read: they wrote the text knowing that one.
            if article["version_us"] != expected_us:
                raise articles.conflict_error(db, kb, article, edited["expected_version"])
            content, title, note = edited["content"], edited["title"], EDITED % approver
            summary = _edited_summary(summary, note)
        elif rebased:
            content, title = _rebased(db, kb, row, article, rebase)
        # What a proposal holds was checked when it was made, but what approving writes may
        # be another text (re-applied onto a version that grew since): checked again, as
        # the edit tool checks its own.
        check_content(content, "the approved content")
        check_title(title, "the approved title")
        written = articles.write(
            ctx, kb, article, content=content, title=title, published=True, action="edit",
            actor=row["actor"], summary=summary, approver=approver,
            issuer=row["actor_issuer"])
        decided = events.append(db, kb, [("proposal.approved", row["article_id"],
                                          written.updated_at)])[0]
        db.proposals.decide(row["pk"], APPROVED, format_version(ctx.now_us()), approver, note,
                           written.updated_at, decided["sequence"])
    announced = dict(decided, proposal_id=number, decided_by=approver)
    if note:
        announced["reason"] = note
    return {"proposal_id": number, "knowledge_base_id": kb["kb_id"],
            "article_id": row["article_id"], "version": written.updated_at,
            "previous_version": article["updated_at"], "base_version": row["base_version"],
            "rebased": rebased and edited is None, "edited": edited is not None,
            "changed": written.changed, "actor": row["actor"], "approver": approver,
            "events": [e for e in (written.event, announced) if e is not None]}


def _rebased(db, kb, row, article, rebase):
    """``(content, title)`` of a proposal re-applied onto the article's current version;
    VersionConflict unless ``rebase`` and the two changes since the base do not overlap."""
    def conflict(why):
        return VersionConflict(
            "proposal %d of knowledge base %s was made from version %s of article %s, which "
            "is now at %s; %s" % (row["pk"], kb["kb_id"], row["base_version"],
                                  row["article_id"], article["updated_at"], why),
            knowledge_base_id=kb["kb_id"], article_id=row["article_id"],
            expected_version=row["base_version"], current_version=article["updated_at"],
            proposal_id=row["pk"])
    if not rebase:
        raise conflict("review what changed since (kb review show %s %d), then approve with "
                       "--rebase to re-apply it onto the current version, or reject it"
                       % (kb["kb_id"], row["pk"]))
    try:
        base, base_content = history.find(db, kb, article, row["base_version"], agents=False)
    except (VersionNotFound, VersionPruned):
        raise conflict("its base version's text was pruned, so it cannot be re-applied: "
                       "reject it and ask for the edit again") from None
    content = merge(base_content, row["content"], article["content"])
    if content is None:
        raise conflict("its change overlaps the changes made since, so it cannot be "
                       "re-applied; nothing was written: reject it, or edit the article "
                       "yourself")
    title = row["title"] or article["title"]
    if row["title"] and base["title"] != article["title"] and row["title"] != article["title"]:
        raise conflict("both it and a later version changed the title; nothing was written")
    return content, title


def reject(ctx, kb_id, number, approver, reason, *, expire_days=EXPIRE_DAYS_DEFAULT):
    """Reject a pending proposal with a reason, and announce it; returns the event."""
    check_people_string(approver, "approver", ID_MAX)
    check_people_string(reason, "reason", REASON_MAX)
    expire(ctx, kb_id, expire_days)
    db = ctx.db
    with db.write():
        kb, row = _pending_locked(db, kb_id, number)
        event = events.append(db, kb, [("proposal.rejected", row["article_id"],
                                        row["base_version"])])[0]
        db.proposals.decide(row["pk"], REJECTED, format_version(ctx.now_us()), approver, reason,
                           None, event["sequence"])
    return {"proposal_id": number, "knowledge_base_id": kb["kb_id"],
            "article_id": row["article_id"], "reason": reason, "decided_by": approver,
            "event": dict(event, proposal_id=number, reason=reason, decided_by=approver)}


def audit(db, kb, versions, event_rows):
    """Problems with a knowledge base's proposals: an approved one without its version, a
    decided one without its event."""
    problems = []
    made = {(v["article_pk"], v["updated_at"]) for v in versions}
    pks = {a["article_id"]: a["pk"] for a in db.audit.articles(kb["pk"])}
    for row in db.proposals.audit_rows(kb["pk"]):
        name = "knowledge base %r: proposal %d" % (kb["kb_id"], row["pk"])
        wanted = [(row["created_sequence"], "proposal.created")]
        if row["state"] != PENDING:
            wanted.append((row["decided_sequence"], EVENT_OF[row["state"]]))
        for sequence, type_ in wanted:
            event = event_rows.get(sequence)
            if event is None or event["type"] != type_ or \
                    event["article_id"] != row["article_id"]:
                problems.append("%s (%s) has no %s event at sequence %s"
                                % (name, row["state"], type_, sequence))
        if row["state"] == APPROVED and row["article_id"] in pks and \
                (pks[row["article_id"]], row["version"]) not in made:
            problems.append("%s was approved as version %s, which the history does not hold"
                            % (name, row["version"]))
    return problems


class Proposals:
    """A store's proposals (writes mode review), as ``store.proposals``: list, show, approve,
    reject, expire."""

    def __init__(self, ctx):
        self._ctx = ctx

    def list(self, kb_id, *, states=(PENDING,), expire_days=EXPIRE_DAYS_DEFAULT):
        """A knowledge base's proposals in ``states``, oldest first: who, when, which article,
        the size of the change, stale or not (overdue ones expire first)."""
        return listing(self._ctx, kb_id, states, expire_days)

    def show(self, kb_id, proposal_id, *, expire_days=EXPIRE_DAYS_DEFAULT):
        """One proposal with its text, its base's and the current article's."""
        return show(self._ctx, kb_id, proposal_id, expire_days)

    def approve(self, kb_id, proposal_id, *, approver, rebase=False, edited=None,
                expire_days=EXPIRE_DAYS_DEFAULT):
        """Write a pending proposal as one new version (compare-and-swap against its base, or
        re-applied with ``rebase``, or the person's ``edited`` text against the version they
        saw); the version's actor is the agent, its approver the person."""
        return approve(self._ctx, kb_id, proposal_id, approver, rebase=rebase, edited=edited,
                       expire_days=expire_days)

    def reject(self, kb_id, proposal_id, *, approver, reason, expire_days=EXPIRE_DAYS_DEFAULT):
        """Reject a pending proposal with a reason; the agent hears of it in the log."""
        return reject(self._ctx, kb_id, proposal_id, approver, reason, expire_days=expire_days)

    def expire(self, kb_id, *, expire_days=EXPIRE_DAYS_DEFAULT):
        """Expire the pending proposals older than ``expire_days`` days; returns how many."""
        return expire(self._ctx, kb_id, expire_days)
