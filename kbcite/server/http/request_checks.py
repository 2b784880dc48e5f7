"""The checks every HTTP request passes before its method's own: framing the server in front
let through, which names are this server's (DNS rebinding protection), and CORS for the
allowed origins, its preflight included. Plain checks over a ``Request``."""

import ipaddress
import logging

from ..throttle import Throttle
from .request import Refusal, Reply, refusal

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

log = logging.getLogger(__name__)

quiet = Throttle(log)


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


def check_framing(req):
    """400 and a closed connection for a request the server in front framed ambiguously."""
    if req.framing is not None:
        quiet.info("framing", "refused a request from %s: %s", req.client, req.framing)
        raise Refusal(400, refusal("Bad Request: %s" % req.framing), close=True)


class Guards:
    """The Hosts and Origins this server answers, per address and scheme it is reached on,
    and the CORS headers an allowed Origin gets."""

    def __init__(self, settings):
        self.settings = settings
        self._allowed = {}  # (scheme, server host, port) -> (hosts, origins)

    def own(self, req):
        """``(the Host values allowed, the Origins allowed)`` for the address and scheme the
        request came in on: DNS rebinding protection (transports, "Security Warning")."""
        scheme = req.scope.get("scheme", "http")
        server = req.scope.get("server") or (None, None)
        key = (scheme, server[0], server[1])
        found = self._allowed.get(key)
        if found is None:
            host, port = server
            names = set()
            if host is not None:
                names.add(_bracketed(host))
                if self.settings.host:
                    names.add(_bracketed(self.settings.host))
                if is_loopback(host):
                    names.update(LOOPBACK_NAMES)
            suffix = "" if port is None else ":%d" % port
            # On a loopback address a browser's page must not reach us under another name; a
            # server others reach is theirs to name (its tokens are what protect it).
            hosts = ({name + suffix for name in names}
                     if host is not None and is_loopback(host) else None)
            origins = {"%s://%s%s" % (s, name, suffix) for s in ("http", "https")
                       for name in names} | set(self.settings.allowed_origins)
            found = self._allowed[key] = (hosts, origins)
        return found

    def check_origin_and_host(self, req):
        """403 for an Origin not allowed, 421 for a Host that is not this server's."""
        hosts, origins = self.own(req)
        origin = req.header(b"origin")
        if origin is not None and origin not in origins:
            raise Refusal(403, refusal("Forbidden: Origin %.100s is not allowed (kb-server "
                                       "--allow-origin adds one)" % origin))
        if hosts is not None and req.header(b"host") not in hosts:
            raise Refusal(421, refusal("Misdirected Request: Host %.100s is not this server's "
                                       "address" % req.header(b"host")))

    def cors(self, req):
        """The CORS headers of an answer to an allowed Origin (none for any other)."""
        origin = req.headers.get(b"origin")
        if origin is None or origin.decode("latin-1") not in self.own(req)[1]:
            return []
        return [(b"Access-Control-Allow-Origin", origin), (b"Vary", b"Origin"),
                (b"Access-Control-Expose-Headers", CORS_EXPOSED)]

    def preflight(self, req):
        """OPTIONS: a browser asks whether an allowed Origin may POST with MCP's headers."""
        if req.header(b"origin") is None:
            return Reply(204, headers=[(b"Allow", b"POST, DELETE, OPTIONS")])
        method = req.header(b"access-control-request-method") or ""
        asked = [h.strip().lower() for h in
                 (req.header(b"access-control-request-headers") or "").split(",") if h.strip()]
        refused = [h for h in asked if h not in CORS_ALLOWED]
        if method not in ("POST", "GET", "DELETE") or refused:
            return Reply(403, refusal("Forbidden: CORS allows %s with headers %s; asked %s %s"
                                      % (CORS_METHODS, ", ".join(CORS_ALLOWED), method or
                                         "no method", ", ".join(refused))), cors=False)
        headers = [(b"Access-Control-Allow-Methods", CORS_METHODS.encode("ascii")),
                   (b"Access-Control-Max-Age", CORS_MAX_AGE)]
        if asked:
            headers.append((b"Access-Control-Allow-Headers", ", ".join(asked).encode("ascii")))
        return Reply(204, headers=headers)
