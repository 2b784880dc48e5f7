"""The bearer token: who is calling (a ``Principal``), the 401 challenge when nobody is, and the
RFC 9728 document that names the authorization server issuing the tokens."""

import logging

from ...errors import ToolError
from ..pool import Connections
from ..inbound import SERVER_NAME
from ..session import Principal
from ..throttle import Throttle
from .request import AUTHENTICATED, MCP_PATH, METADATA_PATH, Refusal, refusal, unavailable

# Token checks have connections of their own: a request is authenticated even while every tool
# connection is busy.
AUTH_CONNECTIONS = 4

log = logging.getLogger(__name__)

quiet = Throttle(log)


class Auth:
    """Bearer tokens checked against the store, on connections of their own."""

    def __init__(self, settings):
        self.settings = settings
        self.connections = Connections(settings.db, AUTH_CONNECTIONS)

    def borrow(self):
        """One of the token checks' store connections (``with``)."""
        return self.connections.borrow()

    def close(self):
        """Close the connections."""
        self.connections.close()

    def authenticate(self, req, store):
        """The caller a bearer token names; 401 with WWW-Authenticate: Bearer otherwise, the
        reason logged (never the token)."""
        value = req.header(b"authorization") or ""
        scheme, _, token = value.partition(" ")
        token = token.strip()
        challenge = 'Bearer realm="kb-server"'
        if self.settings.authorization_server:
            challenge += ', resource_metadata="%s"' % self.metadata_url(req)
        if scheme.lower() != "bearer" or not token:
            quiet.info("401", "401 for %s: %s", req.client, "no Authorization header" if not value
                       else "the Authorization header is not Bearer TOKEN")
            raise Refusal(401, refusal("Unauthorized: send Authorization: Bearer TOKEN (kb token "
                                       "create makes one)"),
                          [(b"WWW-Authenticate", challenge.encode("latin-1"))])
        found = store.tokens.principal(token)
        if found is None:
            quiet.info("401", "401 for %s: %s", req.client, store.tokens.refusal(token))
            raise Refusal(401, refusal("Unauthorized: the token is not valid (unknown or "
                                       "revoked)"),
                          [(b"WWW-Authenticate",
                            (challenge + ', error="invalid_token"').encode("latin-1"))])
        # The connection may now use the slots kept for authenticated clients (h11_guard).
        req.scope[AUTHENTICATED] = True
        return Principal(found["name"], frozenset(found["grants"]), found["writes"])

    def authenticated(self, req):
        """On a worker thread: the caller, before a large body is read."""
        try:
            with self.connections.borrow() as store:
                return self.authenticate(req, store)
        except ToolError as exc:
            raise unavailable(req, exc)

    def metadata_url(self, req):
        """Where this server's OAuth protected-resource metadata is (RFC 9728)."""
        return "%s://%s%s%s" % (req.scope.get("scheme", "http"),
                                req.header(b"host") or "127.0.0.1",
                                req.scope.get("root_path", ""), METADATA_PATH)

    def metadata(self, req):
        """The RFC 9728 document naming the authorization server that issues our tokens."""
        return {"resource": "%s://%s%s%s" % (req.scope.get("scheme", "http"),
                                             req.header(b"host"),
                                             req.scope.get("root_path", ""), MCP_PATH),
                "authorization_servers": [self.settings.authorization_server],
                "bearer_methods_supported": ["header"], "resource_name": SERVER_NAME}
