"""The checks every HTTP request passes before its method's own: which names are this server's
(DNS rebinding protection) and CORS for the allowed origins."""

import ipaddress

# The names a loopback server answers to, besides its own address: its Host and Origin.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

# CORS for the allowed origins. Every header an MCP client sends (neither Authorization nor
# application/json is CORS-safelisted, so a browser preflights every POST), and those it must
# read: the session ID, the bearer challenge, when to retry.
CORS_METHODS = "POST, GET, DELETE, OPTIONS"
CORS_ALLOWED = ("authorization", "content-type", "accept", "mcp-session-id",
                "mcp-protocol-version", "mcp-method", "mcp-name", "last-event-id")
CORS_EXPOSED = b"Mcp-Session-Id, WWW-Authenticate, Retry-After"
CORS_MAX_AGE = b"600"


def is_loopback(host):
    """Whether a host name or address is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bracketed(host):
    return "[%s]" % host if ":" in host and not host.startswith("[") else host

