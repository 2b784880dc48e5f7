"""JSON-RPC 2.0 framing, as MCP uses it: error codes, one message classified, encoded, answered.

The bottom of the server: it knows messages, not transports, eras or tools.
"""

import json
import math

# JSON-RPC 2.0 error codes, and those MCP 2026-07-28 defines (basic/index.mdx, "Error Codes").
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022

# Where a tool result's structuredContent goes when its response is encoded: the JSON text
# already made for its text block is put there as it is, instead of encoding the structure a
# second time (a private-use character cannot come from the server itself; a client's string
# equal to it is escaped or lies before this, the last one of the response).
_SPLICE = "\ue000kbcite structuredContent\ue000"
_SPLICE_JSON = '"%s"' % _SPLICE

# One encoder for every message: json.dumps with these arguments makes a new one each call.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


class ToolResult(dict):
    """A successful CallToolResult that keeps the JSON text of its structuredContent, so that
    the response carrying it encodes the structure once, not twice (``encode``)."""

    __slots__ = ("text",)
    text: str


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
    return _COMPACT(value)


def encode(message):
    """A message as UTF-8 bytes; a lone surrogate (echoed from a client's escapes) escaped."""
    try:
        return _text(message).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":"), allow_nan=False).encode("ascii")


def _text(message):
    """A message as JSON text, a tool result's structure spliced in from its own text."""
    result = message.get("result") if isinstance(message, dict) else None
    if type(result) is not ToolResult:
        return to_json(message)
    head, _, tail = to_json(dict(message, result=dict(
        result, structuredContent=_SPLICE))).rpartition(_SPLICE_JSON)
    return head + result.text + tail


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


# -- what a tools/call result holds -----------------------------------------------------------


def tool_result(structured):
    """A successful CallToolResult: the result as structuredContent and as JSON text."""
    text = to_json(structured)
    result = ToolResult(content=[{"type": "text", "text": text}], structuredContent=structured)
    result.text = text
    return result


def tool_error(error):
    """A CallToolResult with isError for a tool error.

    No structuredContent: clients validate it against the tool's outputSchema whenever it is
    present, even on errors (the TypeScript SDK does), and an error object does not match.
    """
    return {"content": [{"type": "text", "text": to_json({"error": error.to_dict()})}],
            "isError": True}
