"""Signing a person in to the pages at the team's issuer, with OpenID Connect.

With ``--oauth-issuer`` and ``--oauth-client-id`` (its secret in ``$KB_OAUTH_CLIENT_SECRET``)
the sign-in page offers "Sign in with ISSUER" beside the kb token form. ``/login/oidc`` starts
the authorization code flow of ``oauth.signin`` (PKCE, state, nonce) and keeps what must come
back, with the page to return to, in a short-lived cookie signed with the server's signing
secret (``kb_oidc``: HttpOnly, SameSite=Lax, so the issuer's redirect back brings it);
``/login/oidc/callback`` checks the state, exchanges the code, validates the ID token and the
access token the issuer made for this server (``resource``, RFC 8707), and hands the
person's identity to ``auth.WebSessions`` for a session. The access token is checked as
every access token is, so a person's rights on the pages are those their scopes give on
``/mcp``, with the store's grants (``kb grant``) beside them.

The redirect URI is ``--public-url`` (where people's browsers reach the server, behind a proxy
too) followed by ``/login/oidc/callback``; without it, the server's own address as the browser
reached it (its ``Host``, which the Host check has already held to the server's names).
Register that one at the issuer for the client.
"""

import base64
import hashlib
import hmac
import json
from urllib.parse import urlsplit

from ..oauth.bearer import TokenRefused
from ..oauth.signin import PENDING_TTL_S, CodeFlow, Pending, SignInFailed

PENDING_COOKIE = "kb_oidc"
CALLBACK_PATH = "/login/oidc/callback"
# What every sign-in asks for besides the operator's --oauth-scope list: an ID token, and the
# claims a team's issuer names a person by.
BASE_SCOPES = ("openid", "email", "profile")
# A pending cookie longer than this is not one of ours (its JSON is about 200 bytes).
PENDING_MAX = 2048


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class IssuerSignIn:
    """The pages' sign-in at one issuer, for the access tokens ``tokens`` checks."""

    def __init__(self, settings, tokens):
        self.settings = settings
        self.tokens = tokens
        # What the button says: the issuer's address without its scheme.
        self.name = urlsplit(settings.oauth_issuer).netloc + urlsplit(
            settings.oauth_issuer).path.rstrip("/")
        self.scope = " ".join(BASE_SCOPES + tuple(
            s for s in settings.oauth_scopes if s not in BASE_SCOPES))

    def redirect_uri(self, req):
        """Where the issuer sends the browser back: the public address, else this server as
        the browser reached it."""
        if self.settings.public_url:
            return self.settings.public_url + CALLBACK_PATH
        return "%s://%s%s%s" % (req.scope.get("scheme", "http"), req.header(b"host"),
                                req.scope.get("root_path", ""), CALLBACK_PATH)

    def _flow(self, req):
        return CodeFlow(self.tokens, self.settings.oauth_client_id,
                        self.settings.oauth_client_secret, self.redirect_uri(req), self.scope)

    def start(self, req, target):
        """``(the issuer's authorization URL, the pending cookie's value)`` of a new sign-in
        that returns to ``target`` (a path of this site)."""
        url, pending = self._flow(req).start()
        payload = _b64(json.dumps([pending.to_json(), target]).encode("utf-8"))
        return url, payload + "." + self._mac(payload)

    def finish(self, req, query, cookie):
        """``(the person's Identity, the path to return to)`` for the issuer's redirect
        ``query`` and the pending cookie; SignInFailed saying why not (KeysUnavailable
        while the issuer's keys cannot be fetched)."""
        pending, target = self._pending(cookie)
        answer = self._flow(req).finish(query, pending)
        try:
            identity = self.tokens.identity(str(answer.get("access_token", "")))
        except TokenRefused as exc:
            raise SignInFailed("the issuer signed you in, but its access token is not one this "
                               "server takes (%s): ask whoever runs the issuer to give this "
                               "client tokens for %s" % (exc, self.tokens.audience))
        if self.tokens.subject_claim == "sub" and \
                answer["id_claims"].get("sub") != identity.subject:
            raise SignInFailed("the issuer's ID token and access token name different people: "
                               "start again")
        return identity, target

    def _mac(self, payload):
        return hmac.new(self.settings.signing_secret, b"oidc-pending:" + payload.encode("ascii"),
                        hashlib.sha256).hexdigest()

    def _pending(self, cookie):
        """The Pending sign-in and target of a cookie this server signed; SignInFailed."""
        lost = SignInFailed("this browser did not start the sign-in here, or took longer than "
                            "%d minutes (its cookie is gone): start again" % (PENDING_TTL_S // 60))
        if not isinstance(cookie, str) or cookie.count(".") != 1 or len(cookie) > PENDING_MAX:
            raise lost
        payload, mac = cookie.split(".")
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise lost
        try:
            pending_json, target = json.loads(base64.urlsafe_b64decode(
                payload + "=" * (-len(payload) % 4)).decode("utf-8"))
        except (ValueError, TypeError):
            raise lost from None
        return Pending.from_json(pending_json), str(target)
