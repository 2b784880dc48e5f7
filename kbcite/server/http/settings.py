"""What the HTTP app serves and its limits: ``Settings``, and ``create_app`` to mount the
endpoint in a team's own application (``kbcite.server.config.app_from_env`` makes it from the
environment)."""

import logging
import secrets
from dataclasses import dataclass
from typing import Optional

from ...tokens import WEB_SESSION_TIMEOUT_S, WEB_SESSIONS_PER_TOKEN
from ...writes import DEFAULT as DEFAULT_WRITES
from ..approval import APPROVAL_TTL_S
from ..links import check_public_url
from ..pool import QUEUED_EDITS, READERS
from ..subscriptions import SUBSCRIPTIONS_MAX
from .app import McpApp
from .handshakes import SESSION_TIMEOUT_S, SESSIONS_PER_TOKEN
from .streams import KEEPALIVE_S

# A 1 MiB article JSON-escaped with \u sequences takes six bytes a character: 8 MiB holds any
# valid edit, and refuses a flood.
MAX_BODY = 8 * 1024 * 1024


# Requests in progress at once per process, each on a thread (a question waiting for its
# person holds one, but no store connection); one more is 503 at once.
MAX_REQUESTS = 128

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """What the app serves and its limits; plain data, so uvicorn can hand it to every worker
    process."""

    db: str
    signing_secret: bytes
    allowed_origins: tuple = ()
    # The name the server was told to listen on (kb-server --http NAME:PORT): also its own.
    host: Optional[str] = None
    max_body: int = MAX_BODY
    threads: int = READERS
    queued_edits: int = QUEUED_EDITS
    approval_ttl: int = APPROVAL_TTL_S
    authorization_server: Optional[str] = None
    session_timeout: float = SESSION_TIMEOUT_S
    sessions_per_token: int = SESSIONS_PER_TOKEN
    # The web pages' sessions: their own idle time and their own cap a token (or person).
    web_session_timeout: float = WEB_SESSION_TIMEOUT_S
    web_sessions_per_token: int = WEB_SESSIONS_PER_TOKEN
    max_requests: int = MAX_REQUESTS
    keepalive: float = KEEPALIVE_S
    # Subscribed URIs all the handshake sessions of one token hold at once.
    subscriptions_per_token: int = SUBSCRIPTIONS_MAX
    # The team's identity provider, whose access tokens are accepted beside kb tokens: its
    # issuer URL, this resource's URL its tokens must name as audience (RFC 8707), the claim
    # that names the person, the write mode of a kb:{kb}:write scope, and the credentials
    # for RFC 7662 introspection of opaque tokens.
    oauth_issuer: Optional[str] = None
    oauth_audience: Optional[str] = None
    oauth_subject_claim: str = "sub"
    oauth_writes: str = DEFAULT_WRITES
    oauth_client_id: Optional[str] = None
    oauth_client_secret: Optional[str] = None
    # The scopes the RFC 9728 document lists and a 401 not about one call names.
    oauth_scopes: tuple = ()
    # Where people's browsers reach the pages (links.check_public_url): a proposal's page is
    # linked from its approval question and its tool result; None: no links are made.
    public_url: Optional[str] = None
    # One log record a request (kb-server --log-format json): http.access.
    access_log: bool = False
    # The web pages rendered in a process of their own (web/process.py), so that they never
    # hold /mcp's interpreter lock; kb-server --http sets it, a mounted app renders in its own.
    web_process: bool = False


def create_app(db, *, signing_secret=None, **options):
    """The MCP endpoint for the store at ``db``, as an ASGI application to run or mount.

    ``signing_secret`` (bytes) signs 2026-07-28 approval handles; give every process that
    shares the store the same one (a random one serves this process alone). ``options`` are
    ``Settings`` fields: ``allowed_origins``, ``max_body``, ``threads``, ``session_timeout``...
    """
    if signing_secret is None:
        log.info("no signing secret given: 2026-07-28 approvals can be finished by this process "
                 "only (set KB_SIGNING_SECRET on every server that shares the database)")
        signing_secret = secrets.token_bytes(32)
    for name in ("allowed_origins", "oauth_scopes"):
        if name in options:
            options[name] = tuple(options[name])
    if options.get("public_url") is not None:
        try:
            options["public_url"] = check_public_url(options["public_url"])
        except ValueError as exc:
            raise ValueError("public_url: %s" % exc) from None
    return McpApp(Settings(db=db, signing_secret=signing_secret, **options))

