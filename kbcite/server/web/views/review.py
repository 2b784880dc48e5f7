"""The review queue: an agent's pending proposals, each with its diff against the version it
was made from (and against the current one when that moved on), Approve, Rebase, Reject, and
Edit then approve (the person's text written in the agent's name, and said so).

Reading the queue needs the knowledge base's grant; deciding needs a token made with
``--review``, and never the token that proposed it: an agent cannot approve its own edit.
"""

from ....errors import InvalidArgument, NotFound, VersionConflict
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


def _reviewed(shown, store=None, kb_id=None):
    """A proposal with the diffs a review compares: against its base, and against the current
    version when the article moved on since; one the person edited before approving, with
    what they changed (``store`` reads the version it made in ``kb_id``)."""
    title = shown["new_title"]
    item = dict(shown, against_base=None, against_current=None, as_approved=None)
    if store is not None and shown["state"] == "approved" and shown["reason"]:
        made = store.version_texts(kb_id, shown["article_id"],
                                   [shown["version"]]).get(shown["version"])
        if made is not None:
            item["as_approved"] = compare(title, shown["content"], made[0], made[1])
    if shown["base"] is not None:
        item["against_base"] = compare(shown["base"]["title"], shown["base"]["content"], title,
                                       shown["content"])
    if shown["stale"] and shown["current"] is not None and shown["state"] == "pending":
        item["against_current"] = compare(shown["current"]["title"],
                                          shown["current"]["content"], title,
                                          shown["content"])
    return item


def queue(page):
    """``/kb/{kb}/review``: the pending proposals, oldest first."""
    kb_id = page.params["kb"]
    with page.reading() as store:
        rows = store.proposals.list(kb_id)
        items = [_reviewed(store.proposals.show(kb_id, row["proposal_id"]))
                 for row in rows[:QUEUE_DIFFS]]
    return page.render("review.html", kb=kb_id, items=items, more=rows[QUEUE_DIFFS:],
                       total=len(rows))


def proposal(page, status=200, problem=None):
    """``/kb/{kb}/review/{proposal}``: one proposal, pending or decided, the page an approval
    question links to."""
    kb_id = page.params["kb"]
    with page.reading() as store:
        item = _reviewed(store.proposals.show(kb_id, _number(page)), store, kb_id)
    return page.render("proposal.html", status=status, kb=kb_id, item=item, problem=problem)


def _decidable(page, number):
    """``(the proposal shown, None)`` where the person may decide it now, else ``(None, the
    page that says why not)``."""
    with page.reading() as store:
        shown = store.proposals.show(page.params["kb"], number)
    if not page.person.may_review:
        return None, page.web.error(403, REVIEW_ONLY)
    if shown["actor"] == page.person.name:
        return None, page.web.error(403, OWN)
    if shown["state"] != "pending":
        return None, proposal(page, 409, "This proposal was decided already (%s); nothing "
                                         "was changed." % shown["state"])
    return shown, None


def decide(page):
    """``POST /kb/{kb}/review/{proposal}/decide``: approve (``rebase`` to re-apply it onto the
    current version) or reject with a reason."""
    kb_id, number = page.params["kb"], _number(page)
    _, refused = _decidable(page, number)
    if refused is not None:
        return refused
    action = page.field("action", "")
    try:
        with page.writing(kb_id) as store:
            if action in ("approve", "rebase"):
                store.proposals.approve(kb_id, number, approver=page.person.name,
                                       rebase=action == "rebase")
            elif action == "reject":
                reason = page.field("reason", "").strip()
                if not reason:
                    return proposal(page, 400, "A rejection needs a reason, for the agent "
                                               "that proposed it. Nothing was decided.")
                store.proposals.reject(kb_id, number, approver=page.person.name,
                                      reason=reason)
            else:
                return proposal(page, 400, "Choose Approve, Rebase or Reject.")
    except VersionConflict as exc:
        return proposal(page, 409, exc.message)
    return redirect("/kb/%s/review/%d" % (url_part(kb_id), number))


def edit_then_approve(page):
    """``/kb/{kb}/review/{proposal}/edit``: the proposal's title and text in a form (GET);
    the person's version of it approved as one compare-and-swap against the version the form
    showed (POST): the agent its actor, the person its approver, the edit said in the
    version's summary and the proposal's reason. A conflict keeps their text and shows what
    changed since."""
    kb_id, number = page.params["kb"], _number(page)
    shown, refused = _decidable(page, number)
    if refused is not None:
        return refused
    if shown["gone"] or shown["current"] is None:
        return proposal(page, 409, "The article is gone since this was proposed: it can only "
                                   "be rejected. Nothing was decided.")
    item = _reviewed(shown)
    if page.req.method == "GET":
        return page.render("review_edit.html", kb=kb_id, item=item, title=shown["new_title"],
                           content=shown["content"], expected=shown["current_version"])
    title = page.field("title", "")
    content = page.field("content", "").replace("\r\n", "\n")
    expected = page.field("expected_version", "")
    try:
        with page.writing(kb_id) as store:
            store.proposals.approve(kb_id, number, approver=page.person.name, edited={
                "content": content, "title": title, "expected_version": expected})
    except VersionConflict as exc:
        return page.render("review_edit.html", status=409, kb=kb_id, item=item, title=title,
                           content=content, expected=shown["current_version"],
                           problem=exc.message)
    except InvalidArgument as exc:
        return page.render("review_edit.html", status=400, kb=kb_id, item=item, title=title,
                           content=content, expected=expected, problem=exc.message)
    return redirect("/kb/%s/review/%d" % (url_part(kb_id), number))
