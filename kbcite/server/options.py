"""The options of the HTTP server and its store connections, for ``kb-server`` and ``kb serve``
alike: one table of flags, their defaults and their limits, so the two commands (and the
config file ``kb serve`` reads) cannot drift apart."""

import argparse
import os
import urllib.parse

from ..limits import APPROVAL_TTL_S
from ..writes import DEFAULT as DEFAULT_WRITES
from ..writes import WRITE_MODES
from .logs import LOG_FORMATS
from .oauth.scopes import SUBJECT_CLAIMS
from .pool import QUEUED_EDITS, READERS

# The HTTP defaults, as the help states them; the HTTP modules hold the values themselves
# (tests/test_http.py checks that the two agree).
HTTP_DEFAULTS = {"max_body": 8 * 1024 * 1024, "max_connections": 2048, "request_timeout": 30.0,
                 "idle_timeout": 60.0, "session_timeout": 3600.0, "sessions_per_token": 32,
                 "web_session_timeout": 28800.0, "web_sessions_per_token": 32,
                 "keepalive": 15.0, "subscriptions_per_token": 1000}


# The least value of each whole-number option, and the options that must be above 0.
MINIMUM = {"queued_edits": 0, "max_body": 1, "max_connections": 1, "workers": 1, "threads": 1,
           "approval_ttl": 1, "sessions_per_token": 1, "web_sessions_per_token": 1,
           "subscriptions_per_token": 1}
POSITIVE = ("request_timeout", "idle_timeout", "session_timeout", "web_session_timeout",
            "keepalive")

# --http-parser's choices, as kbcite.server.http.connection_guard.PARSERS has them (the HTTP
# package is imported only to serve it; tests/test_http.py checks that the two agree).
PARSERS = ("auto", "httptools", "h11")

# What --allow-origin (and kb serve's allow-origins) must look like.
ORIGIN_FORM = ("an origin is scheme://host[:port] as a browser sends it "
               "(https://app.example.com)")


def is_origin(origin):
    """Whether ``origin`` is an origin as a browser sends it: scheme://host[:port]."""
    parts = urllib.parse.urlsplit(origin)
    try:
        parts.port  # noqa: B018 (a port that is not a number raises)
    except ValueError:
        return False
    return (parts.scheme in ("http", "https") and bool(parts.hostname) and not parts.path
            and not parts.query and not parts.fragment and not parts.username)


def add_http_options(parser, defaults=True):
    """Add the server's options to ``parser``; with ``defaults=False`` an option not given is
    left out of the parsed arguments (``kb serve`` takes it from its config file then)."""
    before = len(parser._actions)
    d = HTTP_DEFAULTS
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="HTTP: server processes sharing the port (default 1)")
    parser.add_argument("--threads", type=int, default=READERS, metavar="N",
                        help="tool calls run at once per process, each on a store connection "
                             "of its own; edits have N/2 connections apart (default %d)"
                             % READERS)
    parser.add_argument("--queued-edits", type=int, default=QUEUED_EDITS, metavar="N",
                        help="edits of one knowledge base that may wait for their turn; one "
                             "more gets store_busy at once (default %d)" % QUEUED_EDITS)
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="HTTP: a browser Origin allowed (CORS included) besides the "
                             "server's own addresses (repeat for several)")
    parser.add_argument("--max-body", type=int, default=d["max_body"], metavar="BYTES",
                        help="HTTP: the largest request body (default %d)" % d["max_body"])
    parser.add_argument("--max-connections", type=int, default=d["max_connections"],
                        metavar="N", help="HTTP: connections held at once per process; one "
                                          "more gets 503 (default %d)" % d["max_connections"])
    parser.add_argument("--request-timeout", type=float, default=d["request_timeout"],
                        metavar="S", help="HTTP: a request must arrive whole within S seconds "
                                          "of its first byte (default %g)"
                                          % d["request_timeout"])
    parser.add_argument("--http-parser", choices=PARSERS, default="auto",
                        help="HTTP: what reads requests: httptools (C) or h11 (pure Python), "
                             "behind the same guards; auto: httptools where installed "
                             "(default auto)")
    parser.add_argument("--idle-timeout", type=float, default=d["idle_timeout"], metavar="S",
                        help="HTTP: a connection without a request in progress is closed "
                             "after S seconds (default %g)" % d["idle_timeout"])
    parser.add_argument("--session-timeout", type=float, default=d["session_timeout"],
                        metavar="S", help="HTTP: a 2025-11-25 session ends after S seconds "
                                          "without a request (default %g)"
                                          % d["session_timeout"])
    parser.add_argument("--sessions-per-token", type=int, default=d["sessions_per_token"],
                        metavar="N", help="HTTP: sessions one token holds at once; a new one "
                                          "ends its least recently used (default %d)"
                                          % d["sessions_per_token"])
    parser.add_argument("--web-session-timeout", type=float, default=d["web_session_timeout"],
                        metavar="S", help="HTTP: a web page's sign-in ends after S seconds "
                                          "without a page, and a sign-in at the team's issuer "
                                          "that long after it began (default %g)"
                                          % d["web_session_timeout"])
    parser.add_argument("--web-sessions-per-token", type=int,
                        default=d["web_sessions_per_token"], metavar="N",
                        help="HTTP: web sign-ins one token (or person) holds at once, apart "
                             "from its MCP sessions; a new one ends its least recently used "
                             "(default %d)" % d["web_sessions_per_token"])
    parser.add_argument("--keepalive", type=float, default=d["keepalive"], metavar="S",
                        help="HTTP: an open notification stream (a session's GET, a listen) "
                             "says it is alive every S seconds (default %g)" % d["keepalive"])
    parser.add_argument("--subscriptions-per-token", type=int,
                        default=d["subscriptions_per_token"], metavar="N",
                        help="HTTP: URIs the 2025-11-25 sessions of one token subscribe to at "
                             "once (default %d)" % d["subscriptions_per_token"])
    parser.add_argument("--ssl-certfile", metavar="FILE",
                        help="HTTP: serve https with this certificate (PEM), and --ssl-keyfile")
    parser.add_argument("--ssl-keyfile", metavar="FILE", help="HTTP: the certificate's key (PEM)")
    parser.add_argument("--signing-secret-file", metavar="FILE",
                        help="the secret that signs 2026-07-28 approval handles (default: "
                             "$KB_SIGNING_SECRET, else a random one for this server); servers "
                             "that share a database and this secret can finish each other's "
                             "approvals")
    parser.add_argument("--approval-ttl", type=int, default=APPROVAL_TTL_S, metavar="S",
                        help="how long a 2026-07-28 approval handle is good (default %d s)"
                             % APPROVAL_TTL_S)
    parser.add_argument("--public-url", metavar="URL", default=os.environ.get("KB_PUBLIC_URL"),
                        help="where people's browsers reach the web pages of this store (this "
                             "server's --http, or one sharing the database), e.g. "
                             "https://kb.example.com: a proposal's page is then linked from "
                             "its tool result, and a client that opens links (URL-mode "
                             "elicitation) sends the person there to approve (default: "
                             "$KB_PUBLIC_URL; without it no links)")
    parser.add_argument("--authorization-server", metavar="URL",
                        help="HTTP: the OAuth 2.1 authorization server (a gateway) that issues "
                             "this server's tokens; published as RFC 9728 metadata and in 401 "
                             "challenges")
    team = parser.add_argument_group(
        "signing in with the team's identity provider (HTTP; pip install 'kbcite[oauth]')")
    team.add_argument("--oauth-issuer", metavar="URL",
                      help="accept this OAuth 2.1 / OpenID Connect issuer's access tokens "
                           "beside kb tokens (https; http only on loopback)")
    team.add_argument("--oauth-audience", metavar="URL",
                      help="the resource its tokens must name in aud (default: the URL "
                           "served, http(s)://HOST:PORT/mcp; give the public URL behind a "
                           "proxy)")
    team.add_argument("--oauth-subject-claim", choices=SUBJECT_CLAIMS, default="sub",
                      help="the claim that names the person in the history (default sub)")
    team.add_argument("--oauth-writes", choices=WRITE_MODES, default=DEFAULT_WRITES,
                      help="how the edits of a kb:KB:write scope go (default ask)")
    team.add_argument("--oauth-scope", action="append", default=[], metavar="SCOPE",
                      help="a scope the RFC 9728 metadata lists (repeatable), e.g. "
                           "kb:support:read")
    team.add_argument("--oauth-client-id", metavar="ID",
                      help="this server's client ID at the issuer, for RFC 7662 introspection "
                           "of opaque tokens (its secret from $KB_OAUTH_CLIENT_SECRET)")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="plain",
                        help="plain: lines for a person (default); json: one JSON object a "
                             "line, and over HTTP one line a request (time, method, path, "
                             "status, duration, token name; never the token or a cookie)")
    parser.add_argument("--log-file", metavar="PATH",
                        help="append the log to PATH instead of stderr (the serving line still "
                             "goes to stderr)")
    if not defaults:
        for action in parser._actions[before:]:
            action.default = argparse.SUPPRESS
