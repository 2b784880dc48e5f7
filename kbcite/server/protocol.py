"""The protocol, with no I/O: each request judged by its era and method, and answered.

The era is an ``initialize`` handshake and its session (2025-11-25 and earlier), or the
2026-07-28 ``_meta`` of that very request, nothing inferred from earlier ones; ``inbound``
decides it once, in the request's route, and the protocol takes it from there. The method
tables say what each era serves; the caller's grants and write mode (its token's, or the
command line's) say what it may do. Dispatch hands each request in and sends back what comes
out.
"""

import logging
from dataclasses import dataclass, field
from typing import Any, Optional

from ..errors import PermissionDenied, ToolError, WouldWait
from ..tools import TOOLS, tools_listed
from ..writes import mode
from . import resources
from .approval import Approvals, client_supports_form_elicitation
from .calls import Call, Cancelled, Principal, Session
from .inbound import (
    LATEST_LEGACY,
    LEGACY_VERSIONS,
    META_CAPABILITIES,
    META_SERVER,
    META_SUBSCRIPTION,
    META_VERSION,
    MODERN_VERSIONS,
    SERVER_NAME,
    SERVER_VERSION,
    SUPPORTED_VERSIONS,
)
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_VERSION,
    RpcError,
    tool_error,
    tool_result,
)
from .subscriptions import SUBSCRIPTIONS_MAX, TooMany
from .throttle import Throttle

EDIT_TOOL = "edit_knowledge_article"

# RFC 5424's levels, as logging/setLevel names them (server/utilities/logging.mdx), least
# severe first.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

# 2026-07-28 list results say how long a client may cache them (server/utilities/caching.mdx).
# The list depends on the caller's write mode: private to its authorisation, one minute.
LIST_TTL_MS = 60000

# Sent once in the handshake (and in server/discover); clients show it to the model.
INSTRUCTIONS = (
    "Knowledge-base tools whose citations are version stamps. Keep the citation object "
    "{knowledge_base_id, article_id, updated_at} from every search hit and read, and cite it. "
    "Send a citation's updated_at as expected_version, with a new idempotency_key, to edit "
    "what you read; a version_conflict's details carry the current citation and what changed "
    "since (details.changes): re-apply your change to the current content and retry. "
    "To learn which old citations changed, poll poll_resource_events (resource_type "
    "knowledge_base) from the head_sequence or next_after_sequence you last saw, then pass "
    "those citations to check_citations, which says for each whether it is current, changed "
    "(and what changed) or gone; read_knowledge_article with a version reads what a citation "
    "cited. Every edit may need a person's approval."
)

# The tool names a caller may call, by whether its writes are denied: looked up per call.
VISIBLE_TOOLS = {denied: frozenset(t["name"] for t in TOOLS
                                   if not (denied and t["name"] == EDIT_TOOL))
                 for denied in (False, True)}

log = logging.getLogger(__name__)
quiet = Throttle(log)


def check_meta(meta):
    """A 2026-07-28 request's _meta, checked: version served, capabilities an object."""
    version = meta.get(META_VERSION)
    if not isinstance(version, str):
        raise RpcError(INVALID_PARAMS, "Invalid params: _meta %s must be a string"
                       % META_VERSION)
    capabilities = meta.get(META_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: _meta %s is required, an object "
                       "(empty when the client supports no optional capability)"
                       % META_CAPABILITIES)
    if version not in MODERN_VERSIONS:
        raise RpcError(UNSUPPORTED_VERSION, "Unsupported protocol version",
                       {"supported": list(SUPPORTED_VERSIONS), "requested": version})
    return meta


class Listen:
    """What a subscriptions/listen request opens, handed to its transport in place of a
    result: the listen request's ID and the filter we honour (the acknowledgement's)."""

    def __init__(self, request_id, honored):
        self.request_id = request_id
        self.honored = honored

    def acknowledgement(self):
        """notifications/subscriptions/acknowledged: the first message of the stream."""
        return {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": {META_SUBSCRIPTION: self.request_id},
                           "notifications": self.honored}}

    def ended(self):
        """The listen request's result: the stream ends gracefully (the server stops)."""
        return {"jsonrpc": "2.0", "id": self.request_id,
                "result": {"resultType": "complete",
                           "_meta": {META_SUBSCRIPTION: self.request_id}}}


# -- the protocol -----------------------------------------------------------------------------


@dataclass
class Context:
    """What the protocol needs to know of one request besides its message."""

    principal: Principal
    call: Call
    session: Optional[Session] = None
    # Puts a question to the client in a handshake session; returns its JSON-RPC reply.
    ask: Any = None
    modern: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    # The caller's subscriptions (``add``, ``remove``), where its transport holds them.
    subscriptions: Any = None
    # Sends a notification to the client now, where the transport can (stdio).
    notify: Any = None

    @property
    def client_capabilities(self):
        """What the client declared it can do: this request's _meta (2026-07-28), or the
        session's initialize."""
        if self.modern:
            return self.meta.get(META_CAPABILITIES)
        return self.session.client_capabilities if self.session is not None else None


class Protocol:
    """Judges each message by its era and method, and runs tools for the caller it names."""

    def __init__(self, pool, signer, public_url=None):
        self.pool = pool
        # An edit under ``ask`` goes to the approval flow, which makes it through _run.
        self.approvals = Approvals(signer, pool, self._run, public_url)
        self.server_info = {"name": SERVER_NAME, "title": "Knowledge base",
                            "version": SERVER_VERSION}
        shared = {"tools/list": self._list_tools, "tools/call": self._call_tool,
                  "resources/list": self._list_resources,
                  "resources/templates/list": self._list_templates,
                  "resources/read": self._read_resource, "completion/complete": self._complete}
        # 2026-07-28 removed ping, resources/subscribe and logging/setLevel; listening replaces
        # the subscriptions (changelog.mdx, major changes 4 and 5).
        self.modern_methods = dict(shared, **{"server/discover": self._discover,
                                              "subscriptions/listen": self._listen})
        self.legacy_methods = dict(shared, **{"initialize": self._initialize, "ping": self._ping,
                                              "resources/subscribe": self._subscribe,
                                              "resources/unsubscribe": self._unsubscribe,
                                              "logging/setLevel": self._set_level})

    def handle(self, message, ctx):
        """The result of one request; raises RpcError for a JSON-RPC error, Cancelled if the
        client cancelled it."""
        method = message["method"]
        params = message.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: params must be an object")
        if ctx.modern:  # the route said so (inbound): decided once, not again here
            ctx.meta = check_meta(ctx.meta)
            handler = self.modern_methods.get(method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, "Method not found: %.200s (2026-07-28 serves "
                               "%s)" % (method, ", ".join(sorted(self.modern_methods))))
            result = handler(params, ctx)
            if isinstance(result, Listen):
                return result
            result.setdefault("resultType", "complete")
            result["_meta"] = {META_SERVER: self.server_info}
            return result
        # A request without 2026-07-28 _meta is served in a handshake session (versioning.mdx,
        # "Backward Compatibility with Initialization-Based Versions"): initialize makes one,
        # and ping is answered before it, as 2025-11-25 allows.
        session = ctx.session
        if method not in ("initialize", "ping") and (session is None
                                                     or session.protocol_version is None):
            raise RpcError(INVALID_PARAMS, "Invalid params: this request carries no _meta "
                           "(%s, %s) and no initialized session: send initialize first "
                           "(2025-11-25), or put the protocol version and client capabilities in "
                           "params._meta (2026-07-28)" % (META_VERSION, META_CAPABILITIES))
        handler = self.legacy_methods.get(method)
        if handler is None:
            # At once, for any method: a client probing falls back instead of timing out.
            raise RpcError(METHOD_NOT_FOUND, "Method not found: %.200s" % method)
        return handler(params, ctx)

    # -- methods -------------------------------------------------------------------------------

    def _initialize(self, params, ctx):
        """initialize: the handshake that makes a session's era and capabilities."""
        session = ctx.session
        if session is None:
            raise RpcError(INVALID_REQUEST, "Invalid Request: initialize needs a session")
        if session.protocol_version is not None:
            raise RpcError(INVALID_REQUEST, "Invalid Request: the session is already initialized")
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: protocolVersion must be a string",
                           {"supported": list(LEGACY_VERSIONS)})
        version = requested if requested in LEGACY_VERSIONS else LATEST_LEGACY
        capabilities = params.get("capabilities")
        session.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
        session.protocol_version = version
        client = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else {}
        # Throttled per token, as refusals are: a flood of initialize writes a few lines.
        quiet.info("session %s" % session.principal.name,
                   "session %s: client %s %s, protocol %s (asked %s), form elicitation %s, "
                   "caller %s, writes %s", session.id or "stdio", client.get("name", "?"),
                   client.get("version", "?"), version, requested,
                   "yes" if client_supports_form_elicitation(session.client_capabilities)
                   else "no", session.principal.name, session.principal.writes)
        return {"protocolVersion": version, "capabilities": self.capabilities(version),
                "serverInfo": self.server_info, "instructions": INSTRUCTIONS}

    @staticmethod
    def capabilities(version):
        """What the server offers in a version: tools, resources with subscriptions and list
        changes, completions (from 2025-03-26), logging (handshake versions only: 2026-07-28
        deprecates it)."""
        found = {"tools": {"listChanged": False},
                 "resources": {"subscribe": True, "listChanged": True}}
        if version in MODERN_VERSIONS or resources.speaks(version,
                                                          resources.COMPLETIONS_SINCE):
            found["completions"] = {}
        if version not in MODERN_VERSIONS:
            found["logging"] = {}
        return found

    @staticmethod
    def _ping(params, ctx):
        return {}

    def _discover(self, params, ctx):
        """server/discover (2026-07-28, server/discover.mdx)."""
        return {"supportedVersions": list(SUPPORTED_VERSIONS),
                "capabilities": self.capabilities(MODERN_VERSIONS[0]),
                "instructions": INSTRUCTIONS, "ttlMs": LIST_TTL_MS, "cacheScope": "public"}

    def tools_for(self, principal):
        """The tools a caller sees: the edit tool only where its writes are not denied; the
        search tool's description says whether its ranking is hybrid."""
        return [t for t in tools_listed(getattr(self.pool, "hybrid", False))
                if not (not principal.may_write and t["name"] == EDIT_TOOL)]

    def _list_tools(self, params, ctx):
        if params.get("cursor") is not None:
            # We never hand out a cursor: all tools fit one page.
            raise RpcError(INVALID_PARAMS, "Invalid params: unknown cursor")
        result = {"tools": self.tools_for(ctx.principal)}
        if ctx.modern:
            result.update(ttlMs=LIST_TTL_MS, cacheScope="private")
        return result

    def _call_tool(self, params, ctx):
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: name must be a string")
        names = VISIBLE_TOOLS[not ctx.principal.may_write]
        if name not in names:
            hint = (" (edits are denied to this caller: the server was started with --writes "
                    "deny, or its token made with --writes deny)") if name == EDIT_TOOL else ""
            raise RpcError(INVALID_PARAMS, "Unknown tool: %.200s%s" % (name, hint),
                           {"tools": sorted(names)})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        writes = mode(ctx.principal.writes_for(arguments.get("knowledge_base_id")))
        if name == EDIT_TOOL and not writes.edits:
            # A caller that may edit some knowledge base, but not this one.
            return tool_error(PermissionDenied(
                "edits of knowledge base %.64r are not granted to %s: "
                "ask for the kb:%.64s:write scope (or a kb grant with --writes)"
                % (arguments.get("knowledge_base_id"), ctx.principal.name,
                   arguments.get("knowledge_base_id"))))
        if name == EDIT_TOOL and writes.waits_for_a_person and ctx.call.no_wait:
            # A person's approval, or the review queue: served on a thread, never the loop.
            raise WouldWait("an edit in writes mode %s" % writes.name)
        try:
            if name == EDIT_TOOL and writes.asks:
                return self.approvals.edit(name, arguments, params, ctx)
            if name == EDIT_TOOL and writes.proposes:
                return self.approvals.propose(arguments, ctx)
            return self.with_links(name, tool_result(self._run(name, arguments, ctx)), ctx)
        except ToolError as err:
            if ctx.call.cancelled.is_set():
                raise Cancelled() from None  # stopped by the cancel: nothing written, no answer
            # Reported to the model as a result with isError, never as a JSON-RPC error: the
            # spec wants errors that arise in the tool where the model can see and act on them.
            # The store turns every failure of a call (its database's included) into one.
            log.info("%s: %s: %s", name, err.code, err.message)
            self.log_to_client(ctx, "warning", {"tool": name, "error": err.code,
                                                "message": err.message})
            return tool_error(err)

    @staticmethod
    def with_links(name, result, ctx):
        """A tool result with a resource_link beside it for each article it cites (a search's
        hits, a read), where the client's version has resource links (2025-06-18 on)."""
        if ctx.modern or (ctx.session is not None and resources.speaks(
                ctx.session.protocol_version, resources.LINKS_SINCE)):
            result["content"].extend(resources.links_for(name, result["structuredContent"]))
        return result

    @staticmethod
    def log_to_client(ctx, level, data):
        """notifications/message to a handshake session that asked for this level or a less
        severe one (logging/setLevel), where its transport can send one now."""
        session = ctx.session
        wanted = getattr(session, "log_level", None) if session is not None else None
        if ctx.modern or wanted is None or ctx.notify is None:
            return
        if LOG_LEVELS.index(level) >= LOG_LEVELS.index(wanted):
            ctx.notify({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": level, "logger": SERVER_NAME, "data": data}})

    # -- resources and completions -------------------------------------------------------------

    def _reading(self, ctx):
        """A read connection for a request, which the client's cancel can stop."""
        return self.pool.reading(ctx.call.cancelled)

    def _list_resources(self, params, ctx):
        with self._reading(ctx) as store:
            return resources.list_resources(store, params, ctx.principal, ctx.modern)

    def _list_templates(self, params, ctx):
        return resources.list_templates(params, ctx.modern)

    def _read_resource(self, params, ctx):
        with self._reading(ctx) as store:
            return resources.read_resource(store, params, ctx.principal, ctx.modern)

    def _complete(self, params, ctx):
        with self._reading(ctx) as store:
            return resources.complete(store, params, ctx.principal)

    # -- subscriptions and logging ----------------------------------------------------------

    @staticmethod
    def _subscriptions(ctx):
        if ctx.subscriptions is None:
            raise RpcError(METHOD_NOT_FOUND, "Method not found: this transport holds no "
                           "subscriptions")
        return ctx.subscriptions

    def _subscribe(self, params, ctx):
        """resources/subscribe (2025-11-25): any URI is taken, ours or not, readable or not,
        so that subscribing tells nothing; only what the caller may read ever notifies."""
        uri = resources.check_uri_param(params)
        if len(uri) > resources.URI_MAX:
            raise RpcError(INVALID_PARAMS, "Invalid params: uri is longer than %d characters"
                           % resources.URI_MAX)
        try:
            self._subscriptions(ctx).add(uri)
        except TooMany as exc:
            raise RpcError(INTERNAL_ERROR, "Subscription limit reached: %s" % exc,
                           {"reason": "subscription_limit"}) from None
        return {}

    def _unsubscribe(self, params, ctx):
        """resources/unsubscribe: forget a URI subscribed to (one never subscribed is fine)."""
        self._subscriptions(ctx).remove(resources.check_uri_param(params))
        return {}

    def _listen(self, params, ctx):
        """subscriptions/listen (2026-07-28): the stream's filter, as far as we honour it; the
        transport sends the acknowledgement and holds the stream open."""
        if ctx.subscriptions is None:
            raise RpcError(METHOD_NOT_FOUND, "Method not found: this transport holds no "
                           "listen streams")
        wanted = params.get("notifications")
        if not isinstance(wanted, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: notifications must be an object "
                           "(a SubscriptionFilter: resourcesListChanged, resourceSubscriptions)")
        uris = wanted.get("resourceSubscriptions", [])
        if not isinstance(uris, list) or not all(isinstance(u, str) and len(u) <= resources.URI_MAX
                                                 for u in uris):
            raise RpcError(INVALID_PARAMS, "Invalid params: resourceSubscriptions must be a list "
                           "of URIs (strings of at most %d characters)" % resources.URI_MAX)
        if len(set(uris)) > SUBSCRIPTIONS_MAX:
            raise RpcError(INVALID_PARAMS, "Invalid params: at most %d URIs a listen stream; "
                           "open another stream for more" % SUBSCRIPTIONS_MAX)
        honored: dict[str, Any] = {}
        # Tools and prompts never change here (tools.listChanged is false; no prompts).
        if wanted.get("resourcesListChanged") is True:
            honored["resourcesListChanged"] = True
        if uris:
            honored["resourceSubscriptions"] = list(dict.fromkeys(uris))
        return Listen(ctx.call.request_id, honored)

    def _set_level(self, params, ctx):
        """logging/setLevel (2025-11-25): the least severe notifications/message to send."""
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise RpcError(INVALID_PARAMS, "Invalid params: level must be one of %s"
                           % ", ".join(LOG_LEVELS))
        ctx.session.log_level = level
        return {}

    def _run(self, name, arguments, ctx):
        """The tool's structured result, on a borrowed store the client's cancel can stop: an
        edit's from the edit connections, in its knowledge base's turn; any other's from the
        read connections, which no waiting edit holds."""
        call = ctx.call
        if name == EDIT_TOOL:
            borrowed = self.pool.writing(arguments.get("knowledge_base_id"),
                                         ctx.principal.grants, call.cancelled,
                                         wait=not call.no_wait)
        else:
            borrowed = self.pool.reading(call.cancelled)
        with borrowed as store:
            store.clear_interrupt()
            call.interrupt = store.interrupt
            try:
                if call.cancelled.is_set():
                    raise Cancelled()
                # The caller's name (a token's, a person's at the team's issuer, or the stdio
                # server's --actor) is who the history says made what it writes.
                return store.call_tool(name, arguments, granted=ctx.principal.grants,
                                       actor=ctx.principal.name, issuer=ctx.principal.issuer)
            except ToolError:
                # Stopped by the client's cancel (rolled back: nothing written), it has no
                # response. One that finished first is answered all the same: what it did
                # is done, and the caller hears it.
                if call.cancelled.is_set():
                    raise Cancelled() from None
                raise
            finally:
                call.interrupt = None
