"""Each message judged once, with no I/O: a decoded JSON-RPC message (and, over HTTP, its
request's headers) in, one ``MessageRoute`` out, which every later step reads instead of
looking again.

A route says what the message is (a request, a notification, a response), its method, its
era (2026-07-28 when the request's own ``_meta`` names a protocol version, "each request is
self-contained"; the handshake era otherwise), the tool a ``tools/call`` names, whether it may
wait long (a tool that writes: a lock, a person), whether it needs a store connection, and
whether it opens a session (a handshake ``initialize``). Here too: the 2026-07-28 routing
headers checked against the body (transports/streamable-http.mdx, "Server Validation"), the
``Mcp-Name`` value codec, and the one table from error code to HTTP status.
"""

import base64

from .. import __version__
from ..tools import TOOLS
from .jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_VERSION,
    RpcError,
    classify,
)

SERVER_NAME = "kb-server"
SERVER_VERSION = __version__

# Protocol revisions. Handshake (legacy) versions, newest first: a client asking initialize for
# a version we do not speak is answered with the first. The modern one is per request.
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MODERN_VERSIONS = ("2026-07-28",)
SUPPORTED_VERSIONS = MODERN_VERSIONS + LEGACY_VERSIONS
LATEST_LEGACY = LEGACY_VERSIONS[0]

# The 2026-07-28 per-request _meta keys (basic/index.mdx, "Per-request protocol fields").
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"

# Methods that read the store: a transport runs them where waiting for it holds up nothing.
STORE_METHODS = frozenset(("tools/call", "resources/list", "resources/read",
                           "completion/complete"))

# The 2026-07-28 request that opens a stream held open (subscriptions/listen).
LISTEN_METHOD = "subscriptions/listen"

# Tools that write, read from the tool table: one may wait for a lock or for a person, so it
# runs apart from the reads and its client is watched while it waits.
WAITING_TOOLS = frozenset(tool["name"] for tool in TOOLS
                          if not tool.get("annotations", {}).get("readOnlyHint", False))

# The body field each method's Mcp-Name header mirrors (streamable-http.mdx, "Standard Request
# Headers").
NAMED_BY = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}

# The routing headers, as ASGI names them (lowercase bytes). One sent twice is refused: a
# reader of its first copy and one of its last would route the request differently.
VERSION_HEADER = b"mcp-protocol-version"
METHOD_HEADER = b"mcp-method"
NAME_HEADER = b"mcp-name"
ROUTING_HEADERS = (VERSION_HEADER, METHOD_HEADER, NAME_HEADER)
HEADER_TITLES = {VERSION_HEADER: "MCP-Protocol-Version", METHOD_HEADER: "Mcp-Method",
                 NAME_HEADER: "Mcp-Name"}

# The HTTP status of each error on the 2026-07-28 path (transports/streamable-http.mdx).
ERROR_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400,
                HEADER_MISMATCH: 400, MISSING_CAPABILITY: 400, UNSUPPORTED_VERSION: 400,
                METHOD_NOT_FOUND: 404}

_SENTINEL_START, _SENTINEL_END = "=?base64?", "?="


class MessageRoute:
    """What one message is and how to serve it, decided once."""

    __slots__ = ("kind", "method", "era", "meta", "tool", "may_wait", "needs_store",
                 "opens_session", "error", "version_header", "modern", "sessionless",
                 "version_served", "knowledge_base", "quick")

    def __init__(self, kind, method=None, era=None, meta=None, tool=None, error=None,
                 version_header=None, knowledge_base=None):
        self.kind = kind
        self.method = method
        # "modern" (2026-07-28: this request's _meta) or "legacy" (a handshake session's).
        self.era = era
        # The request's 2026-07-28 _meta, as it came (the protocol checks its fields).
        self.meta = meta
        self.tool = tool
        self.may_wait = tool in WAITING_TOOLS
        self.needs_store = method in STORE_METHODS
        self.opens_session = era == "legacy" and method == "initialize"
        # Why the message cannot be served (an RpcError), answered in place of it.
        self.error = error
        # The MCP-Protocol-Version header, as sent (checked against a session's era), and
        # whether a handshake session may be served under it.
        self.version_header = version_header
        self.version_served = version_header is None or version_header in LEGACY_VERSIONS
        # Whether the request is served statelessly (2026-07-28).
        self.modern = era == "modern"
        # Whether a request needs no handshake session found for it, whatever it names: a
        # 2026-07-28 request is self-contained, and an initialize makes one anew.
        self.sessionless = kind == "request" and (self.modern or method == "initialize")
        # Whether the request writes nothing, waits for nothing and holds nothing open: a
        # 2026-07-28 one that names no tool that writes and opens no listen stream. Where the
        # store's reads wait for nothing either, a transport may serve it where it stands
        # rather than hand it to a thread (the hand-off cost more than such a read).
        self.quick = (self.modern and kind == "request" and not self.may_wait
                      and method != LISTEN_METHOD)
        # The knowledge base a tools/call names (a string, else None): a team issuer's token
        # is checked for the scope a writing tool needs on it before the call is served.
        self.knowledge_base = knowledge_base


def decode_name(value):
    """An ``Mcp-Name`` header's value, the ``=?base64?...?=`` sentinel form decoded; None
    when the sentinel holds no UTF-8 base64."""
    if value.startswith(_SENTINEL_START) and value.endswith(_SENTINEL_END):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
    return value


def encode_name(value):
    """The ``Mcp-Name`` header value of a name: as it is where it is plain visible ASCII
    without edge spaces and not itself sentinel-shaped; else the base64 sentinel form."""
    plain = (all(" " <= ch <= "~" for ch in value) and value == value.strip()
             and not (value.startswith(_SENTINEL_START) and value.endswith(_SENTINEL_END)))
    if plain:
        return value
    return "%s%s%s" % (_SENTINEL_START, base64.b64encode(value.encode("utf-8")).decode("ascii"),
                       _SENTINEL_END)


def _routing_headers(headers):
    """``({name: text}, [names sent more than once])`` of the routing headers among an ASGI
    request's raw ``(name, value)`` pairs."""
    found, twice = {}, []
    for name, value in headers:
        if name in HEADER_TITLES:
            if name in found:
                twice.append(name)
            found[name] = value.decode("latin-1")
    return found, twice


def _header_problems(message, params, meta, headers):
    """What is wrong with a 2026-07-28 request's routing headers, in words (none: [])."""
    found, twice = _routing_headers(headers)
    if twice:
        return ["the %s header is sent more than once; send one" % HEADER_TITLES[name]
                for name in dict.fromkeys(twice)]
    problems = []
    version = found.get(VERSION_HEADER)
    if version is None:
        problems.append("the MCP-Protocol-Version header is missing")
    elif version != meta.get(META_VERSION):
        problems.append("MCP-Protocol-Version %.40s is not the body's %.40s"
                        % (version, meta.get(META_VERSION)))
    method = found.get(METHOD_HEADER)
    if method is None:
        problems.append("the Mcp-Method header is missing")
    elif method != message["method"]:
        problems.append("Mcp-Method %.60s is not the body's %.60s" % (method, message["method"]))
    if message["method"] in NAMED_BY:
        name = found.get(NAME_HEADER)
        body_name = params.get("name", params.get("uri"))
        if name is None:
            problems.append("the Mcp-Name header is missing")
        elif decode_name(name) != body_name:
            problems.append("Mcp-Name %.60s is not the body's %.60s" % (name, body_name))
    return problems


def _tool_of(method, params):
    """``(tool name, knowledge_base_id)`` a tools/call names, each None where not a string."""
    if method != "tools/call" or not isinstance(params, dict):
        return None, None
    tool, arguments = params.get("name"), params.get("arguments")
    kb = arguments.get("knowledge_base_id") if isinstance(arguments, dict) else None
    return (tool if isinstance(tool, str) else None), (kb if isinstance(kb, str) else None)


def route(message, headers=None):
    """The ``MessageRoute`` of a decoded message; ``headers`` are its HTTP request's raw ASGI header
    pairs, or None where there are none (stdio)."""
    kind, error = classify(message)
    if error is not None:
        return MessageRoute(None, error=error)
    method = message.get("method")
    if kind != "request":
        return MessageRoute(kind, method)
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not (isinstance(meta, dict) and META_VERSION in meta):
        version = None
        if headers is not None:
            version = _routing_headers(headers)[0].get(VERSION_HEADER)
        tool, kb = _tool_of(method, params)
        return MessageRoute(kind, method, "legacy", tool=tool, version_header=version,
                     knowledge_base=kb)
    tool, kb = _tool_of(method, params)
    problems = _header_problems(message, params, meta, headers) if headers is not None else []
    error = (RpcError(HEADER_MISMATCH, "Header mismatch: %s" % "; ".join(problems))
             if problems else None)
    return MessageRoute(kind, method, "modern", meta, tool, error, knowledge_base=kb)


def session_version_error(route, negotiated):
    """2025-11-25 transports.mdx, "Protocol Version Header": an error only for "an invalid or
    unsupported MCP-Protocol-Version"; any handshake version this server speaks is served in
    the session (the SDKs' servers do the same). None when the header is fine or absent."""
    version = route.version_header
    if route.version_served:
        return None
    return RpcError(INVALID_REQUEST, "Bad Request: MCP-Protocol-Version %.40s is not a version "
                    "this session can speak (%s; negotiated %s)"
                    % (version, ", ".join(LEGACY_VERSIONS), negotiated))
