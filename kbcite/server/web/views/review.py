"""The review queue: an agent's pending proposals, each with its diff against the version it
was made from (and against the current one when that moved on), Approve, Rebase and Reject.

Reading the queue needs the knowledge base's grant; deciding needs a token made with
``--review``, and never the token that proposed it: an agent cannot approve its own edit.
"""

from ....errors import NotFound, VersionConflict
from ..diffs import compare
from ..render import url_part
from ..responses import redirect

# Proposals whose diffs the queue's page shows; the rest are listed, each a link to its page.
QUEUE_DIFFS = 20

REVIEW_ONLY = ("Approving and rejecting need a token made with --review (kb token create NAME "
               "--grant KB --review). Nothing was decided.")
OWN = ("This proposal was made with your own token: a proposal is approved or rejected by "
       "someone else's. Nothing was decided.")


def _number(page):
    """The proposal's number from the path; a malformed one is not found."""
    value = page.params["proposal"]
    if not value.isdigit() or len(value) > 18:
        raise NotFound("no such proposal", proposal_id=value)
    return int(value)


def _reviewed(shown):
    """A proposal with the diffs a review compares: against its base, and against the current
    version when the article moved on since."""
    title = shown["new_title"]
    item = dict(shown, against_base=None, against_current=None)
    if shown["base"] is not None:
        item["against_base"] = compare(shown["base"]["title"], shown["base"]["content"], title,
                                       shown["content"])
    if shown["stale"] and shown["current"] is not None:
        item["against_current"] = compare(shown["current"]["title"],
                                          shown["current"]["content"], title,
                                          shown["content"])
    return item


def queue(page):
    """``/kb/{kb}/review``: the pending proposals, oldest first."""
    kb_id = page.params["kb"]
    with page.reading() as store:
        rows = store.list_proposals(kb_id)
        items = [_reviewed(store.show_proposal(kb_id, row["proposal_id"]))
                 for row in rows[:QUEUE_DIFFS]]
    return page.render("review.html", kb=kb_id, items=items, more=rows[QUEUE_DIFFS:],
                       total=len(rows))


def proposal(page, status=200, problem=None):
    """``/kb/{kb}/review/{proposal}``: one proposal, pending or decided, the page an approval
    question links to."""
    kb_id = page.params["kb"]
    with page.reading() as store:
        item = _reviewed(store.show_proposal(kb_id, _number(page)))
    return page.render("proposal.html", status=status, kb=kb_id, item=item, problem=problem)


def decide(page):
    """``POST /kb/{kb}/review/{proposal}/decide``: approve (``rebase`` to re-apply it onto the
    current version) or reject with a reason."""
    kb_id, number = page.params["kb"], _number(page)
    with page.reading() as store:
        shown = store.show_proposal(kb_id, number)
    if not page.person.may_review:
        return page.web.error(403, REVIEW_ONLY)
    if shown["actor"] == page.person.name:
        return page.web.error(403, OWN)
    if shown["state"] != "pending":
        return proposal(page, 409, "This proposal was decided already (%s); nothing was "
                                   "changed." % shown["state"])
    action = page.field("action", "")
    try:
        with page.writing(kb_id) as store:
            if action in ("approve", "rebase"):
                store.approve_proposal(kb_id, number, approver=page.person.name,
                                       rebase=action == "rebase")
            elif action == "reject":
                reason = page.field("reason", "").strip()
                if not reason:
                    return proposal(page, 400, "A rejection needs a reason, for the agent "
                                               "that proposed it. Nothing was decided.")
                store.reject_proposal(kb_id, number, approver=page.person.name,
                                      reason=reason)
            else:
                return proposal(page, 400, "Choose Approve, Rebase or Reject.")
    except VersionConflict as exc:
        return proposal(page, 409, exc.message)
    return redirect("/kb/%s/review/%d" % (url_part(kb_id), number))
