"""An access token from the team's issuer, checked here: whose it is and what it may do.

A JWT access token (RFC 9068) is checked locally against the issuer's published keys: only
asymmetric algorithms, and only those the issuer names (never ``none``, never an HMAC, whose
"secret" would be the issuer's public key); the key's own ``alg`` and type must agree with the
header's; then ``iss`` equal to the issuer, ``aud`` naming this resource (RFC 8707: a token
minted for another server is refused, the specification's rule against token passthrough),
``exp`` required and ``nbf`` honoured, each with a small clock-skew allowance. An opaque token
is asked about at the issuer's RFC 7662 introspection endpoint, where it offers one and the
server was given credentials for it; introspection is asked every time, so a revoked session
is refused at its next request.
"""

import base64
import json
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OKPKey, RSAKey

from .issuer import FETCH_TIMEOUT_S, KeysUnavailable
from .scopes import SUBJECT_CLAIMS

# The signatures a resource server can check without holding the signer's secret, by the key
# type each needs. HS* is absent on purpose: with a published key it is forgeable.
ASYMMETRIC = {"RS256": "RSA", "RS384": "RSA", "RS512": "RSA", "PS256": "RSA", "PS384": "RSA",
              "PS512": "RSA", "ES256": "EC", "ES384": "EC", "ES512": "EC", "EdDSA": "OKP"}
KEY_CLASSES: dict[str, Any] = {"RSA": RSAKey, "EC": ECKey, "OKP": OKPKey}
# Where an issuer names no algorithm, RFC 9068 2.1's default and OpenID Connect's.
DEFAULT_ALGORITHMS = frozenset({"RS256"})
# Clocks of the issuer and of this server may disagree by this much (seconds) either way.
LEEWAY_S = 60
# A bearer token longer than this is refused before any parsing (a JWT is a few KB at most).
TOKEN_MAX_CHARS = 16384


class TokenRefused(Exception):
    """A token this server does not accept: ``error`` is RFC 6750's code, the message why."""

    def __init__(self, message, error="invalid_token"):
        super().__init__(message)
        self.error = error


@dataclass(frozen=True)
class Identity:
    """Who a valid token speaks for: the subject (by the configured claim), the issuer, the
    scopes and groups it carries, and when it expires."""

    subject: str
    issuer: str
    scopes: frozenset = field(default_factory=frozenset)
    groups: frozenset = field(default_factory=frozenset)
    expires: float = 0.0


def _b64json(segment, what):
    """A base64url JSON object of a JWT, or TokenRefused."""
    try:
        padded = segment + "=" * (-len(segment) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8"))
    except (ValueError, UnicodeError):
        raise TokenRefused("the token's %s is not base64url JSON" % what) from None
    if not isinstance(value, dict):
        raise TokenRefused("the token's %s is not a JSON object" % what)
    return value


def _words(value):
    """A scope string or list as a set of words; anything else as none."""
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(v for v in value if isinstance(v, str))
    return frozenset()


def _number(claims, name):
    """A NumericDate claim, or None where absent; TokenRefused where it is not a number."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TokenRefused("the token's %s is not a number of seconds" % name)
    return float(value)


class AccessTokens:
    """The checks of one issuer's access tokens for one resource (this server's MCP URL)."""

    def __init__(self, issuer, audience, subject_claim="sub", leeway=LEEWAY_S,
                 clock=time.time, introspection_client=None):
        if subject_claim not in SUBJECT_CLAIMS:
            raise ValueError("the subject claim must be one of %s, got %r"
                             % (", ".join(SUBJECT_CLAIMS), subject_claim))
        self.issuer = issuer
        self.audience = audience
        self.subject_claim = subject_claim
        self.leeway = leeway
        self.clock = clock
        # (client_id, client_secret) for RFC 7662, where opaque tokens are to be accepted.
        self.introspection_client = introspection_client
        self.algorithms = (issuer.signing_algorithms or DEFAULT_ALGORITHMS) & set(ASYMMETRIC)
        # Each published key made into a key object once (that is most of a check's cost),
        # by its JSON: a rotated key with the same kid is another entry.
        self._keys = {}

    def identity(self, token):
        """The Identity of a valid token; TokenRefused saying why, or KeysUnavailable."""
        if not isinstance(token, str) or not token or len(token) > TOKEN_MAX_CHARS:
            raise TokenRefused("the token is empty or longer than %d characters"
                               % TOKEN_MAX_CHARS)
        if token.count(".") == 2:
            claims = self.verified_claims(token)
        elif self.introspection_client and self.issuer.introspection_endpoint:
            claims = self._introspected(token)
        else:
            raise TokenRefused("the token is not a JWT, and the issuer's introspection is not "
                               "configured here")
        return self._checked(claims)

    def verified_claims(self, token):
        """The claims of a JWT whose signature one of the issuer's keys verifies (no claim
        checked yet: an ID token's are not an access token's); TokenRefused otherwise."""
        if token.count(".") != 2 or len(token) > TOKEN_MAX_CHARS:
            raise TokenRefused("the token is not a JWT of at most %d characters"
                               % TOKEN_MAX_CHARS)
        header = _b64json(token.split(".", 1)[0], "header")
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise TokenRefused("the token is signed with %r; this server accepts %s from this "
                               "issuer" % (alg, ", ".join(sorted(self.algorithms))))
        if "crit" in header:
            raise TokenRefused("the token has critical header parameters this server does not "
                               "know (%s)" % header.get("crit"))
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRefused("the token's kid is not a string")
        jwk = self.issuer.key(kid)
        if jwk is None:
            raise TokenRefused("the issuer has no key %r (its key set was refreshed within the "
                               "last minute)" % (kid,))
        if jwk.get("kty") != ASYMMETRIC[alg] or jwk.get("alg", alg) != alg:
            raise TokenRefused("the token's algorithm %s does not fit key %r (%s, %s)"
                               % (alg, kid, jwk.get("kty"), jwk.get("alg", "any algorithm")))
        try:
            return dict(jwt.decode(token, self._key(jwk), algorithms=[alg]).claims)
        except (JoseError, ValueError, TypeError) as exc:
            raise TokenRefused("the token's signature does not verify (%s)"
                               % (getattr(exc, "error", None) or type(exc).__name__)) from None

    def _key(self, jwk):
        """The key object of a published JWK, made once."""
        cache_key = json.dumps(jwk, sort_keys=True)
        key = self._keys.get(cache_key)
        if key is None:
            if len(self._keys) > 64:  # an issuer publishes a handful; rotations age out
                self._keys.clear()
            key = self._keys[cache_key] = KEY_CLASSES[jwk["kty"]].import_key(jwk)
        return key

    def _introspected(self, token):
        """RFC 7662: the issuer's word on an opaque token, asked now."""
        client_id, secret = self.introspection_client
        body = urllib.parse.urlencode({"token": token, "token_type_hint": "access_token"})
        basic = base64.b64encode(("%s:%s" % (urllib.parse.quote(client_id, safe=""),
                                             urllib.parse.quote(secret, safe="")))
                                 .encode("utf-8")).decode("ascii")
        request = urllib.request.Request(
            self.issuer.introspection_endpoint, data=body.encode("ascii"), method="POST",
            headers={"Content-Type": "application/x-www-form-urlencoded",
                     "Accept": "application/json", "Authorization": "Basic " + basic})
        try:
            with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:  # noqa
                answer = json.loads(response.read(1 << 20).decode("utf-8"))
        except (OSError, ValueError) as exc:
            raise KeysUnavailable("the issuer's introspection endpoint cannot be asked: %s"
                                  % (getattr(exc, "reason", None) or exc)) from None
        if not isinstance(answer, dict) or answer.get("active") is not True:
            raise TokenRefused("the issuer says the token is not active (revoked, expired or "
                               "not its)")
        return answer

    def _checked(self, claims):
        """The Identity of claims whose issuer, audience and times are this server's."""
        if claims.get("iss", "").rstrip("/") != self.issuer.url:
            raise TokenRefused("the token was issued by %r, not by %s"
                               % (claims.get("iss"), self.issuer.url))
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences
        if not isinstance(audiences, list) or self.audience not in audiences:
            raise TokenRefused("the token is for the audience %s, not for this server (%s): a "
                               "token must be requested with resource=%s"
                               % (claims.get("aud"), self.audience, self.audience))
        now = self.clock()
        expires = _number(claims, "exp")
        if expires is None:
            raise TokenRefused("the token has no exp: an access token must expire")
        if now > expires + self.leeway:
            raise TokenRefused("the token expired at %d (now %d)" % (expires, now))
        not_before = _number(claims, "nbf")
        if not_before is not None and now + self.leeway < not_before:
            raise TokenRefused("the token is not valid before %d (now %d)" % (not_before, now))
        subject = claims.get(self.subject_claim)
        if not isinstance(subject, str) or not subject.strip():
            raise TokenRefused("the token has no %s claim to name its holder by"
                               % self.subject_claim)
        return Identity(subject=subject, issuer=self.issuer.url,
                        scopes=_words(claims.get("scope")) | _words(claims.get("scp")),
                        groups=_words(claims.get("groups")), expires=expires)
