"""A person's sign-in at the team's issuer, as a web page does it: the authorization code flow
with PKCE (RFC 7636), ``state`` and ``nonce`` checked, the ID token validated.

``CodeFlow.start`` gives the URL to send the browser to and what must be kept until it comes
back (``Pending``: the state, the nonce and the PKCE verifier, to keep server-side or in a
signed cookie, never in the URL); ``CodeFlow.finish`` takes the query the issuer redirected
with and the pending sign-in, exchanges the code at the token endpoint, and returns the
tokens with the ID token's claims checked: its signature by the issuer's keys, ``iss``,
``aud`` naming this client (``azp`` too where it names several), ``exp``, and the ``nonce``
sent. The access token it brings (asked for with ``resource``, RFC 8707) is what says which
knowledge bases the person may use, checked as every access token is (``bearer``).
"""

import base64
import hashlib
import hmac
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from .bearer import TokenRefused
from .issuer import FETCH_TIMEOUT_S

# A sign-in left unfinished this long is refused when the browser comes back (seconds).
PENDING_TTL_S = 600


class SignInFailed(Exception):
    """The sign-in cannot be finished: the message says why, in a person's words."""


@dataclass(frozen=True)
class Pending:
    """What a started sign-in must keep until the browser comes back."""

    state: str
    nonce: str
    verifier: str
    started: float

    def to_json(self):
        """The pending sign-in as a string (to keep in a signed, short-lived cookie)."""
        return json.dumps([self.state, self.nonce, self.verifier, self.started])

    @classmethod
    def from_json(cls, text):
        """The Pending of ``to_json``'s string; SignInFailed when it is not one."""
        try:
            state, nonce, verifier, started = json.loads(text)
            return cls(str(state), str(nonce), str(verifier), float(started))
        except (TypeError, ValueError):
            raise SignInFailed("the sign-in was not started here (or its cookie is damaged): "
                               "start again") from None


def _challenge(verifier):
    """RFC 7636's S256 code challenge of a verifier."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class CodeFlow:
    """One web client's sign-in at one issuer, for one resource (this server's MCP URL)."""

    def __init__(self, access_tokens, client_id, client_secret, redirect_uri, scope,
                 clock=time.time):
        self.tokens = access_tokens
        self.issuer = access_tokens.issuer
        self.client_id = client_id
        self.client_secret = client_secret
        self.redirect_uri = redirect_uri
        self.scope = scope
        self.clock = clock

    def start(self):
        """``(the authorization URL, Pending)`` of a new sign-in."""
        pending = Pending(secrets.token_urlsafe(24), secrets.token_urlsafe(24),
                          secrets.token_urlsafe(48), self.clock())
        query = urllib.parse.urlencode({
            "response_type": "code", "client_id": self.client_id,
            "redirect_uri": self.redirect_uri, "scope": self.scope, "state": pending.state,
            "nonce": pending.nonce, "code_challenge": _challenge(pending.verifier),
            "code_challenge_method": "S256", "resource": self.tokens.audience})
        return self.issuer.metadata["authorization_endpoint"] + "?" + query, pending

    def finish(self, query, pending):
        """The token endpoint's answer for the redirect's ``query`` (a dict of strings), its
        ID token's claims under ``id_claims``; SignInFailed saying why it cannot be."""
        if not hmac.compare_digest(str(query.get("state", "")), pending.state):
            raise SignInFailed("the sign-in's state does not match the one sent: start again "
                               "from this server's sign-in page")
        if self.clock() - pending.started > PENDING_TTL_S:
            raise SignInFailed("the sign-in took longer than %d minutes: start again"
                               % (PENDING_TTL_S // 60))
        if "error" in query:
            raise SignInFailed("the issuer did not sign you in: %s %s" % (
                query["error"], query.get("error_description", "")))
        if "iss" in query and query["iss"].rstrip("/") != self.issuer.url:
            raise SignInFailed("the answer came from %r, not from %s (RFC 9207): start again"
                               % (query["iss"], self.issuer.url))
        if not query.get("code"):
            raise SignInFailed("the issuer's answer has no code: start again")
        answer = self._exchange(query["code"], pending.verifier)
        try:
            claims = self.tokens.verified_claims(str(answer.get("id_token", "")))
        except TokenRefused as exc:
            raise SignInFailed("the issuer's ID token is not valid: %s" % exc) from None
        self._check_id_claims(claims, pending.nonce)
        return dict(answer, id_claims=claims)

    def _exchange(self, code, verifier):
        """The token endpoint's JSON for an authorization code."""
        body = urllib.parse.urlencode({
            "grant_type": "authorization_code", "code": code, "redirect_uri": self.redirect_uri,
            "code_verifier": verifier, "resource": self.tokens.audience}).encode("ascii")
        basic = base64.b64encode(("%s:%s" % (urllib.parse.quote(self.client_id, safe=""),
                                             urllib.parse.quote(self.client_secret, safe="")))
                                 .encode("utf-8")).decode("ascii")
        request = urllib.request.Request(
            self.issuer.metadata["token_endpoint"], data=body, method="POST",
            headers={"Content-Type": "application/x-www-form-urlencoded",
                     "Accept": "application/json", "Authorization": "Basic " + basic})
        try:
            with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:  # noqa
                answer = json.loads(response.read(1 << 20).decode("utf-8"))
        except urllib.error.HTTPError as refused:
            raise SignInFailed(
                "the issuer refused the sign-in's code (%d %s): start again"
                % (refused.code, refused.read(300).decode("utf-8", "replace"))) from None
        except (OSError, ValueError) as exc:
            raise SignInFailed("the issuer cannot be reached to finish the sign-in: %s"
                               % exc) from None
        if not isinstance(answer, dict) or "access_token" not in answer:
            raise SignInFailed("the issuer's token endpoint answered without an access token")
        return answer

    def _check_id_claims(self, claims, nonce):
        """OpenID Connect Core 3.1.3.7: the ID token is for this client, current, and ours."""
        if claims.get("iss", "").rstrip("/") != self.issuer.url:
            raise SignInFailed("the ID token was issued by %r, not %s"
                               % (claims.get("iss"), self.issuer.url))
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences or []
        if self.client_id not in audiences or (len(audiences) > 1
                                               and claims.get("azp") != self.client_id):
            raise SignInFailed("the ID token is for %s, not for this server's client %s"
                               % (claims.get("aud"), self.client_id))
        expires = claims.get("exp")
        if not isinstance(expires, (int, float)) or self.clock() > expires + self.tokens.leeway:
            raise SignInFailed("the ID token has expired (or names no exp): sign in again")
        if not hmac.compare_digest(str(claims.get("nonce", "")), nonce):
            raise SignInFailed("the ID token's nonce is not the one sent (a replayed answer): "
                               "start again")
