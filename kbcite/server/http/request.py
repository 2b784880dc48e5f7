"""One HTTP request's scope, its headers read once, and what answers it: a ``Reply``, or a
``Refusal`` raised with one."""

import logging

from ..jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, RpcError, error_response
from ..throttle import Throttle

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource" + MCP_PATH

# A refusal that asks the client to come back says when.
RETRY_AFTER_S = 1

# Set in a request's scope once its bearer token is valid: the guarded protocol lets such a
# connection out of its address's share (h11_guard).
AUTHENTICATED = "kbcite.authenticated"

log = logging.getLogger(__name__)

quiet = Throttle(log)


class Refusal(Exception):
    """An HTTP request refused: a status, headers, a JSON body, and whether to close."""

    def __init__(self, status, body=None, headers=(), close=False):
        super().__init__(status)
        self.reply = Reply(status, body, list(headers), close)


class Reply:
    """A whole response (JSON when there is a body), or the last event of a stream."""

    __slots__ = ("status", "body", "headers", "close", "streamed", "cors", "stream")

    def __init__(self, status, body=None, headers=None, close=False, streamed=False, cors=True,
                 stream=None):
        self.status = status
        # A notification stream to hold open: ``(subscriber, first message, last message)``.
        self.stream = stream
        self.body = body
        self.headers = headers or []
        self.close = close
        self.streamed = streamed
        # False for a refused preflight: the browser must not read it as allowed.
        self.cors = cors


def refusal(message, code=INVALID_REQUEST, request_id=None, data=None):
    """The JSON-RPC error body of a refused request: clients read the reason there."""
    return error_response(request_id, RpcError(code, message, data))


def unavailable(req, exc):
    """503 for a request the store could not serve (down, busy): never a dropped connection;
    the JSON-RPC error says to retry."""
    quiet.info("503", "503 for %s: the store failed while checking the request (%s)",
               req.client, exc.message)
    return Refusal(503, refusal("Service Unavailable: the store could not be reached to "
                                "check this request (%s); retry shortly" % exc.code,
                                INTERNAL_ERROR, data={"retryable": True, "reason": exc.code}),
                   [(b"Retry-After", b"%d" % RETRY_AFTER_S)])


class Request:
    """One HTTP request's scope, its headers read once."""

    __slots__ = ("scope", "method", "path", "headers", "framing")

    def __init__(self, scope):
        self.scope = scope
        self.method = scope["method"]
        root, path = scope.get("root_path", ""), scope["path"]
        self.path = path[len(root):] if root and path.startswith(root) else path
        headers = {}
        hosts, lengths, chunked = 0, set(), False
        for name, value in scope["headers"]:
            if name == b"host":
                hosts += 1
            elif name == b"content-length":
                lengths.add(value)
            elif name == b"transfer-encoding":
                chunked = True
            headers[name] = value
        self.headers = headers
        self.framing = None
        if chunked and lengths:
            self.framing = ("both Transfer-Encoding and Content-Length frame this request (RFC "
                            "9112 6.3); send one")
        elif hosts > 1:
            self.framing = "more than one Host header (RFC 9112 3.2)"
        elif len(lengths) > 1:
            self.framing = "Content-Length headers that differ (RFC 9110 8.6)"

    def header(self, name):
        """A header's value as text, or None."""
        value = self.headers.get(name)
        return value.decode("latin-1") if value is not None else None

    @property
    def client(self):
        """The client's address, for the log."""
        client = self.scope.get("client")
        return client[0] if client else "?"
