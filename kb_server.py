#!/usr/bin/env python3
"""The MCP server of the knowledge-base store: stdio or Streamable HTTP, both protocol eras.

    kb-server --db PATH --grant KB [--grant KB ...] [--writes ask|allow|deny]   # stdio
    kb-server --db PATH --http 127.0.0.1:8765                                    # HTTP, /mcp

Three layers, each ignorant of the one above it:

1. **Transports** move whole JSON-RPC messages. ``StdioTransport`` reads and writes lines;
   ``HttpTransport`` (standard library ``http.server``, a thread per connection) turns a POST
   into a message and a JSON body or an event stream, and owns HTTP's concerns: the bearer
   token, ``Origin`` and ``Host``, body caps, slow and idle clients, ``Mcp-Session-Id``, and
   the 2026-07-28 routing headers checked against the body.
2. **The protocol** (``Protocol``) judges each message: its era (an ``initialize`` handshake and
   its session, revision 2025-11-25 and earlier; or the 2026-07-28 ``_meta`` of that very
   request, nothing inferred from earlier ones), its method, and what the caller may do (the
   knowledge bases and the write mode its token, or the command line, grants). An edit under
   ``ask`` is put to a person: in a handshake session by a server-sent ``elicitation/create``;
   in 2026-07-28 by an ``input_required`` result carrying the question and a signed, expiring
   handle (HMAC over the tool, the exact arguments and the caller), so that any server sharing
   the database and the signing secret can finish the edit.
3. **The tools** are the store's ``call_tool``, the same for every transport and era, each
   request on a store connection of its own from a bounded pool.

stdout carries protocol messages only (stdio); everything else, logs included, goes to stderr.
"""

import argparse
import base64
import contextlib
import hashlib
import hmac
import http.server
import io
import ipaddress
import json
import logging
import math
import os
import queue
import secrets
import socket
import socketserver
import sys
import threading
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import kb_store

SERVER_NAME = "kb-server"
SERVER_VERSION = "0.2.0"

# Protocol revisions. Handshake (legacy) versions, newest first: a client asking initialize for
# a version we do not speak is answered with the first. The modern one is per request.
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MODERN_VERSIONS = ("2026-07-28",)
SUPPORTED_VERSIONS = MODERN_VERSIONS + LEGACY_VERSIONS
LATEST_LEGACY = LEGACY_VERSIONS[0]
# Elicitation arrived in 2025-06-18: an older session has no way to ask the person anything.
ELICITATION_SINCE = "2025-06-18"
# The elicitation `mode` field arrived in 2025-11-25; the spec lets form mode omit it, and
# omitting it keeps 2025-06-18 clients, whose schema does not know it, on familiar ground.
ELICITATION_MODE_SINCE = "2025-11-25"

# The 2026-07-28 per-request _meta keys (basic/index.mdx, "Per-request protocol fields").
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT = "io.modelcontextprotocol/clientInfo"
META_SERVER = "io.modelcontextprotocol/serverInfo"

# JSON-RPC 2.0 error codes, and those MCP 2026-07-28 defines (basic/index.mdx, "Error Codes").
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022
# The HTTP status of each error on the 2026-07-28 path (transports/streamable-http.mdx).
ERROR_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400,
                HEADER_MISMATCH: 400, MISSING_CAPABILITY: 400, UNSUPPORTED_VERSION: 400,
                METHOD_NOT_FOUND: 404}

WRITE_MODES = kb_store.WRITE_MODES
EDIT_TOOL = "edit_knowledge_article"
# The server's own tool error code, from the approval step; the store's codes come from it.
WRITE_NOT_APPROVED = "write_not_approved"
# The key of the one input request an approval makes (2026-07-28 inputRequests).
APPROVAL_KEY = "approve"
# How long an approval handle stays good, and how long a handshake session's question waits
# for its person: long enough to read an edit, short enough that a forgotten one lapses.
APPROVAL_TTL_S = 600
ASK_TIMEOUT_S = 600
# The question shows at most this much of the new content and title.
QUESTION_CONTENT_CHARS = 600
QUESTION_TITLE_CHARS = 200
# 2026-07-28 list results say how long a client may cache them (server/utilities/caching.mdx).
# The list depends on the caller's write mode: private to its authorisation, one minute.
LIST_TTL_MS = 60000

# Streamable HTTP defaults. A 1 MiB article JSON-escaped with \u sequences takes six bytes a
# character: 8 MiB holds any valid edit, and refuses a flood.
MCP_PATH = "/mcp"
MAX_BODY = 8 * 1024 * 1024
# A request must arrive whole within this (a client trickling a byte a second is cut off), and
# an open connection waits this long for its next request.
REQUEST_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 60.0
MAX_CONNECTIONS = 64
# Connections the kernel queues before the server accepts them. socketserver's 5 overflows
# when many clients connect at once, and Linux then resets what it dropped: 64 connecting
# together got 20 to 37 "connection reset" in each of five tries. Room for every connection
# the server would serve, and never less than this.
LISTEN_BACKLOG = 128
WORKERS = 8

# Sent once in the handshake (and in server/discover); clients show it to the model.
INSTRUCTIONS = (
    "Knowledge-base tools whose citations are version stamps. Keep the citation object "
    "{knowledge_base_id, article_id, updated_at} from every search hit and read, and cite it. "
    "Re-read an article right before editing it and send its updated_at as expected_version "
    "with a new idempotency_key; on version_conflict, re-read, re-apply your change and retry. "
    "To check whether old citations are still current, poll poll_resource_events "
    "(resource_type knowledge_base) from the head_sequence or next_after_sequence you last "
    "saw, instead of re-reading everything you cited. Every edit may need a person's approval."
)

# Characters an agent-chosen string must not use to rewrite what a person reads: controls,
# bidirectional overrides and isolates, line and paragraph separators.
_BIDI = {0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067,
         0x2068, 0x2069, 0x2028, 0x2029}

log = logging.getLogger("kb_server")


class RpcError(Exception):
    """A JSON-RPC error, answered in place of a result."""

    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self):
        """The ``error`` member of a JSON-RPC response."""
        error = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class WriteNotApproved(kb_store.ToolError):
    """An edit the person did not approve, or could not be asked about; nothing was written."""

    code = WRITE_NOT_APPROVED


class Cancelled(Exception):
    """The client cancelled the request: no response is sent for it."""


@dataclass(frozen=True)
class Principal:
    """Who is calling and what they may do: a token's (HTTP) or the command line's (stdio)."""

    name: str
    grants: frozenset
    writes: str


@dataclass
class Call:
    """One request in flight: its ID, whether the client has cancelled it, and how to stop
    the store call it is in (if any)."""

    request_id: Any
    cancelled: threading.Event = field(default_factory=threading.Event)
    interrupt: Any = None

    def cancel(self):
        """Mark it cancelled and stop its store call: a wait for a lock ends, nothing written."""
        self.cancelled.set()
        interrupt = self.interrupt
        if interrupt is not None:
            interrupt()


@dataclass
class Ask:
    """A question a handshake session put to the client, waiting for its answer."""

    call: Call
    answered: threading.Event = field(default_factory=threading.Event)
    reply: Optional[dict] = None


class Session:
    """A handshake (2025-11-25 and earlier) session: what initialize negotiated, per process
    (stdio) or per ``Mcp-Session-Id`` (HTTP), and the calls and questions in flight."""

    def __init__(self, principal, session_id=None):
        self.principal = principal
        self.id = session_id
        self.protocol_version = None
        self.client_capabilities = {}
        self.initialized = False
        self.lock = threading.Lock()
        self.calls = {}  # request key -> Call
        self.asks = {}  # our elicitation request ID -> Ask
        self._asked = 0
        self.closed = False

    def next_ask_id(self):
        """A fresh ID for a request of ours (never reused within the session)."""
        with self.lock:
            self._asked += 1
            return "approve-%d" % self._asked

    def ask(self, call, params, send):
        """Put elicitation/create to the client through ``send`` for ``call``, and wait for
        the answer; returns ``(our request ID, the reply or None on timeout)``."""
        ask_id = self.next_ask_id()
        ask = Ask(call)
        with self.lock:
            self.asks[ask_id] = ask
        try:
            send({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
                  "params": params})
            if not call.cancelled.is_set():  # a question that could not be sent has no answer
                ask.answered.wait(ASK_TIMEOUT_S)
        finally:
            with self.lock:
                self.asks.pop(ask_id, None)
        return ask_id, ask.reply

    def deliver(self, message):
        """The client's answer to one of our questions; False when it answers none."""
        with self.lock:
            ask = self.asks.get(message["id"]) if is_request_id(message["id"]) else None
        if ask is None:
            return False
        ask.reply = message
        ask.answered.set()
        return True


# -- helpers ----------------------------------------------------------------------------------


def is_request_id(value):
    """Whether ``value`` is a valid JSON-RPC request ID for MCP: a string or a finite number."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int))


def id_key(value):
    """A request ID as a key: ``1`` and ``"1"`` are different IDs."""
    return (type(value).__name__ == "str", value)


def to_json(value):
    """Compact JSON text, non-ASCII kept as is (the model reads it; escapes cost it tokens)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode(message):
    """A message as UTF-8 bytes; a lone surrogate (echoed from a client's escapes) escaped."""
    try:
        return to_json(message).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":"), allow_nan=False).encode("ascii")


def tool_result(structured):
    """A successful CallToolResult: the result as structuredContent and as JSON text."""
    return {"content": [{"type": "text", "text": to_json(structured)}],
            "structuredContent": structured}


def tool_error(error):
    """A CallToolResult with isError for a tool error.

    No structuredContent: clients validate it against the tool's outputSchema whenever it is
    present, even on errors (the TypeScript SDK does), and an error object does not match.
    """
    return {"content": [{"type": "text", "text": to_json({"error": error.to_dict()})}],
            "isError": True}


def client_supports_form_elicitation(capabilities):
    """Whether declared client capabilities include form-mode elicitation.

    ``elicitation: {}`` is form mode only, for backwards compatibility; otherwise form mode
    must be named (a client offering only ``url`` cannot show an approval form).
    """
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(elicitation, dict):
        return False
    return not elicitation or "form" in elicitation


def printable(text, limit):
    """An agent's text as a person may safely read it: controls, bidirectional overrides and
    line separators shown as escapes, cut to ``limit`` characters."""
    out = []
    for ch in text[:limit]:
        code = ord(ch)
        if ch in "\n\t":
            out.append(ch)
        elif code in _BIDI or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            out.append("\\u%04x" % code if code <= 0xFFFF else "\\U%08x" % code)
        else:
            out.append(ch)
    clipped = "".join(out)
    if len(text) > limit:
        clipped += "\n[... %d more characters]" % (len(text) - limit)
    return clipped


def _quoted(text, limit=QUESTION_TITLE_CHARS):
    return '"%s"' % printable(text, limit).replace("\n", "\\n")


def _bytes(n):
    return "{:,} byte{}".format(n, "" if n == 1 else "s")


def approval_request(preview, with_mode):
    """The ``elicitation/create`` params asking the person to approve one edit."""
    change = preview["new_bytes"] - preview["current_bytes"]
    lines = [
        "An agent wants to edit an article in knowledge base %s."
        % _quoted(preview["knowledge_base_id"]),
        "",
        "Article: %s (ID %s)" % (_quoted(preview["title"]), preview["article_id"]),
    ]
    if preview.get("new_title") not in (None, preview["title"]):
        lines.append("New title: %s" % _quoted(preview["new_title"]))
    lines += [
        "Content: %s now, %s after the edit (%+d bytes). The new content:"
        % (_bytes(preview["current_bytes"]), _bytes(preview["new_bytes"]), change),
        "",
        printable(preview["new_content"], QUESTION_CONTENT_CHARS),
        "",
        "Version the agent read: %s (the current one)." % preview["current_version"],
        "",
        "Accept to write this change; decline to refuse it. Every edit is asked about.",
    ]
    # A confirmation asks for no data: the accept or decline button is the answer.
    params = {"message": "\n".join(lines),
              "requestedSchema": {"type": "object", "properties": {}}}
    if with_mode:
        params = dict({"mode": "form"}, **params)
    return params


def not_approved(action, where):
    """The write_not_approved error for a person's answer other than accept."""
    if action == "decline":
        text, reason = "The person declined the edit.", "decline"
    elif action == "cancel":
        text, reason = "The person dismissed the question, so the edit was not made.", "cancel"
    else:
        text = ("The client answered the approval question with %s, which is not accept, "
                "decline or cancel, so the edit was not made." % kb_store.kb_core.shown(action))
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

    def issue(self, principal, tool, arguments):
        """A handle approving ``tool`` with ``arguments`` for ``principal``, expiring soon."""
        payload = to_json({"v": 1, "t": tool, "a": args_digest(arguments), "p": principal,
                           "exp": int(self.clock() + self.ttl_s),
                           "n": secrets.token_urlsafe(8)}).encode("utf-8")
        return "%s.%s" % (_b64(payload), _b64(self._mac(payload)))

    def check(self, state, principal, tool, arguments):
        """Raise RpcError(-32602) unless ``state`` is a good handle for exactly this call."""
        reason = self._fault(state, principal, tool, arguments)
        if reason:
            raise RpcError(INVALID_PARAMS, "Invalid or expired requestState: %s. Call the tool "
                           "again without requestState to be asked anew." % reason,
                           {"reason": "invalid_request_state"})

    def _fault(self, state, principal, tool, arguments):
        if not isinstance(state, str) or state.count(".") != 1 or len(state) > 4096:
            return "it is not a handle this server issued"
        payload_text, mac_text = state.split(".")
        try:
            payload, mac = _unb64(payload_text), _unb64(mac_text)
        except ValueError:
            return "it is not a handle this server issued"
        if not hmac.compare_digest(mac, self._mac(payload)):
            return "its signature does not match (altered, or from another secret)"
        fields = json.loads(payload.decode("utf-8"))
        if fields.get("exp", 0) < self.clock():
            return "it expired"
        if fields.get("p") != principal:
            return "it was issued to another caller"
        if fields.get("t") != tool or fields.get("a") != args_digest(arguments):
            return "it was issued for other arguments"
        return None


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text):
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(str(exc)) from None


# -- the store connections --------------------------------------------------------------------


class StorePool:
    """A bounded set of store connections; each request borrows one for its store calls."""

    def __init__(self, address, size):
        self.address = address
        self.size = size
        self._idle = queue.LifoQueue()
        self._made = 0
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)

    @contextlib.contextmanager
    def borrow(self):
        """A store for the caller alone until the block ends."""
        self._slots.acquire()
        try:
            try:
                store = self._idle.get_nowait()
            except queue.Empty:
                store = kb_store.KBStore(self.address)
            try:
                yield store
            finally:
                self._idle.put(store)
        finally:
            self._slots.release()

    def close(self):
        """Close every idle connection."""
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


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
    meta: Dict[str, Any] = field(default_factory=dict)


class Protocol:
    """Judges each message by its era and method, and runs tools for the caller it names."""

    def __init__(self, pool, signer):
        self.pool = pool
        self.signer = signer
        self.server_info = {"name": SERVER_NAME, "title": "Knowledge base",
                            "version": SERVER_VERSION}

    # -- routing ----------------------------------------------------------------------------------

    @staticmethod
    def modern_meta(params):
        """The 2026-07-28 ``_meta`` of a request's params, or None if it has none."""
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and META_VERSION in meta:
            return meta
        return None

    def era_of(self, method, params, session):
        """``"modern"``, ``"legacy"``, or raise: how to serve this request (versioning.mdx,
        "Backward Compatibility with Initialization-Based Versions")."""
        if method == "initialize":
            return "legacy"
        if self.modern_meta(params) is not None:
            return "modern"
        if session is not None and session.protocol_version is not None:
            return "legacy"
        if method == "ping":
            return "legacy"  # answered before initialize, as 2025-11-25 allows
        raise RpcError(INVALID_PARAMS, "Invalid params: this request carries no _meta "
                       "(%s, %s) and no initialized session: send initialize first "
                       "(2025-11-25), or put the protocol version and client capabilities in "
                       "params._meta (2026-07-28)" % (META_VERSION, META_CAPABILITIES))

    def handle(self, message, ctx):
        """The result of one request; raises RpcError for a JSON-RPC error, Cancelled if the
        client cancelled it."""
        method = message["method"]
        params = message.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: params must be an object")
        if self.era_of(method, params, ctx.session) == "modern":
            ctx.modern = True
            ctx.meta = self.check_meta(params["_meta"])
            handler = {"server/discover": self._discover, "tools/list": self._list_tools,
                       "tools/call": self._call_tool}.get(method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, "Method not found: %.200s (2026-07-28 serves "
                               "server/discover, tools/list and tools/call)" % method)
            result = handler(params, ctx)
            result.setdefault("resultType", "complete")
            result["_meta"] = {META_SERVER: self.server_info}
            return result
        handler = {"initialize": self._initialize, "ping": self._ping,
                   "tools/list": self._list_tools, "tools/call": self._call_tool}.get(method)
        if handler is None:
            # At once, for any method: a client probing falls back instead of timing out.
            raise RpcError(METHOD_NOT_FOUND, "Method not found: %.200s" % method)
        session = ctx.session
        if method not in ("initialize", "ping") and (session is None
                                                     or session.protocol_version is None):
            raise RpcError(INVALID_REQUEST, "Invalid Request: the session is not initialized; "
                           "send initialize first")
        return handler(params, ctx)

    @staticmethod
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

    # -- methods -------------------------------------------------------------------------------

    def _initialize(self, params, ctx):
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
        log.info("session %s: client %s %s, protocol %s (asked %s), form elicitation %s, "
                 "caller %s, writes %s", session.id or "stdio", client.get("name", "?"),
                 client.get("version", "?"), version, requested,
                 "yes" if client_supports_form_elicitation(session.client_capabilities) else "no",
                 session.principal.name, session.principal.writes)
        return {"protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": self.server_info, "instructions": INSTRUCTIONS}

    @staticmethod
    def _ping(params, ctx):
        return {}

    def _discover(self, params, ctx):
        """server/discover (2026-07-28, server/discover.mdx)."""
        return {"supportedVersions": list(SUPPORTED_VERSIONS),
                "capabilities": {"tools": {"listChanged": False}},
                "instructions": INSTRUCTIONS, "ttlMs": LIST_TTL_MS, "cacheScope": "public"}

    @staticmethod
    def tools_for(principal):
        """The tools a caller sees: the edit tool only where its writes are not denied."""
        return [t for t in kb_store.TOOLS
                if not (principal.writes == "deny" and t["name"] == EDIT_TOOL)]

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
        names = [t["name"] for t in self.tools_for(ctx.principal)]
        if name not in names:
            hint = (" (edits are denied to this caller: the server was started with --writes "
                    "deny, or its token made with --writes deny)") if name == EDIT_TOOL else ""
            raise RpcError(INVALID_PARAMS, "Unknown tool: %.200s%s" % (name, hint),
                           {"tools": sorted(names)})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        try:
            if name == EDIT_TOOL and ctx.principal.writes == "ask":
                return self._edit_with_approval(name, arguments, params, ctx)
            return tool_result(self._run(name, arguments, ctx))
        except kb_store.ToolError as err:
            # Reported to the model as a result with isError, never as a JSON-RPC error: the
            # spec wants errors that arise in the tool where the model can see and act on them.
            # The store turns every failure of a call (its database's included) into one.
            log.info("%s: %s: %s", name, err.code, err.message)
            return tool_error(err)

    def _run(self, name, arguments, ctx):
        call = ctx.call
        with self.pool.borrow() as store:
            store.clear_interrupt()
            call.interrupt = store.interrupt
            try:
                if call.cancelled.is_set():
                    raise Cancelled()
                return store.call_tool(name, arguments, granted=ctx.principal.grants)
            finally:
                call.interrupt = None

    def _preview(self, arguments, ctx):
        with self.pool.borrow() as store:
            return store.preview_edit(arguments, granted=ctx.principal.grants)

    def _edit_with_approval(self, name, arguments, params, ctx):
        """The edit under ``ask``: checks and replays first, then the person, then the write."""
        if ctx.modern and "requestState" in params:
            return self._finish_approval(name, arguments, params, ctx)
        # Validation, the version check and replay detection all happen before asking:
        # nobody is asked about an edit that would fail, or one already made.
        preview = self._preview(arguments, ctx)
        if preview["replay"]:
            log.info("%s: replay of an edit already made; not asking again", name)
            return tool_result(preview["result"])
        where = {"knowledge_base_id": preview["knowledge_base_id"],
                 "article_id": preview["article_id"]}
        if ctx.modern:
            if not client_supports_form_elicitation(ctx.meta.get(META_CAPABILITIES)):
                raise RpcError(MISSING_CAPABILITY, "Server requires the elicitation capability "
                               "(form mode) for this request: this caller's edits need a "
                               "person's approval", {"requiredCapabilities": {
                                   "elicitation": {"form": {}}}})
            return self._input_required(preview, name, arguments, ctx)
        self._ask_in_session(preview, where, ctx)
        return tool_result(self._run(name, arguments, ctx))

    def _finish_approval(self, name, arguments, params, ctx):
        """A 2026-07-28 retry carrying the person's answer and the handle it was asked with."""
        self.signer.check(params["requestState"], ctx.principal.name, name, arguments)
        responses = params.get("inputResponses")
        answer = responses.get(APPROVAL_KEY) if isinstance(responses, dict) else None
        if not isinstance(answer, dict):
            # The answer is missing: ask again rather than fail (mrtr.mdx, "Error Handling").
            preview = self._preview(arguments, ctx)
            if preview["replay"]:
                return tool_result(preview["result"])
            return self._input_required(preview, name, arguments, ctx)
        action = answer.get("action")
        if action != "accept":
            return tool_error(not_approved(action, {
                "knowledge_base_id": arguments.get("knowledge_base_id"),
                "article_id": arguments.get("article_id")}))
        log.info("edit of %s/%s approved (signed handle)", arguments.get("knowledge_base_id"),
                 arguments.get("article_id"))
        return tool_result(self._run(name, arguments, ctx))

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
        why_not = None
        if session.protocol_version < ELICITATION_SINCE:
            why_not = ("this client speaks MCP %s, which has no elicitation"
                       % session.protocol_version)
        elif not client_supports_form_elicitation(session.client_capabilities):
            why_not = "this client did not declare the elicitation capability (form mode)"
        elif not session.initialized:
            why_not = "the client has not sent notifications/initialized yet"
        if why_not:
            raise WriteNotApproved(
                "Edits need a person's approval: this caller's writes are set to ask (--writes "
                "ask, or a token made with it), and the server asks through MCP elicitation "
                "(form mode), but %s. Nothing was written. "
                "To let this agent edit without asking, give it --writes allow (or a token "
                "made with --writes allow); to refuse all edits, --writes deny." % why_not,
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


# -- one message in, what to do with it -------------------------------------------------------


def classify(message):
    """``("request" | "notification" | "response", error or None)`` of a decoded message."""
    if isinstance(message, list):
        # MCP dropped JSON-RPC batches in 2025-06-18: one message at a time.
        return None, RpcError(INVALID_REQUEST, "Invalid Request: batches are not supported; "
                              "send one message at a time")
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None, RpcError(INVALID_REQUEST, 'Invalid Request: not a JSON-RPC 2.0 message '
                              '("jsonrpc": "2.0")')
    if "method" in message:
        if not isinstance(message["method"], str):
            return None, RpcError(INVALID_REQUEST, "Invalid Request: method must be a string")
        if "id" not in message:
            return "notification", None
        if not is_request_id(message["id"]):
            return None, RpcError(INVALID_REQUEST, "Invalid Request: id must be a string or a "
                                  "number")
        return "request", None
    if "id" in message and ("result" in message or "error" in message):
        return "response", None
    return None, RpcError(INVALID_REQUEST, "Invalid Request: neither a request, a notification "
                          "nor a response")


def id_if_any(message):
    """The request ID of a message, where it has a valid one (for error responses)."""
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if is_request_id(request_id) else None


def error_response(request_id, error):
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()}


def result_response(request_id, result):
    """A JSON-RPC result response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def answer(protocol, message, ctx):
    """The response to one request (or None if it was cancelled); never raises."""
    request_id = message["id"]
    try:
        return result_response(request_id, protocol.handle(message, ctx))
    except Cancelled:
        return None
    except RpcError as exc:
        return error_response(request_id, exc)
    except Exception:  # a bug: the client hears -32603, the log has the traceback
        log.exception("%s failed", message.get("method"))
        return error_response(request_id, RpcError(INTERNAL_ERROR, "Internal error"))


# -- stdio ------------------------------------------------------------------------------------


class StdioTransport:
    """One client on stdin and stdout: requests run on worker threads, answers as they finish."""

    def __init__(self, protocol, principal, out, workers=WORKERS):
        self.protocol = protocol
        self.session = Session(principal)
        self.out = out
        self.workers = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kb-call")
        self._write_lock = threading.Lock()
        self._closed = False

    def send(self, message):
        """Write one message line to stdout, whole; never raises."""
        if self._closed:
            return
        data = encode(message)
        with self._write_lock:
            try:
                self.out.write(data + b"\n")
                self.out.flush()
            except (OSError, ValueError) as exc:
                log.info("output closed (%s); the client is gone", exc)
                self._closed = True

    def serve(self, stream):
        """Answer messages read line by line from ``stream`` until EOF; returns the exit code."""
        for raw in iter(stream.readline, b""):
            self.handle_line(raw)
            if self._closed:
                break
        # Calls under way finish and are answered; questions can no longer be answered.
        with self.session.lock:
            asks = list(self.session.asks.values())
        if asks:
            log.info("input closed with %d edit(s) awaiting approval; nothing written for them",
                     len(asks))
        for ask in asks:
            ask.answered.set()
        self.workers.shutdown(wait=True)
        return 0

    def handle_line(self, raw):
        """Handle one line of input (bytes); never raises."""
        if not raw.strip():
            return
        try:
            message = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            # RecursionError: JSON nested deeper than the decoder goes is unparsable too.
            self.send(error_response(None, RpcError(PARSE_ERROR, "Parse error: %s" % exc)))
            return
        kind, error = classify(message)
        if error is not None:
            self.send(error_response(id_if_any(message), error))
        elif kind == "response":
            self._on_response(message)
        elif kind == "notification":
            self._on_notification(message)
        else:
            self._on_request(message)

    def _on_request(self, message):
        key = id_key(message["id"])
        session = self.session
        with session.lock:
            if key in session.calls:
                duplicate = True
            else:
                duplicate = False
                call = session.calls[key] = Call(message["id"])
        if duplicate:
            self.send(error_response(message["id"], RpcError(
                INVALID_REQUEST, "Invalid Request: request id %s is already in use by a request "
                "in flight; use a new id" % to_json(message["id"]))))
            return
        ctx = Context(principal=session.principal, call=call, session=session,
                      ask=lambda params: self._ask(call, params))
        if message["method"] == "tools/call":
            self.workers.submit(self._work, message, ctx, key)
        else:
            # Everything else touches no store and never waits: answered at once, in order,
            # whatever the workers are waiting for.
            self._work(message, ctx, key)

    def _work(self, message, ctx, key):
        response = answer(self.protocol, message, ctx)
        with self.session.lock:
            self.session.calls.pop(key, None)
        if response is not None and not ctx.call.cancelled.is_set():
            self.send(response)

    def _ask(self, call, params):
        """Put a question to the client; the reply, None on timeout; Cancelled if cancelled."""
        ask_id, reply = self.session.ask(call, params, self.send)
        if call.cancelled.is_set():
            # Our question is moot now: tell the client so it can close the dialog.
            self.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": ask_id,
                                  "reason": "the tool call it asked about was cancelled"}})
            raise Cancelled()
        return reply

    def _on_response(self, message):
        if not self.session.deliver(message):
            # A late answer to a question whose call was cancelled, or noise.
            log.info("ignored a response to unknown request %.80r", message.get("id"))

    def _on_notification(self, message):
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            log.info("ignored %s with params that are not an object", message["method"])
            return
        params = params or {}
        if message["method"] == "notifications/initialized":
            self.session.initialized = True
        elif message["method"] == "notifications/cancelled":
            cancel(self.session, params)
        else:
            log.debug("ignored notification %s", message["method"])


def cancel(session, params):
    """Mark a request cancelled (notifications/cancelled); a question it waits on ends."""
    target = params.get("requestId")
    if not is_request_id(target):
        return
    with session.lock:
        call = session.calls.get(id_key(target))
        asks = [a for a in session.asks.values() if a.call is call]
    if call is None:
        # Everything else has finished: nothing left to stop.
        log.debug("ignored cancellation of %.80r: not in progress", target)
        return
    call.cancel()
    log.info("request %r cancelled by the client (%s); no response will be sent", target,
             params.get("reason", "no reason given"))
    for ask in asks:
        ask.answered.set()


# -- Streamable HTTP --------------------------------------------------------------------------


# The names a loopback server answers to: its own Host header and Origin, whichever is used.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


class HttpRejected(Exception):
    """An HTTP request refused before the protocol saw it: a status, headers, a JSON body."""

    def __init__(self, status, body=None, headers=None):
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


class HttpServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """A thread per connection, at most ``max_connections`` at once."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, transport):
        self.transport = transport
        self._slots = threading.BoundedSemaphore(transport.max_connections)
        self.request_queue_size = max(LISTEN_BACKLOG, transport.max_connections)
        http.server.HTTPServer.__init__(self, address, HttpHandler)

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            # Full: say so at once rather than queue a client behind a slow one.
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                b"Retry-After: 1\r\nConnection: close\r\n\r\n")
            self.shutdown_request(request)
            return
        socketserver.ThreadingMixIn.process_request(self, request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            socketserver.ThreadingMixIn.process_request_thread(self, request, client_address)
        finally:
            self._slots.release()


class HttpTransport:
    """Streamable HTTP on one endpoint (``/mcp``): both eras, tokens, the HTTP safeguards."""

    def __init__(self, protocol, address, host, port, *, allowed_origins=(), max_body=MAX_BODY,
                 request_timeout=REQUEST_TIMEOUT_S, idle_timeout=IDLE_TIMEOUT_S,
                 max_connections=MAX_CONNECTIONS, authorization_server=None):
        self.protocol = protocol
        # Token checks have connections of their own: a request is authenticated even while
        # every tool connection waits (on a lock, say), and reads never wait for writers.
        self.auth_pool = StorePool(address, 2)
        self.max_body = max_body
        self.request_timeout = request_timeout
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self.authorization_server = authorization_server
        self.sessions = {}
        self.sessions_lock = threading.Lock()
        self.server = HttpServer((host, port), self)
        self.port = self.server.server_address[1]
        self.loopback = _is_loopback(host)
        self.allowed_hosts = {"%s:%d" % (name, self.port) for name in
                              LOOPBACK_NAMES} if self.loopback else None
        self.allowed_origins = set(allowed_origins) | {
            "http://%s:%d" % (name, self.port) for name in LOOPBACK_NAMES}

    def serve_forever(self):
        """Serve until interrupted."""
        self.server.serve_forever(poll_interval=0.2)

    def close(self):
        """Stop serving, close the socket and the token connections."""
        self.server.shutdown()
        self.server.server_close()
        self.auth_pool.close()

    # -- the checks every request passes ---------------------------------------------------------

    def check_origin_and_host(self, headers):
        """DNS rebinding: a page's Origin must be ours; on loopback, the Host must be too
        (transports, "Security Warning": validate Origin, bind to localhost)."""
        origin = headers.get("Origin")
        if origin is not None and origin not in self.allowed_origins:
            raise HttpRejected(403, error_response(None, RpcError(
                INVALID_REQUEST, "Forbidden: Origin %.100s is not allowed (kb-server "
                "--allow-origin adds one)" % origin)))
        if self.allowed_hosts is not None and headers.get("Host") not in self.allowed_hosts:
            raise HttpRejected(421, error_response(None, RpcError(
                INVALID_REQUEST, "Misdirected Request: Host %.100s is not this server's "
                "loopback address" % headers.get("Host"))))

    def authenticate(self, headers):
        """The caller a bearer token names; 401 with WWW-Authenticate: Bearer otherwise."""
        value = headers.get("Authorization") or ""
        scheme, _, token = value.partition(" ")
        challenge = 'Bearer realm="kb-server"'
        if self.authorization_server:
            challenge += ', resource_metadata="%s"' % self.metadata_url(headers)
        if scheme.lower() != "bearer" or not token.strip():
            raise HttpRejected(401, error_response(None, RpcError(
                INVALID_REQUEST, "Unauthorized: send Authorization: Bearer TOKEN (kb token "
                "create makes one)")), {"WWW-Authenticate": challenge})
        with self.auth_pool.borrow() as store:
            found = store.token_principal(token.strip())
        if found is None:
            raise HttpRejected(401, error_response(None, RpcError(
                INVALID_REQUEST, "Unauthorized: the token is not valid (unknown or revoked)")),
                {"WWW-Authenticate": challenge + ', error="invalid_token"'})
        return Principal(found["name"], frozenset(found["grants"]), found["writes"])

    def metadata_url(self, headers):
        """Where this server's OAuth protected-resource metadata is (RFC 9728)."""
        return "http://%s/.well-known/oauth-protected-resource%s" % (
            headers.get("Host", "127.0.0.1:%d" % self.port), MCP_PATH)

    def metadata(self, headers):
        """The RFC 9728 document naming the authorization server that issues our tokens."""
        return {"resource": "http://%s%s" % (headers.get("Host"), MCP_PATH),
                "authorization_servers": [self.authorization_server],
                "bearer_methods_supported": ["header"], "resource_name": SERVER_NAME}

    # -- sessions (2025-11-25 and earlier) -------------------------------------------------------

    def new_session(self, principal):
        """A session for an initialize, under a fresh, unguessable ID."""
        session = Session(principal, secrets.token_urlsafe(24))
        with self.sessions_lock:
            self.sessions[session.id] = session
        return session

    def session_for(self, session_id, principal):
        """The live session with this ID, held by this caller; 404 otherwise."""
        with self.sessions_lock:
            session = self.sessions.get(session_id)
        # Another caller's session looks exactly like none: sessions are not authentication.
        if session is None or session.closed or session.principal.name != principal.name:
            raise HttpRejected(404, error_response(None, RpcError(
                INVALID_REQUEST, "Session not found: it ended, or never was; send initialize "
                "for a new one")))
        return session

    def end_session(self, session):
        """DELETE: the session ends; questions it waits on end unanswered."""
        with self.sessions_lock:
            self.sessions.pop(session.id, None)
        session.closed = True
        with session.lock:
            for call in session.calls.values():
                call.cancel()
            for ask in session.asks.values():
                ask.answered.set()


def _is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def decode_name_header(value):
    """An ``Mcp-Name`` header's value, the ``=?base64?...?=`` sentinel form decoded."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
    return value


class HttpHandler(http.server.BaseHTTPRequestHandler):
    """One connection's requests; the transport's rules, the protocol's answers."""

    protocol_version = "HTTP/1.1"
    server_version = "%s/%s" % (SERVER_NAME, SERVER_VERSION)
    # Headers and body leave in two writes; with Nagle's algorithm the body waits for the
    # client's delayed ACK of the headers, 40 ms on Linux, on every response.
    disable_nagle_algorithm = True

    def setup(self):
        self.transport = self.server.transport
        self.timeout = self.transport.idle_timeout
        http.server.BaseHTTPRequestHandler.setup(self)

    def handle_one_request(self):
        # A request must arrive whole within the request timeout: a client that trickles
        # its headers or body is cut off, whatever the socket's idle timeout allows.
        self._read_done = False
        watchdog = threading.Timer(self.transport.request_timeout, self._too_slow)
        watchdog.daemon = True
        watchdog.start()
        self._watchdog = watchdog
        try:
            http.server.BaseHTTPRequestHandler.handle_one_request(self)
        finally:
            watchdog.cancel()

    def _too_slow(self):
        if not self._read_done:
            log.info("closed a connection from %s: no whole request in %g s",
                     self.client_address[0], self.transport.request_timeout)
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        log.debug("%s %s", self.client_address[0], format % args)

    # -- replies -----------------------------------------------------------------------------

    def reply(self, status, body=None, headers=None):
        """A whole response: JSON when there is a body (errors too: clients read them)."""
        data = encode(body) if body is not None else b""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def reject(self, exc):
        """Answer an HttpRejected; a refused request ends its connection."""
        self.close_connection = True
        headers = dict(exc.headers, Connection="close")
        self.reply(exc.status, exc.body, headers)

    # -- methods -----------------------------------------------------------------------------

    def do_GET(self):
        """No server-to-client stream: 405 (the metadata document excepted)."""
        self._read_done = True
        try:
            self.transport.check_origin_and_host(self.headers)
        except HttpRejected as exc:
            return self.reject(exc)
        if self.path.startswith("/.well-known/oauth-protected-resource") and \
                self.transport.authorization_server:
            return self.reply(200, self.transport.metadata(self.headers))
        if self.path.split("?")[0] != MCP_PATH:
            return self.reply(404, error_response(None, RpcError(
                INVALID_REQUEST, "Not found: the MCP endpoint is %s" % MCP_PATH)))
        self.reply(405, error_response(None, RpcError(
            INVALID_REQUEST, "Method not allowed: this server opens no stream on GET; POST "
            "requests to %s" % MCP_PATH)), {"Allow": "POST, DELETE"})

    def do_PUT(self):
        """Not an MCP method."""
        self._read_done = True
        self.close_connection = True
        self.reply(405, error_response(None, RpcError(INVALID_REQUEST, "Method not allowed")),
                   {"Allow": "POST, DELETE", "Connection": "close"})

    do_PATCH = do_PUT

    def do_DELETE(self):
        """End a handshake session (transports, "Session Management")."""
        self._read_done = True
        transport = self.transport
        try:
            transport.check_origin_and_host(self.headers)
            principal = transport.authenticate(self.headers)
            session_id = self.headers.get("Mcp-Session-Id")
            if session_id is None:
                raise HttpRejected(405, error_response(None, RpcError(
                    INVALID_REQUEST, "Method not allowed: DELETE ends a session; this request "
                    "names none")), {"Allow": "POST, DELETE"})
            session = transport.session_for(session_id, principal)
        except HttpRejected as exc:
            return self.reject(exc)
        transport.end_session(session)
        log.info("session %s ended by its client", session.id)
        self.reply(204)

    def do_POST(self):
        """One JSON-RPC message in, its answer out."""
        transport = self.transport
        try:
            if self.path.split("?")[0] != MCP_PATH:
                raise HttpRejected(404, error_response(None, RpcError(
                    INVALID_REQUEST, "Not found: the MCP endpoint is %s" % MCP_PATH)))
            transport.check_origin_and_host(self.headers)
            principal = transport.authenticate(self.headers)
            message = self.read_message()
        except HttpRejected as exc:
            self._read_done = True
            return self.reject(exc)
        kind, error = classify(message)
        if error is not None:
            return self.reply(400, error_response(id_if_any(message), error))
        try:
            if kind == "request":
                self.on_request(message, principal)
            elif kind == "notification":
                self.on_notification(message, principal)
            else:
                self.on_response(message, principal)
        except HttpRejected as exc:
            self.reject(exc)

    def read_message(self):
        """The body as one decoded JSON value: size-capped, in time, or an HttpRejected."""
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise HttpRejected(415, error_response(None, RpcError(
                INVALID_REQUEST, "Unsupported Media Type: send Content-Type: application/json")))
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise HttpRejected(411, error_response(None, RpcError(
                INVALID_REQUEST, "Length Required: send Content-Length")))
        if int(length) > self.transport.max_body:
            raise HttpRejected(413, error_response(None, RpcError(
                INVALID_REQUEST, "Payload Too Large: at most %d bytes a request"
                % self.transport.max_body)))
        try:
            raw = self.rfile.read(int(length))
        except OSError:
            raw = b""
        self._read_done = True
        if len(raw) != int(length):
            raise HttpRejected(400, error_response(None, RpcError(
                PARSE_ERROR, "Parse error: the body ended early")))
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise HttpRejected(400, error_response(None, RpcError(
                PARSE_ERROR, "Parse error: %s" % exc))) from None

    def on_notification(self, message, principal):
        """202 for any notification; a handshake session's are acted on."""
        session_id = self.headers.get("Mcp-Session-Id")
        if session_id is not None:
            session = self.transport.session_for(session_id, principal)
            params = message.get("params") if isinstance(message.get("params"), dict) else {}
            if message["method"] == "notifications/initialized":
                session.initialized = True
            elif message["method"] == "notifications/cancelled":
                cancel(session, params)
        self.reply(202)

    def on_response(self, message, principal):
        """A client's answer to our question (elicitation/create): 202."""
        session_id = self.headers.get("Mcp-Session-Id")
        if session_id is None:
            raise HttpRejected(400, error_response(None, RpcError(
                INVALID_REQUEST, "Invalid Request: a response belongs to a session; this POST "
                "names none")))
        self.transport.session_for(session_id, principal).deliver(message)
        self.reply(202)

    def on_request(self, message, principal):
        """Route a request to its era's checks, then answer it (JSON, or a stream that asks)."""
        transport, protocol = self.transport, self.transport.protocol
        method, params = message["method"], message.get("params")
        session = None
        headers = {}
        if method == "initialize":
            session = transport.new_session(principal)
            headers["Mcp-Session-Id"] = session.id
        elif self.headers.get("Mcp-Session-Id") is not None and \
                protocol.modern_meta(params) is None:
            session = transport.session_for(self.headers.get("Mcp-Session-Id"), principal)
            version = self.headers.get("MCP-Protocol-Version")
            if version is not None and version != session.protocol_version:
                raise HttpRejected(400, error_response(message["id"], RpcError(
                    INVALID_REQUEST, "Bad Request: MCP-Protocol-Version %.40s is not this "
                    "session's %s" % (version, session.protocol_version))))
        else:
            self.check_routing_headers(message)
        call = Call(message["id"])
        key = id_key(message["id"])
        if session is not None:
            with session.lock:
                if key in session.calls:
                    return self.reply(400, error_response(message["id"], RpcError(
                        INVALID_REQUEST, "Invalid Request: request id %s is already in use in "
                        "this session; use a new id" % to_json(message["id"]))))
                session.calls[key] = call
        stream = Stream(self, headers)
        ctx = Context(principal=principal, call=call, session=session,
                      ask=lambda params: stream.ask(session, call, params))
        try:
            response = answer(protocol, message, ctx)
        finally:
            if session is not None:
                with session.lock:
                    session.calls.pop(key, None)
        if response is None:  # cancelled: no response for it
            return stream.end()
        if method == "initialize" and "error" in response:
            transport.end_session(session)
            headers.pop("Mcp-Session-Id", None)
        status = 200
        if "error" in response and session is None:
            status = ERROR_STATUS.get(response["error"]["code"], 200)
        stream.finish(status, response)

    def check_routing_headers(self, message):
        """2026-07-28: MCP-Protocol-Version, Mcp-Method and Mcp-Name must match the body
        (transports/streamable-http.mdx, "Server Validation")."""
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        meta = self.transport.protocol.modern_meta(params)
        if meta is None:
            return  # the protocol answers it: no _meta and no session is -32602 (400)
        problems = []
        version = self.headers.get("MCP-Protocol-Version")
        if version is None:
            problems.append("the MCP-Protocol-Version header is missing")
        elif version != meta.get(META_VERSION):
            problems.append("MCP-Protocol-Version %.40s is not the body's %.40s"
                            % (version, meta.get(META_VERSION)))
        method_header = self.headers.get("Mcp-Method")
        if method_header is None:
            problems.append("the Mcp-Method header is missing")
        elif method_header != message["method"]:
            problems.append("Mcp-Method %.60s is not the body's %.60s"
                            % (method_header, message["method"]))
        if message["method"] in ("tools/call", "resources/read", "prompts/get"):
            name = self.headers.get("Mcp-Name")
            body_name = params.get("name", params.get("uri"))
            if name is None:
                problems.append("the Mcp-Name header is missing")
            elif decode_name_header(name) != body_name:
                problems.append("Mcp-Name %.60s is not the body's %.60s" % (name, body_name))
        if problems:
            raise HttpRejected(400, error_response(message["id"], RpcError(
                HEADER_MISMATCH, "Header mismatch: %s" % "; ".join(problems))))


class Stream:
    """An HTTP answer that is one JSON body, unless the server must ask the client something
    first (2025-11-25 elicitation): then an event stream carrying the question, then the
    answer (transports, "Sending Messages to the Server", item 6)."""

    def __init__(self, handler, headers):
        self.handler = handler
        self.headers = headers
        self.streaming = False

    def _event(self, message):
        self.handler.wfile.write(b"event: message\r\ndata: " + encode(message) + b"\r\n\r\n")
        self.handler.wfile.flush()

    def ask(self, session, call, params):
        """Send elicitation/create on the stream; wait for the answer POSTed on the session."""
        if session is None:
            raise Cancelled()
        if not self.streaming:
            handler = self.handler
            handler.send_response(200)
            for name, value in self.headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Cache-Control", "no-store")
            handler.send_header("X-Accel-Buffering", "no")
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.close_connection = True
            self.streaming = True
        def send(message):
            try:
                self._event(message)
            except OSError:
                call.cancelled.set()

        _, reply = session.ask(call, params, send)
        if call.cancelled.is_set():
            raise Cancelled()
        return reply

    def finish(self, status, response):
        """Send the answer: the last event of the stream, or a whole JSON response."""
        if self.streaming:
            with contextlib.suppress(OSError):
                self._event(response)
        else:
            self.handler.reply(status, response, self.headers)

    def end(self):
        """No answer (cancelled): close the stream, or say 202 to an un-streamed POST."""
        if not self.streaming:
            self.handler.reply(202)


# -- the command line -------------------------------------------------------------------------


def build_parser():
    """The command line: a store, the transport, and who may do what."""
    parser = argparse.ArgumentParser(
        prog="kb-server",
        description="MCP server for a knowledge-base store: stdio (one client, --grant) or "
                    "Streamable HTTP (--http, bearer tokens from kb token create).",
    )
    parser.add_argument("--db", metavar="PATH", default=os.environ.get("KB_DB") or None,
                        required=not os.environ.get("KB_DB"),
                        help="an existing store, made by: kb init --db PATH KB; a file or a "
                             "postgresql:// URL (default: $KB_DB)")
    parser.add_argument("--grant", action="append", metavar="KB",
                        help="stdio: a knowledge base the agent may use; repeat for several "
                             "(over HTTP, each token carries its own grants)")
    parser.add_argument("--writes", choices=WRITE_MODES, default="ask",
                        help="stdio: ask: a person approves every edit through the client "
                             "(default); allow: edit without asking; deny: read only (over "
                             "HTTP, each token carries its own)")
    parser.add_argument("--http", metavar="HOST:PORT",
                        help="serve Streamable HTTP on http://HOST:PORT/mcp instead of stdio; "
                             "bind to 127.0.0.1 unless other machines must reach it")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="HTTP: a browser Origin allowed besides the server's own loopback "
                             "addresses (repeat for several)")
    parser.add_argument("--max-body", type=int, default=MAX_BODY, metavar="BYTES",
                        help="HTTP: the largest request body (default %d)" % MAX_BODY)
    parser.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS, metavar="N",
                        help="HTTP: connections served at once; more get 503 (default %d)"
                             % MAX_CONNECTIONS)
    parser.add_argument("--request-timeout", type=float, default=REQUEST_TIMEOUT_S,
                        metavar="S", help="HTTP: a request must arrive whole within S seconds "
                                          "(default %g)" % REQUEST_TIMEOUT_S)
    parser.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT_S, metavar="S",
                        help="HTTP: an idle connection is closed after S seconds (default %g)"
                             % IDLE_TIMEOUT_S)
    parser.add_argument("--workers", type=int, default=WORKERS, metavar="N",
                        help="requests run at once, each on its own store connection "
                             "(default %d)" % WORKERS)
    parser.add_argument("--signing-secret-file", metavar="FILE",
                        help="the secret that signs 2026-07-28 approval handles (default: "
                             "$KB_SIGNING_SECRET, else a random one for this process); servers "
                             "that share a database and this secret can finish each other's "
                             "approvals")
    parser.add_argument("--approval-ttl", type=int, default=APPROVAL_TTL_S, metavar="S",
                        help="how long a 2026-07-28 approval handle is good (default %d s)"
                             % APPROVAL_TTL_S)
    parser.add_argument("--authorization-server", metavar="URL",
                        help="HTTP: the OAuth 2.1 authorization server (a gateway) that issues "
                             "this server's tokens; published as RFC 9728 metadata and in 401 "
                             "challenges")
    return parser


def check_args(parser, args):
    """Refuse a command line that cannot work, naming the argument."""
    for name in ("max_body", "max_connections", "workers", "approval_ttl"):
        if getattr(args, name) < 1:
            parser.error("argument --%s: must be at least 1" % name.replace("_", "-"))
    for name in ("request_timeout", "idle_timeout"):
        if getattr(args, name) <= 0:
            parser.error("argument --%s: must be positive" % name.replace("_", "-"))
    if args.http:
        if args.grant:
            parser.error("argument --grant: over HTTP each token carries its grants (kb token "
                         "create NAME --grant KB); drop --grant")
        host, _, port = args.http.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            parser.error("argument --http: expected HOST:PORT such as 127.0.0.1:8765, got %r"
                         % args.http)
        args.host, args.port = host.strip("[]"), int(port)
    elif not args.grant:
        parser.error("argument --grant: required for stdio (the knowledge bases the agent may "
                     "use)")
    for kb_id in args.grant or ():
        if not kb_id:
            parser.error("argument --grant: a knowledge-base ID must not be empty")


def open_store(args):
    """The store named by ``--db``, checked against ``--grant``; exits with one line if not
    (the usage would say nothing about a store)."""
    try:
        # Never create=True: a server opens a store that init made, and leaves any other file
        # exactly as it found it.
        store = kb_store.KBStore(args.db)
    except kb_store.ToolError as exc:
        sys.exit("kb-server: error: argument --db: %s" % exc.message)
    try:
        missing = [kb_id for kb_id in args.grant or () if not store.knowledge_base_exists(kb_id)]
    except kb_store.ToolError as exc:
        store.close()
        sys.exit("kb-server: error: argument --db: %s" % exc.message)
    if missing:
        store.close()
        sys.exit("kb-server: error: argument --grant: no knowledge base %s in %s"
                 % (", ".join(repr(kb_id) for kb_id in missing), args.db))
    return store


def signing_secret(parser, args):
    """The approval handles' secret: a file, $KB_SIGNING_SECRET, or random for this process."""
    if args.signing_secret_file:
        try:
            with open(args.signing_secret_file, "rb") as fh:
                secret = fh.read().strip()
        except OSError as exc:
            parser.error("argument --signing-secret-file: cannot read %s: %s"
                         % (args.signing_secret_file, exc.strerror))
        if len(secret) < 16:
            parser.error("argument --signing-secret-file: at least 16 bytes of secret, got %d"
                         % len(secret))
        return secret
    if os.environ.get("KB_SIGNING_SECRET"):
        return os.environ["KB_SIGNING_SECRET"].encode("utf-8")
    log.info("no signing secret given: 2026-07-28 approvals can be finished by this process "
             "only (set KB_SIGNING_SECRET on every server that shares the database)")
    return secrets.token_bytes(32)


def claim_stdout():
    """A private binary handle on the real stdout; stray writes to stdout go to stderr instead.

    At the descriptor level too, so a C extension or a child process that writes to fd 1
    cannot corrupt the protocol stream.
    """
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, io.UnsupportedOperation):
        out = sys.stdout.buffer
    else:
        out = os.fdopen(os.dup(fd), "wb")
        os.dup2(sys.stderr.fileno(), fd)
    sys.stdout = sys.stderr
    return out


def main(argv=None):
    """Run the server: stdio until stdin closes, or HTTP until interrupted."""
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="kb_server: %(levelname)s: %(message)s")
    open_store(args).close()
    signer = ApprovalSigner(signing_secret(parser, args), args.approval_ttl)
    pool = StorePool(args.db, args.workers)
    protocol = Protocol(pool, signer)
    try:
        if args.http:
            try:
                transport = HttpTransport(
                    protocol, args.db, args.host, args.port, allowed_origins=args.allow_origin,
                    max_body=args.max_body, request_timeout=args.request_timeout,
                    idle_timeout=args.idle_timeout, max_connections=args.max_connections,
                    authorization_server=args.authorization_server)
            except OSError as exc:
                parser.error("argument --http: cannot listen on %s: %s" % (args.http,
                                                                           exc.strerror))
            if not transport.loopback:
                log.warning("listening on %s, beyond this machine: every request needs a "
                            "token, and a TLS gateway in front is recommended", args.host)
            # The port on a line of its own, for a caller that asked for port 0.
            print("kb-server: serving http://%s:%d%s" % (args.host, transport.port, MCP_PATH),
                  file=sys.stderr, flush=True)
            try:
                transport.serve_forever()
            except KeyboardInterrupt:
                return 130
            finally:
                transport.server.server_close()
                transport.auth_pool.close()
            return 0
        grants = list(dict.fromkeys(args.grant))
        out = claim_stdout()
        log.info("serving %s for %s, writes %s", args.db, ", ".join(grants), args.writes)
        stdio = StdioTransport(protocol, Principal("stdio", frozenset(grants), args.writes),
                               out, args.workers)
        try:
            return stdio.serve(sys.stdin.buffer)
        except KeyboardInterrupt:
            return 130
        finally:
            with contextlib.suppress(OSError):
                out.close()
    finally:
        pool.close()


if __name__ == "__main__":
    sys.exit(main())
