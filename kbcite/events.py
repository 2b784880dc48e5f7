"""The event log: one gapless, monotonic sequence per knowledge base, and the poll that reads it.

Every change agents can see (an article published, updated or unpublished; a proposal made,
approved, rejected or expired) appends one event in the same transaction as the change, under
the knowledge base's write lock, so the log commits in sequence order and a poller resuming
from a cursor never misses one. A page that
is not exactly the next sequences is damage, said so, never ``has_more`` forever.
"""

from . import access
from .errors import InvalidArgument, StoreDamaged
from .limits import EVENTS_LIMIT_DEFAULT, PROPOSAL_EVENTS
from .validation import int_text


def gap_error(kb, missing, head):
    """The store_damaged error for an event log missing sequence ``missing`` below ``head``."""
    return StoreDamaged(
        "the event log of knowledge base %r is damaged: event %d is missing (the head is %d), "
        "so a poll cannot go on from here. A retry will not help; the store's operator must "
        "run the audit and restore from a backup. Re-read cited articles by ID meanwhile."
        % (kb["kb_id"], missing, head),
        knowledge_base_id=kb["kb_id"], missing_sequence=missing, head_sequence=head,
        retryable=False)


def append(db, kb, items, actor=None, issuer=None):
    """Append events ``(type, article_id, updated_at)``, in order, in the caller's write
    transaction (under the knowledge base's lock); returns them as event dicts. ``actor`` and
    its ``issuer``: who made events no version records (a deletion), kept with them."""
    first = db.kbs.next(kb["pk"], "head_sequence", len(items))
    events = [{"sequence": first + i, "type": type_, "article_id": article_id,
               "updated_at": updated_at}
              for i, (type_, article_id, updated_at) in enumerate(items)]
    db.events.insert(kb["pk"], [dict(e, actor=actor, actor_issuer=issuer) for e in events]
                     if actor is not None else events)
    # Delivered at commit, exactly when the events become readable (PostgreSQL's NOTIFY).
    db.events_notify(kb["pk"], events[-1]["sequence"])
    return events


def proposal_details(row, type_):
    """What an event about a proposal adds: the proposal's ID and, once decided, who decided
    and (a rejection, or an approval the person edited first) why."""
    extra = {"proposal_id": row["pk"]}
    if type_ != "proposal.created":
        extra["decided_by"] = row["decided_by"]
    if type_ == "proposal.rejected" or (type_ == "proposal.approved" and row["reason"]):
        # An approval's reason says the person edited it first (proposals.EDITED).
        extra["reason"] = row["reason"]
    return extra


def with_proposals(db, kb, page):
    """A page of events, each about a proposal carrying the proposal's ID and outcome."""
    sequences = [e["sequence"] for e in page if e["type"] in PROPOSAL_EVENTS]
    if not sequences:
        return page
    found = db.proposals.by_sequences(kb["pk"], sequences)
    return [dict(e, **proposal_details(found[e["sequence"]], e["type"]))
            if e["type"] in PROPOSAL_EVENTS and e["sequence"] in found else e for e in page]


def poll(ctx, args, granted, actor=None, issuer=None):
    """The ``poll_resource_events`` tool: the next page of a granted knowledge base's log."""
    resource_type = args["resource_type"]
    if resource_type != "knowledge_base":
        raise InvalidArgument(
            "resource_type %r has no event log in this store; it keeps events for "
            "knowledge_base only" % resource_type,
            argument="resource_type",
        )
    after = args.get("after_sequence", 0)
    limit = args.get("limit", EVENTS_LIMIT_DEFAULT)
    db = ctx.db
    with db.read():
        kb = access.knowledge_base(db, args["resource_id"], granted)
        head = kb["head_sequence"]
        if after > head:
            raise InvalidArgument(
                "after_sequence %s is beyond the head of knowledge base %r, which is %d; "
                "resume from %d or less"
                % (int_text(after), kb["kb_id"], head, head),
                argument="after_sequence",
                head_sequence=head,
            )
        events = with_proposals(db, kb, db.events.after(kb["pk"], after, limit))
    # The log is gapless by construction, so a page is exactly the next sequences up to the
    # head. Anything else is damage; answering it with has_more would send a client that
    # follows has_more round forever (Kubernetes answers a cursor it cannot serve 410 Gone).
    for expected, event in enumerate(events, after + 1):
        if event["sequence"] != expected:
            raise gap_error(kb, expected, head)
    if len(events) != min(after + limit, head) - after:
        raise gap_error(kb, after + len(events) + 1, head)
    cursor = events[-1]["sequence"] if events else after
    return {
        "resource_type": resource_type,
        "resource_id": kb["kb_id"],
        "events": events,
        "next_after_sequence": cursor,
        "has_more": cursor < head,
        "head_sequence": head,
    }
