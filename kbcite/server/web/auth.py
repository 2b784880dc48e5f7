"""Signing in to the pages: a kb token exchanged for a session cookie, and one-time links.

A web session is a row of the store's sessions (``kbcite.sessions``), so every worker on the
store knows it, its idle time runs as a handshake session's, and revoking the token ends it
with the token's other sessions. The cookie holds the token's name and a random secret; the
store keeps only the secret's SHA-256 as the session's ID, with the token's grants and write
mode as the session's "capabilities" (a token's grants never change). The CSRF token of every
form is an HMAC of the secret under the server's signing secret.

A one-time link (``kb token link NAME``) is a session row too, of kind ``web-link``: the
link's code is its secret, it lasts ``LINK_TTL_S``, and using it deletes the row, so it
signs in once.
"""

import hashlib
import hmac
import secrets
import time
from http.cookies import CookieError, SimpleCookie

from ...writes import DENY, mode
from ..oauth.scopes import write_modes
from ...tokens import KIND_LINK, KIND_OIDC, KIND_WEB, LINK_TTL_S, pack, secret_digest, unpack
from ..calls import CALLER

COOKIE = "kb_session"
LOGIN_COOKIE = "kb_login"  # the sign-in form's CSRF token, before there is a session


# A session's idle time restarts at most this often (a write), not at every page (a read).
TOUCH_EVERY_S = 60


class Person:
    """Who is signed in: the token's name (or the person's, at the team's issuer), what they
    may read and how they may write each knowledge base, and this session's CSRF token."""

    __slots__ = ("name", "grants", "writes", "kb_writes", "review", "reviews", "issuer",
                 "csrf", "session_id", "kb")

    def __init__(self, name, grants, writes, csrf, session_id, review=False, issuer=None,
                 kb_writes=None, reviews=()):
        self.name = name
        self.grants = frozenset(grants)
        self.writes = writes
        # A person at the team's issuer: a write mode a knowledge base, from their scopes and
        # the store's grants; and the knowledge bases whose proposals they may decide.
        self.kb_writes = dict(kb_writes or {})
        self.review = bool(review)  # a token made with --review: every granted one
        self.reviews = frozenset(reviews)
        self.issuer = issuer
        self.csrf = csrf
        self.session_id = session_id
        self.kb = None  # the knowledge base of the page being served, if any

    def writes_for(self, kb_id):
        """The write mode of this person's changes to knowledge base ``kb_id``."""
        return self.kb_writes.get(kb_id, self.writes)

    @property
    def may_write(self):
        """Edit and Revert (of this page's knowledge base) need writes without asking."""
        return mode(self.writes_for(self.kb)).writes_pages

    @property
    def may_review(self):
        """Approve and Reject (on this page's knowledge base): a token made with --review, or
        a person whose scopes include ``kb:{kb}:review``."""
        return self.review or self.kb in self.reviews


def cookies(req):
    """The request's cookies as a dict (an unparsable header: none)."""
    raw = req.header(b"cookie")
    if not raw:
        return {}
    jar = SimpleCookie()
    try:
        jar.load(raw)
    except CookieError:
        return {}
    return {key: morsel.value for key, morsel in jar.items()}


def set_cookie(name, value, secure, max_age=None):
    """A Set-Cookie header: HttpOnly, SameSite=Lax, Secure under TLS, the whole site."""
    parts = ["%s=%s" % (name, value), "Path=/", "HttpOnly", "SameSite=Lax"]
    if secure:
        parts.append("Secure")
    if max_age is not None:
        parts.append("Max-Age=%d" % max_age)
    return (b"Set-Cookie", "; ".join(parts).encode("latin-1"))


class WebSessions:
    """The pages' sessions, kept in the store through the MCP app's token connections."""

    def __init__(self, connections, settings):
        self.connections = connections
        self.settings = settings
        self.idle_s = settings.web_session_timeout
        self.per_token = settings.web_sessions_per_token

    def csrf_for(self, secret):
        """The CSRF token of the session (or sign-in form) with this secret."""
        return hmac.new(self.settings.signing_secret, b"csrf:" + secret.encode("utf-8"),
                        hashlib.sha256).hexdigest()

    def person(self, req):
        """The person the request's session cookie names, or None (no cookie, an ended
        session, a revoked token)."""
        found = unpack(cookies(req).get(COOKIE))
        if found is None:
            return None
        name, secret = found
        session_id = secret_digest(secret)
        with self.connections.borrow() as store:
            row = store.sessions.find(session_id, name, idle_s=self.idle_s)
            if row is None or row["protocol_version"] not in (KIND_WEB, KIND_OIDC):
                return None
            caps = row["capabilities"]
            if row["protocol_version"] == KIND_OIDC:
                if time.time() - caps["signed_in"] > self.idle_s:
                    store.sessions.end(session_id, name)  # a sign-in lasts a working day
                    return None
                # The store's grants as they are now: kb grant remove takes effect at once.
                modes = write_modes({kb: set(rights) for kb, rights in caps["rights"].items()},
                                    self.settings.oauth_writes,
                                    store.grants.of(name, caps["groups"]))
            if time.time() * 1000000 - row["seen_us"] > TOUCH_EVERY_S * 1000000:
                store.sessions.touch(session_id)
        req.scope[CALLER] = name  # the access log's name for the request, never the cookie
        csrf = self.csrf_for(secret)
        if row["protocol_version"] == KIND_OIDC:
            return Person(name, modes, DENY.name, csrf, session_id, issuer=caps["issuer"],
                          kb_writes=modes, reviews=[kb for kb, rights in caps["rights"].items()
                                                    if "review" in rights])
        return Person(name, caps["grants"], caps["writes"], csrf, session_id,
                      caps.get("review", False))

    def csrf_ok(self, req, person, form):
        """Whether a POST carries the CSRF token of its session (or of its sign-in form)."""
        sent = (form.get("csrf") or [""])[0]
        if person is not None:
            return hmac.compare_digest(sent, person.csrf)
        secret = cookies(req).get(LOGIN_COOKIE)
        return bool(secret) and hmac.compare_digest(sent, self.csrf_for(secret))

    def login_form(self):
        """``(the CSRF token, its cookie secret)`` for a new sign-in form."""
        secret = secrets.token_urlsafe(32)
        return self.csrf_for(secret), secret

    def sign_in(self, token):
        """The cookie value of a new session for a live ``token``, or None."""
        with self.connections.borrow() as store:
            found = store.tokens.principal(token)
            if found is None:
                return None
            return self._open(store, found["name"], found["grants"], found["writes"],
                              found["review"])

    def sign_in_link(self, code):
        """The cookie value of a new session for a one-time link's code, or None (used,
        expired, unknown, or its token revoked since)."""
        found = unpack(code)
        if found is None:
            return None
        name, secret = found
        link_id = secret_digest(secret)
        with self.connections.borrow() as store:
            row = store.sessions.find(link_id, name, idle_s=LINK_TTL_S)
            if row is None or row["protocol_version"] != KIND_LINK:
                return None
            if not store.sessions.end(link_id, name):  # another use took it first
                return None
            caps = row["capabilities"]
            return self._open(store, name, caps["grants"], caps["writes"],
                              caps.get("review", False))

    def sign_in_person(self, identity):
        """The cookie value of a new session for a person the team's issuer signed in (an
        ``oauth.bearer.Identity``): their rights as their scopes say, their groups for the
        store's grants, their issuer, and when they signed in."""
        from ..oauth.scopes import rights
        secret = secrets.token_urlsafe(32)
        with self.connections.borrow() as store:
            store.sessions.open(
                secret_digest(secret), identity.subject, KIND_OIDC,
                {"issuer": identity.issuer, "groups": sorted(identity.groups),
                 "rights": {kb: sorted(r) for kb, r in rights(identity.scopes).items()},
                 "signed_in": time.time()}, idle_s=self.idle_s, per_token=self.per_token)
        return pack(identity.subject, secret)

    def _open(self, store, name, grants, writes, review):
        secret = secrets.token_urlsafe(32)
        store.sessions.open(secret_digest(secret), name, KIND_WEB,
                            {"grants": sorted(grants), "writes": writes, "review": review},
                            idle_s=self.idle_s, per_token=self.per_token)
        return pack(name, secret)

    def sign_out(self, person):
        """End the person's session."""
        with self.connections.borrow() as store:
            store.sessions.end(person.session_id, person.name)
