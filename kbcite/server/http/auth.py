"""The bearer token: who is calling (a ``Principal``), the 401 challenge when nobody is, and the
RFC 9728 document that names the authorization server issuing the tokens.

Two kinds of token are taken: the store's own ``kbt_`` tokens, and, with an issuer configured
(``--oauth-issuer``), the team identity provider's access tokens, checked by ``oauth.bearer``.
A person's token gives them what its ``kb:{kb}:{right}`` scopes give; an edit of a knowledge
base they may read but not write is ``403 insufficient_scope`` naming the scope it needs.
"""

import logging

from ...errors import ToolError
from ...writes import DENY, mode
from ..calls import CALLER, Principal
from ..inbound import SERVER_NAME, WAITING_TOOLS
from ..pool import Connections
from ..throttle import Throttle
from .request import (
    AUTHENTICATED,
    MCP_PATH,
    METADATA_PATH,
    RETRY_AFTER_S,
    Refusal,
    refusal,
    unavailable,
)

# Token checks have connections of their own: a request is authenticated even while every tool
# connection is busy. (One served on the event loop checks it on the loop's own connection,
# with its reads and its edit: ``StorePool.in_place``.)
AUTH_CONNECTIONS = 4

# The prefix of the store's own tokens; any other bearer token is the issuer's to judge.
KB_TOKEN_PREFIX = "kbt_"

log = logging.getLogger(__name__)

quiet = Throttle(log)


def _challenge(params):
    """A ``WWW-Authenticate: Bearer`` value of ``(name, value)`` pairs (RFC 6750 3)."""
    quoted = ", ".join('%s="%s"' % (name, value.replace("\\", "\\\\").replace('"', '\\"'))
                       for name, value in params)
    return ("Bearer " + quoted).encode("latin-1", "replace")


class Auth:
    """Bearer tokens checked against the store, on connections of their own."""

    def __init__(self, settings):
        self.settings = settings
        self.connections = Connections(settings.db, AUTH_CONNECTIONS)
        self.tokens = None
        if settings.oauth_issuer:
            # Imported here: joserfc is the [oauth] extra's, needed only with an issuer.
            from ..oauth.bearer import AccessTokens
            from ..oauth.issuer import Issuer
            client = None
            if settings.oauth_client_id and settings.oauth_client_secret:
                client = (settings.oauth_client_id, settings.oauth_client_secret)
            self.tokens = AccessTokens(Issuer(settings.oauth_issuer).start(),
                                       settings.oauth_audience,
                                       subject_claim=settings.oauth_subject_claim,
                                       introspection_client=client)

    def borrow(self):
        """One of the token checks' store connections (``with``)."""
        return self.connections.borrow()

    def close(self):
        """Close the connections."""
        self.connections.close()

    def authenticate(self, req, store, routed=None):
        """The caller a bearer token names; 401 with WWW-Authenticate: Bearer otherwise, the
        reason logged (never the token). ``routed``: the request's MessageRoute, where it is known,
        so that a 401 names the scope its call needs."""
        value = req.header(b"authorization") or ""
        scheme, _, token = value.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            quiet.info("401", "401 for %s: %s", req.client, "no Authorization header" if not value
                       else "the Authorization header is not Bearer TOKEN")
            raise Refusal(401, refusal("Unauthorized: send Authorization: Bearer TOKEN (kb token "
                                       "create makes one%s)" % (
                                           ", or sign in at %s" % self.settings.oauth_issuer
                                           if self.tokens else "")),
                          [(b"WWW-Authenticate", self.challenge(req, *self._needs(routed)))])
        if self.tokens is not None and not token.startswith(KB_TOKEN_PREFIX):
            return self._issuers(req, store, token, routed)
        found = store.tokens.principal(token)
        if found is None:
            quiet.info("401", "401 for %s: %s", req.client, store.tokens.refusal(token))
            raise Refusal(401, refusal("Unauthorized: the token is not valid (unknown or "
                                       "revoked)"),
                          [(b"WWW-Authenticate", self.challenge(req, ("error", "invalid_token")))])
        # The connection may now use the slots kept for authenticated clients (h11_guard).
        req.scope[AUTHENTICATED] = True
        req.scope[CALLER] = found["name"]
        return Principal(found["name"], frozenset(found["grants"]), found["writes"])

    def _issuers(self, req, store, token, routed):
        """The Principal of a team issuer's access token: a person, with the knowledge bases
        its scopes and the store's grants (``kb grant``) give; 401 for a token the issuer did
        not make for this server, 503 while the issuer's keys cannot be fetched for a key not
        seen yet."""
        from ..oauth import scopes
        from ..oauth.bearer import TokenRefused
        from ..oauth.issuer import KeysUnavailable
        assert self.tokens is not None  # asked only where an issuer is configured
        try:
            identity = self.tokens.identity(token)
        except TokenRefused as exc:
            quiet.info("401", "401 for %s: %s", req.client, exc)
            raise Refusal(401, refusal("Unauthorized: the token is not valid here (%s)" % exc),
                          [(b"WWW-Authenticate", self.challenge(
                              req, ("error", exc.error), ("error_description", str(exc)),
                              *self._needs(routed)))]) from None
        except KeysUnavailable as exc:
            quiet.info("503", "503 for %s: %s", req.client, exc)
            raise Refusal(503, refusal("Service Unavailable: %s; retry shortly" % exc,
                                       data={"retryable": True, "reason": "issuer_unavailable"}),
                          [(b"Retry-After", b"%d" % RETRY_AFTER_S)]) from None
        modes = scopes.write_modes(scopes.rights(identity.scopes), self.settings.oauth_writes,
                                   store.grants.of(identity.subject, identity.groups))
        req.scope[AUTHENTICATED] = True
        req.scope[CALLER] = identity.subject
        return Principal(identity.subject, frozenset(modes), DENY.name,
                         kb_writes=frozenset(modes.items()), issuer=identity.issuer)

    def check_scope(self, req, routed, principal):
        """403 insufficient_scope for a writing tool called by an issuer's token on a
        knowledge base it may read but not write (one it may not read is the protocol's
        not-found, as for everyone)."""
        kb = routed.knowledge_base
        if (principal.issuer is None or routed.tool not in WAITING_TOOLS or kb is None
                or kb not in principal.grants or mode(principal.writes_for(kb)).edits):
            return
        from ..oauth.scopes import scope
        needed = scope(kb, "write")
        quiet.info("403", "403 for %s: %s has no %s", req.client, principal.name, needed)
        raise Refusal(403, refusal("Forbidden: this token may read knowledge base %s but not "
                                   "edit it; sign in again asking for the scope %s"
                                   % (kb, needed)),
                      [(b"WWW-Authenticate", self.challenge(
                          req, ("error", "insufficient_scope"), ("scope", needed),
                          ("error_description", "editing %s needs %s" % (kb, needed))))])

    def _needs(self, routed):
        """The ``scope`` a 401 names, for an issuer's clients to ask for: what the call needs
        (a read or write scope of the knowledge base it names), else ``--oauth-scopes``; none
        without an issuer. Only what the caller named itself: no knowledge base is disclosed."""
        if self.tokens is None:
            return ()
        from ..oauth.scopes import scope
        if routed is not None and routed.knowledge_base is not None:
            kb = routed.knowledge_base[:64]
            return (("scope", scope(kb, "write" if routed.tool in WAITING_TOOLS else "read")),)
        if self.settings.oauth_scopes:
            return (("scope", " ".join(self.settings.oauth_scopes)),)
        return ()

    def challenge(self, req, *params):
        """The WWW-Authenticate value: the realm, where to learn how to sign in (RFC 9728
        5.1), what it needs (RFC 6750 3), and ``params``."""
        pairs = [("realm", "kb-server")]
        if self.settings.authorization_server or self.tokens is not None:
            pairs.append(("resource_metadata", self.metadata_url(req)))
        pairs.extend(params)
        return _challenge(pairs)

    def authenticated(self, req):
        """On a worker thread: the caller, before a large body is read."""
        try:
            with self.connections.borrow() as store:
                return self.authenticate(req, store)
        except ToolError as exc:
            raise unavailable(req, exc) from None

    def metadata_url(self, req):
        """Where this server's OAuth protected-resource metadata is (RFC 9728)."""
        return "%s://%s%s%s" % (req.scope.get("scheme", "http"),
                                req.header(b"host") or "127.0.0.1",
                                req.scope.get("root_path", ""), METADATA_PATH)

    def metadata(self, req):
        """The RFC 9728 document naming the authorization server that issues our tokens."""
        resource = self.settings.oauth_audience or "%s://%s%s%s" % (
            req.scope.get("scheme", "http"), req.header(b"host"),
            req.scope.get("root_path", ""), MCP_PATH)
        document = {"resource": resource,
                    "authorization_servers": [self.settings.oauth_issuer
                                              or self.settings.authorization_server],
                    "bearer_methods_supported": ["header"], "resource_name": SERVER_NAME}
        if self.settings.oauth_scopes:
            # Only those the operator lists: the store's knowledge bases are nobody's business
            # before they sign in.
            document["scopes_supported"] = list(self.settings.oauth_scopes)
        return document
