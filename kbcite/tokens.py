"""Bearer tokens for the HTTP server: minted once, kept as a digest, each carrying its grants.

A token is ``kbt_`` and 32 random bytes; the store keeps only its SHA-256, with the
knowledge bases it grants and its write mode (``ask``: a person approves each edit;
``allow``; ``deny``; ``review``: each edit is kept as a proposal for ``kb review``).
Revoking one takes effect at its next request, and ends its sessions. The store hands them
out as ``store.tokens``, a ``Tokens``.
"""

import base64
import hashlib
import json
import secrets

from . import access, sessions
from .errors import InvalidArgument, NotFound
from .validation import check_people_string, shown
from .versions import format_version
from .writes import DEFAULT as DEFAULT_WRITES
from .writes import WRITE_MODES

# Tokens are 32 random bytes (RFC 6750 bearer tokens need no more), prefixed so that one
# found in a log or a repository is recognisable, and stored only as a SHA-256.
TOKEN_PREFIX = "kbt_"

TOKEN_NAME_MAX = 64

# Live tokens a connection keeps what it found of (``Tokens.principal``): a team's agents
# have a few each; past this many, it starts again.
TOKENS_KEPT = 256

# The web pages' sessions and one-time sign-in links are rows of the sessions table of these
# kinds (its protocol version), keyed by the SHA-256 of a secret only the browser holds.
KIND_WEB = "web"
KIND_LINK = "web-link"
# A person signed in at the team's issuer (OpenID Connect): no token row, the person's subject
# as the session's owner.
KIND_OIDC = "web-oidc"

# A one-time link signs in within ten minutes of being printed, or never.
LINK_TTL_S = 600

# The web pages' sessions one token (or one person signed in at the team's issuer) keeps at
# once: a new sign-in ends the least recently used. Counted apart from the MCP handshakes.
WEB_SESSIONS_PER_TOKEN = 32

# A web page's session ends after this long without a page (seconds): a working day, apart
# from the MCP handshakes' idle time (an agent's session is no person's page).
WEB_SESSION_TIMEOUT_S = 8 * 3600.0


def token_digest(token):
    """The SHA-256 under which a token is kept (hex); equal digests are compared in SQL."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def secret_digest(secret):
    """The session ID the store keeps for a web cookie's or a link's secret."""
    return KIND_WEB + ":" + hashlib.sha256(secret.encode("utf-8")).hexdigest()


def pack(name, secret):
    """A web cookie's value or a link's code: the token's name (base64url) and a secret."""
    return base64.urlsafe_b64encode(name.encode("utf-8")).decode("ascii").rstrip("=") + \
        "." + secret


def unpack(value):
    """``(name, secret)`` of a web cookie's value or a link's code, or None."""
    if not isinstance(value, str) or value.count(".") != 1 or len(value) > 512:
        return None
    encoded, secret = value.split(".")
    try:
        name = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    return (name, secret) if name and len(secret) >= 32 else None


class Tokens:
    """The store's bearer tokens (``store.tokens``): each call is one transaction."""

    def __init__(self, ctx):
        self._ctx = ctx
        # The live tokens this connection found, by digest, with the engine's data_version
        # then: valid while nothing was committed since (a revocation from any process
        # moves it). Every request of the HTTP server checks its token.
        self._found = {}

    def create(self, name, grants, writes=DEFAULT_WRITES, review=False):
        """A new bearer token granting knowledge bases ``grants``; returns it, the only time it
        is ever shown (the store keeps its SHA-256). ``review``: its holder may approve and
        reject proposals on the web pages."""
        check_people_string(name, "name", TOKEN_NAME_MAX)
        grants = list(dict.fromkeys(grants))
        if not grants:
            raise InvalidArgument("a token needs at least one knowledge base to grant",
                                  argument="grant")
        if writes not in WRITE_MODES:
            raise InvalidArgument("writes must be one of %s, got %s"
                                  % (", ".join(WRITE_MODES), shown(writes)), argument="writes")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        db = self._ctx.db
        with db.write():
            if db.tokens.by_name(name) is not None:
                raise InvalidArgument("a token named %r exists already (revoked tokens keep "
                                      "their names); choose another name" % name,
                                      argument="name")
            for kb_id in grants:
                access.knowledge_base(db, kb_id)
            db.tokens.insert(name, token_digest(token), json.dumps(grants), writes,
                            format_version(self._ctx.now_us()), bool(review))
        return token

    def list(self):
        """Every token's name, grants, write mode, creation and revocation times."""
        db = self._ctx.db
        with db.read():
            rows = db.tokens.list()
        return [dict(row, grants=json.loads(row["grants"]), review=bool(row["review"]))
                for row in rows]

    def revoke(self, name):
        """Revoke a token: its next request is refused and its sessions end. Returns the
        revocation time."""
        db = self._ctx.db
        with db.write():
            row = db.tokens.by_name(name)
            if row is None:
                raise NotFound("there is no token named %r" % (name,), token=name)
            if row["revoked_at"] is not None:
                return row["revoked_at"]
            revoked_at = format_version(self._ctx.now_us())
            db.tokens.revoke(name, revoked_at)
            sessions.end_for_token(db, name)
            return revoked_at

    def principal(self, token):
        """``{name, grants, writes, review}`` of a live token, or None for an unknown or
        revoked one."""
        db = self._ctx.db
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            return None
        digest = token_digest(token)
        version = db.data_version() if "data_version" in db.capabilities else None
        found = self._found.get(digest)
        if found is None or version is None or found[0] != version:
            with db.read():
                row = db.tokens.by_hash(digest)
            if row is None:
                self._found.pop(digest, None)
                return None
            found = (version, {"name": row["name"], "grants": json.loads(row["grants"]),
                               "writes": row["writes"], "review": bool(row["review"])})
            if version is not None:
                if len(self._found) >= TOKENS_KEPT:
                    self._found.clear()
                self._found[digest] = found
        principal = found[1]
        return dict(principal, grants=list(principal["grants"]))  # the caller's own copy

    def refusal(self, token):
        """Why ``principal`` refused a token, in words for the server's log (never the token)."""
        db = self._ctx.db
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            return ("the token does not start with %s: kb token create did not make it"
                    % TOKEN_PREFIX)
        with db.read():
            row = db.tokens.any_by_hash(token_digest(token))
        if row is None:
            return "no token of this store is that one (mistyped, or another store's)"
        return "token %r was revoked at %s" % (row["name"], row["revoked_at"])

    def link(self, name):
        """A one-time code that signs the holder of token ``name`` in to the web pages within
        ``LINK_TTL_S`` (the path ``/login/link?code=``); kept as a session of kind
        ``web-link``."""
        db = self._ctx.db
        with db.read():
            row = db.tokens.by_name(name)
        if row is None or row["revoked_at"] is not None:
            raise NotFound("there is no live token named %r (kb token list shows them)"
                           % (name,), token=name)
        secret = secrets.token_urlsafe(32)
        sessions.Sessions(self._ctx).open(
            secret_digest(secret), name, KIND_LINK,
            {"grants": json.loads(row["grants"]), "writes": row["writes"],
             "review": bool(row["review"])}, idle_s=LINK_TTL_S,
            per_token=WEB_SESSIONS_PER_TOKEN)
        return pack(name, secret)
