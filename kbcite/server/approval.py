"""The approval flow: an edit under ``--writes ask`` is put to a person before it is written.

In a handshake session the server asks through ``elicitation/create`` and waits; in
2026-07-28 it answers ``input_required`` with the question and a signed, expiring handle, and
finishes when the client comes back with the answer and the handle (``ApprovalSigner``).
``Approvals`` runs both; the protocol hands it every such edit. A client that cannot be
asked (no form elicitation) gets its edit kept as a proposal for ``kb review`` instead, as
every edit is under ``--writes review``.

Where the server knows its public address (``--public-url``) and the client opens links
(URL-mode elicitation, 2025-11-25 on), the edit is kept as a proposal at once and the
question is its page, ``/kb/{kb}/review/{proposal}``: the person reads the change there and
approves or rejects it signed in as themselves, so the history names them and no client can
answer for them. Accepting only opens the page (client/elicitation.mdx, "URL Mode"); the tool
answers ``proposed`` with the page's URL, and the agent learns the outcome from the events.
"""

import base64
import hashlib
import hmac
import json
import logging
import secrets
import time

from ..errors import ToolError
from ..limits import APPROVAL_TTL_S
from ..linediff import CHANGED_CHARS, printable, unified
from ..validation import shown
from .calls import ASK_TIMEOUT_S
from .jsonrpc import INVALID_PARAMS, RpcError, to_json, tool_error, tool_result
from .links import proposal_page

# Elicitation arrived in 2025-06-18: an older session has no way to ask the person anything.
ELICITATION_SINCE = "2025-06-18"

# The elicitation `mode` field arrived in 2025-11-25; the spec lets form mode omit it, and
# omitting it keeps 2025-06-18 clients, whose schema does not know it, on familiar ground.
ELICITATION_MODE_SINCE = "2025-11-25"

# The server's own tool error code, from the approval step; the store's codes come from it.
WRITE_NOT_APPROVED = "write_not_approved"

# The reason a proposal is rejected with when the person declines, in the client, to open
# its page: the agent reads it in the proposal.rejected event.
DECLINED_IN_CLIENT = "the person declined to review it when the client asked"

# The key of the one input request an approval makes (2026-07-28 inputRequests).
APPROVAL_KEY = "approve"


# The question shows the title and knowledge-base ID cut to this.
QUESTION_TITLE_CHARS = 200

log = logging.getLogger(__name__)


class WriteNotApproved(ToolError):
    """An edit the person did not approve, or could not be asked about; nothing was written."""

    code = WRITE_NOT_APPROVED


def client_supports_form_elicitation(capabilities):
    """Whether declared client capabilities include form-mode elicitation.

    ``elicitation: {}`` is form mode only, for backwards compatibility; otherwise form mode
    must be named (a client offering only ``url`` cannot show an approval form).
    """
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(elicitation, dict):
        return False
    return not elicitation or "form" in elicitation


def client_supports_url_elicitation(capabilities):
    """Whether declared client capabilities include URL-mode elicitation (named ``url``)."""
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    return isinstance(elicitation, dict) and "url" in elicitation


def _quoted(text, limit=QUESTION_TITLE_CHARS):
    return '"%s"' % printable(text, limit).replace("\n", "\\n")


def _bytes(n):
    return "{:,} byte{}".format(n, "" if n == 1 else "s")


def _lines(n):
    return "{:,} line{}".format(n, "" if n == 1 else "s")


def question_text(preview, *, asking=True):
    """The words a person reads about one edit: where, which version, and the change as a
    bounded unified diff (the same text for both eras and for the command line)."""
    change = preview["new_bytes"] - preview["current_bytes"]
    new_title = preview.get("new_title") or preview["title"]
    diff = unified(preview["title"], preview["current_content"], new_title,
                   preview["new_content"])
    lines = [
        "An agent wants to edit an article in knowledge base %s."
        % _quoted(preview["knowledge_base_id"]),
        "",
        "Article: %s (ID %s)" % (_quoted(preview["title"]), preview["article_id"]),
    ]
    if new_title != preview["title"]:
        lines.append("New title: %s" % _quoted(new_title))
    lines += [
        "Version the agent read: %s (%s)." % (
            preview["current_version"], preview.get("version_note", "the current one")),
        "Content: %s now, %s after the edit (%+d bytes): %s added, %s removed."
        % (_bytes(preview["current_bytes"]), _bytes(preview["new_bytes"]), change,
           _lines(diff["lines_added"]), _lines(diff["lines_removed"])),
        "",
        "The change, as a unified diff (lines starting - go, lines starting + come; "
        "@@ -A,B +C,D @@ says they are B lines from line A before and D lines from line C "
        "after; every changed line is shown, up to {:,} characters of them):".format(
            CHANGED_CHARS),
        "",
        diff["text"],
    ]
    if asking:
        lines += ["", "Accept to write this change; decline to refuse it. Every edit is "
                      "asked about."]
    return "\n".join(lines)


def approval_request(preview, with_mode):
    """The ``elicitation/create`` params asking the person to approve one edit."""
    # A confirmation asks for no data: the accept or decline button is the answer.
    params = {"message": question_text(preview),
              "requestedSchema": {"type": "object", "properties": {}}}
    if with_mode:
        params = dict({"mode": "form"}, **params)
    return params


def review_request(preview, proposed):
    """The URL-mode ``elicitation/create`` params sending the person to a proposal's page."""
    lines = [
        "An agent proposes an edit of article %s (ID %s) in knowledge base %s: proposal %d."
        % (_quoted(preview["title"]), preview["article_id"],
           _quoted(preview["knowledge_base_id"]), proposed["proposal_id"]),
        "Open its page to see the change and approve or reject it, signed in as yourself; "
        "until then the article is unchanged. Declining rejects the proposal.",
        "",
        question_text(preview, asking=False)]
    return {"mode": "url", "url": proposed["review_url"], "message": "\n".join(lines)}


def not_approved(action, where):
    """The write_not_approved error for a person's answer other than accept."""
    if action == "decline":
        text, reason = "The person declined the edit.", "decline"
    elif action == "cancel":
        text, reason = "The person dismissed the question, so the edit was not made.", "cancel"
    else:
        text = ("The client answered the approval question with %s, which is not accept, "
                "decline or cancel, so the edit was not made." % shown(action))
        reason = "invalid_answer"
    return WriteNotApproved("%s Nothing was written; do not retry it unless they ask." % text,
                            reason=reason, **where)


def args_digest(arguments):
    """SHA-256 of arguments in canonical JSON: an approval is for these exact arguments."""
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


# -- approvals without server state (2026-07-28) ----------------------------------------------


class ApprovalSigner:
    """Signed, expiring approval handles: the ``requestState`` of an input-required result.

    The handle is ``base64url(payload).base64url(HMAC-SHA256(secret, payload))``; the payload
    names the tool, a digest of its exact arguments, the caller and an expiry. Any server with
    the same secret can check it (basic/patterns/mrtr.mdx, "Server Requirements": integrity,
    principal, expiry, originating request). It need not be single-use: the edit it approves
    carries an idempotency key, so sending it twice writes once.
    """

    def __init__(self, secret, ttl_s=APPROVAL_TTL_S, clock=time.time):
        self.secret = secret
        self.ttl_s = ttl_s
        self.clock = clock

    def _mac(self, payload):
        return hmac.new(self.secret, payload, hashlib.sha256).digest()

    def issue(self, principal, tool, arguments, proposal=None):
        """A handle approving ``tool`` with ``arguments`` for ``principal``, expiring soon;
        ``proposal`` names the proposal whose page the person was sent to (URL mode)."""
        fields = {"v": 1, "t": tool, "a": args_digest(arguments), "p": principal,
                  "exp": int(self.clock() + self.ttl_s), "n": secrets.token_urlsafe(8)}
        if proposal is not None:
            fields["pr"] = proposal
        payload = to_json(fields).encode("utf-8")
        return "%s.%s" % (_b64(payload), _b64(self._mac(payload)))

    def check(self, state, principal, tool, arguments):
        """The handle's fields; RpcError(-32602) unless ``state`` is a good handle for
        exactly this call."""
        fields, reason = self._open(state, principal, tool, arguments)
        if reason:
            raise RpcError(INVALID_PARAMS, "Invalid or expired requestState: %s. Call the tool "
                           "again without requestState to be asked anew." % reason,
                           {"reason": "invalid_request_state"})
        return fields

    def _open(self, state, principal, tool, arguments):
        """``(fields, None)`` of a good handle, ``(None, why not)`` otherwise."""
        if not isinstance(state, str) or state.count(".") != 1 or len(state) > 4096:
            return None, "it is not a handle this server issued"
        payload_text, mac_text = state.split(".")
        try:
            payload, mac = _unb64(payload_text), _unb64(mac_text)
        except ValueError:
            return None, "it is not a handle this server issued"
        if not hmac.compare_digest(mac, self._mac(payload)):
            return None, "its signature does not match (altered, or from another secret)"
        fields = json.loads(payload.decode("utf-8"))
        if fields.get("exp", 0) < self.clock():
            return None, "it expired"
        if fields.get("p") != principal:
            return None, "it was issued to another caller"
        if fields.get("t") != tool or fields.get("a") != args_digest(arguments):
            return None, "it was issued for other arguments"
        return fields, None


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text):
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(str(exc)) from None


# -- the flow, both eras ------------------------------------------------------------------------


class Approvals:
    """Puts each edit under ``ask`` to a person, then makes it or says why not.

    ``run(name, arguments, ctx)`` is the protocol's tool call, made once the person accepts;
    ``pool`` lends the store that previews the edit; ``public_url``, where known, is the
    address the people's pages are reached at (``links.check_public_url``).
    """

    def __init__(self, signer, pool, run, public_url=None):
        self.signer = signer
        self.pool = pool
        self.run = run
        self.public_url = public_url

    def edit(self, name, arguments, params, ctx):
        """The edit under ``ask``: checks and replays first, then the person, then the write."""
        if ctx.modern and "requestState" in params:
            return self._finish(name, arguments, params, ctx)
        # Validation, the version check and replay detection all happen before asking:
        # nobody is asked about an edit that would fail, or one already made.
        preview = self._preview(arguments, ctx)
        if preview["replay"]:
            log.info("%s: replay of an edit already made; not asking again", name)
            return tool_result(preview["result"])
        if preview["unchanged"]:
            # Nothing to approve: it writes nothing, and answers changed: false.
            return tool_result(self.run(name, arguments, ctx))
        where = {"knowledge_base_id": preview["knowledge_base_id"],
                 "article_id": preview["article_id"]}
        if self._sends_to_page(ctx):
            return self._ask_to_review(preview, name, arguments, ctx)
        if ctx.modern:
            if not client_supports_form_elicitation(ctx.client_capabilities):
                # Nobody can be asked through this client: a person reviews it later instead.
                log.info("%s: the client cannot be asked (no form elicitation); kept as a "
                         "proposal", name)
                return self.propose(arguments, ctx)
            return self._input_required(preview, name, arguments, ctx)
        if self._cannot_ask(ctx.session):
            log.info("%s: %s; kept as a proposal", name, self._cannot_ask(ctx.session))
            return self.propose(arguments, ctx)
        self._ask_in_session(preview, where, ctx)
        return tool_result(self.run(name, arguments, ctx))

    def propose(self, arguments, ctx):
        """The edit kept as a proposal for a person to review (writes mode review, or ask
        with a client that cannot be asked): success, ``status: "proposed"``."""
        return tool_result(self._proposal(arguments, ctx))

    def _proposal(self, arguments, ctx):
        """The edit kept as a proposal (the same one again for the same key and arguments),
        with its page's URL where the public address is known."""
        call = ctx.call
        with self.pool.writing(arguments.get("knowledge_base_id"), ctx.principal.grants,
                               call.cancelled) as store:
            store.clear_interrupt()
            call.interrupt = store.interrupt
            try:
                result = store.propose_edit(arguments, granted=ctx.principal.grants,
                                            actor=ctx.principal.name,
                                            issuer=ctx.principal.issuer)
            finally:
                call.interrupt = None
        if "proposal_id" not in result:
            return result  # an edit that changes nothing is no proposal: changed false
        page = proposal_page(self.public_url, result["knowledge_base_id"],
                             result["proposal_id"])
        if page is not None:
            result["review_url"] = page
            result["review"] = result["review"].replace(
                "a person reviews it: ", "a person reviews it at %s or with " % page, 1)
        return result

    def _sends_to_page(self, ctx):
        """Whether this caller's question is a link to the proposal's page: the public
        address is known and the client opens links (URL-mode elicitation)."""
        if not self.public_url:
            return False
        if ctx.modern:
            return client_supports_url_elicitation(ctx.client_capabilities)
        session = ctx.session
        return session is not None and session.initialized and \
            session.protocol_version >= ELICITATION_MODE_SINCE and \
            client_supports_url_elicitation(session.client_capabilities)

    def _ask_to_review(self, preview, name, arguments, ctx):
        """Keep the edit as a proposal and send the person to its page: in a handshake
        session an ``elicitation/create`` (mode url) now, in 2026-07-28 an input-required
        result whose handle names the proposal."""
        proposed = self._proposal(arguments, ctx)
        if proposed["replayed"]:
            return tool_result(proposed)  # asked about once already: the page is the answer
        question = review_request(preview, proposed)
        if ctx.modern:
            return {"resultType": "input_required",
                    "inputRequests": {APPROVAL_KEY: {"method": "elicitation/create",
                                                     "params": question}},
                    "requestState": self.signer.issue(ctx.principal.name, name, arguments,
                                                      proposal=proposed["proposal_id"])}
        # One ID per question (the spec's completion notice would name it).
        reply = ctx.ask(dict(question, elicitationId="kb-proposal-%d-%s" % (
            proposed["proposal_id"], secrets.token_urlsafe(8))))
        result = reply.get("result") if isinstance(reply, dict) else None
        action = result.get("action") if isinstance(result, dict) else None
        return self._after_page_question(action, arguments, ctx)

    def _after_page_question(self, action, arguments, ctx):
        """The person's answer to a page question: decline rejects the proposal; accept
        (the page opened), cancel, or no answer leave it pending at its page."""
        proposed = self._proposal(arguments, ctx)
        if action != "decline":
            log.info("proposal %d: %s; pending at %s", proposed["proposal_id"],
                     "the person opens its page" if action == "accept" else
                     "no answer (%r)" % (action,), proposed["review_url"])
            return tool_result(proposed)
        kb_id = proposed["knowledge_base_id"]
        with self.pool.writing(kb_id, ctx.principal.grants, ctx.call.cancelled) as store:
            store.proposals.reject(kb_id, proposed["proposal_id"], approver=ctx.principal.name,
                                  reason=DECLINED_IN_CLIENT)
        refused = not_approved("decline", {"knowledge_base_id": kb_id,
                                           "article_id": proposed["article_id"]})
        refused.message += " (Proposal %d is rejected.)" % proposed["proposal_id"]
        refused.details["proposal_id"] = proposed["proposal_id"]
        return tool_error(refused)

    @staticmethod
    def _cannot_ask(session):
        """Why this session's client can never be asked (None where it can, or will)."""
        if session.protocol_version < ELICITATION_SINCE:
            return "this client speaks MCP %s, which has no elicitation" % \
                session.protocol_version
        if not client_supports_form_elicitation(session.client_capabilities):
            return "this client did not declare the elicitation capability (form mode)"
        return None

    def _finish(self, name, arguments, params, ctx):
        """A 2026-07-28 retry carrying the person's answer and the handle it was asked with."""
        handle = self.signer.check(params["requestState"], ctx.principal.name, name, arguments)
        responses = params.get("inputResponses")
        answer = responses.get(APPROVAL_KEY) if isinstance(responses, dict) else None
        if "pr" in handle:
            # The person was sent to the proposal's page: it is decided there, not here.
            return self._after_page_question(
                answer.get("action") if isinstance(answer, dict) else None, arguments, ctx)
        if not isinstance(answer, dict):
            # The answer is missing: ask again rather than fail (mrtr.mdx, "Error Handling").
            preview = self._preview(arguments, ctx)
            if preview["replay"]:
                return tool_result(preview["result"])
            return self._input_required(preview, name, arguments, ctx)
        action = answer.get("action")
        if action != "accept":
            log.info("edit of %s/%s not approved: %r (signed handle)",
                     arguments.get("knowledge_base_id"), arguments.get("article_id"), action)
            return tool_error(not_approved(action, {
                "knowledge_base_id": arguments.get("knowledge_base_id"),
                "article_id": arguments.get("article_id")}))
        log.info("edit of %s/%s approved (signed handle)", arguments.get("knowledge_base_id"),
                 arguments.get("article_id"))
        return tool_result(self.run(name, arguments, ctx))

    def _input_required(self, preview, name, arguments, ctx):
        """2026-07-28: the question for the person, and a signed handle to come back with."""
        return {"resultType": "input_required",
                "inputRequests": {APPROVAL_KEY: {
                    "method": "elicitation/create",
                    "params": approval_request(preview, with_mode=True)}},
                "requestState": self.signer.issue(ctx.principal.name, name, arguments)}

    def _ask_in_session(self, preview, where, ctx):
        """Ask the person through elicitation/create; returns if they accept."""
        session = ctx.session
        if not session.initialized:
            raise WriteNotApproved(
                "Edits need a person's approval: this caller's writes are set to ask (--writes "
                "ask, or a token made with it), and the server asks through MCP elicitation "
                "(form mode), but the client has not sent notifications/initialized yet. "
                "Nothing was written: send it, then retry. "
                "To let this agent edit without asking, give it --writes allow (or a token "
                "made with --writes allow); to refuse all edits, --writes deny.",
                reason="cannot_ask", **where)
        reply = ctx.ask(approval_request(
            preview, with_mode=session.protocol_version >= ELICITATION_MODE_SINCE))
        if reply is None:
            raise WriteNotApproved("The person gave no answer (the client went away, or took "
                                   "longer than %d s). Nothing was written." % ASK_TIMEOUT_S,
                                   reason="no_answer", **where)
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            raise WriteNotApproved(
                "The client could not ask the person (error %s: %s). Nothing was written."
                % (error.get("code"), error.get("message")), reason="elicitation_error",
                **where)
        result = reply.get("result")
        action = result.get("action") if isinstance(result, dict) else None
        if action != "accept":
            log.info("edit of %s/%s not approved: %r", where["knowledge_base_id"],
                     where["article_id"], action)
            raise not_approved(action, where)
        log.info("edit of %s/%s approved", where["knowledge_base_id"], where["article_id"])

    def _preview(self, arguments, ctx):
        """What the edit would do, checked (arguments, version, replay); nothing written."""
        with self.pool.reading(ctx.call.cancelled) as store:
            return store.preview_edit(arguments, granted=ctx.principal.grants)
