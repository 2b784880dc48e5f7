"""Access tokens of a team's issuer, checked locally: keys cached, every refusal its reason.

The issuer here is a stand-in for its two documents (a fetch function and a clock the test
moves), with keys made by the test; the real authorization server's tests drive the same code
over HTTP.
"""

import base64
import json

import pytest

pytest.importorskip("joserfc")
from joserfc import jwt  # noqa: E402
from joserfc.jwk import ECKey, OctKey, RSAKey  # noqa: E402

from kbcite.server.oauth import scopes  # noqa: E402
from kbcite.server.oauth.bearer import AccessTokens, TokenRefused  # noqa: E402
from kbcite.server.oauth.issuer import (  # noqa: E402
    REFRESH_MIN_S, Issuer, IssuerError, KeysUnavailable, check_issuer_url, max_age,
    metadata_urls,
)

ISSUER = "https://id.example.com"
AUDIENCE = "https://kb.example.com/mcp"
NOW = 1_800_000_000


class FakeIssuer:
    """The issuer's documents as a fetch function: counts fetches, can be taken down."""

    def __init__(self, keys, metadata=None):
        self.keys = keys
        self.metadata = metadata if metadata is not None else {
            "issuer": ISSUER, "jwks_uri": ISSUER + "/jwks",
            "id_token_signing_alg_values_supported": ["RS256", "ES256"]}
        self.fetched = []
        self.down = False
        self.cache_control = "max-age=600"

    def __call__(self, url, timeout=None):
        self.fetched.append(url)
        if self.down:
            raise OSError("connection refused")
        if url == ISSUER + "/jwks":
            return ({"keys": [k.as_dict(private=False) for k in self.keys]},
                    {"Cache-Control": self.cache_control})
        if url == ISSUER + "/.well-known/oauth-authorization-server":
            return dict(self.metadata), {}
        raise OSError("404 for %s" % url)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def rsa(kid):
    return RSAKey.generate_key(2048, parameters={"kid": kid, "alg": "RS256", "use": "sig"})


@pytest.fixture(scope="module")
def keys():
    return {"k1": rsa("k1"), "k2": rsa("k2"), "other": rsa("k1"),
            "ec": ECKey.generate_key("P-256", parameters={"kid": "e1", "alg": "ES256"})}


def claims(**extra):
    value = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": NOW + 300,
             "iat": NOW, "scope": "kb:support:read kb:support:write openid",
             "email": "alice@example.com"}
    value.update(extra)
    return {k: v for k, v in value.items() if v is not None}


def sign(key, alg="RS256", kid=None, **extra):
    header = {"alg": alg, "typ": "at+jwt"}
    if kid or key.kid:
        header["kid"] = kid or key.kid
    return jwt.encode(header, claims(**extra), key, algorithms=[alg])


def unsigned(**extra):
    part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return part({"alg": "none", "kid": "k1"}) + "." + part(claims(**extra)) + "."


def checker(fake, clock=None, **options):
    issuer = Issuer(ISSUER, fetch=fake, clock=clock or Clock()).start()
    return AccessTokens(issuer, AUDIENCE, clock=lambda: NOW, **options)


def test_a_valid_token_names_its_subject_issuer_and_scopes(keys):
    tokens = checker(FakeIssuer([keys["k1"], keys["k2"]]))
    identity = tokens.identity(sign(keys["k2"]))
    assert identity.subject == "alice" and identity.issuer == ISSUER
    assert identity.scopes == {"kb:support:read", "kb:support:write", "openid"}
    assert checker(FakeIssuer([keys["k1"]]), subject_claim="email").identity(
        sign(keys["k1"])).subject == "alice@example.com"


@pytest.mark.parametrize("case, token, words", [
    ("another audience", lambda k: sign(k["k1"], aud="https://other.example.com/mcp"),
     "not for this server"),
    ("a list of other audiences", lambda k: sign(k["k1"], aud=["a", "b"]), "audience"),
    ("expired", lambda k: sign(k["k1"], exp=NOW - 61), "expired"),
    ("not yet valid", lambda k: sign(k["k1"], nbf=NOW + 61), "not valid before"),
    ("no exp", lambda k: sign(k["k1"], exp=None), "no exp"),
    ("another issuer", lambda k: sign(k["k1"], iss="https://evil.example.com"), "issued by"),
    ("wrongly signed", lambda k: sign(k["other"]), "signature does not verify"),
    ("alg none", lambda k: unsigned(), "'none'"),
    ("HS256 with the public key as secret",
     lambda k: jwt.encode({"alg": "HS256", "kid": "k1"}, claims(),
                          OctKey.import_key(json.dumps(k["k1"].as_dict(private=False))),
                          algorithms=["HS256"]), "'HS256'"),
    ("an unknown kid", lambda k: sign(k["k2"]), "no key 'k2'"),
    ("not a JWT", lambda k: "opaque-token-value", "not a JWT"),
    ("a subject missing", lambda k: sign(k["k1"], sub=None), "no sub claim"),
    ("garbage", lambda k: "a.b.c", "base64url"),
])
def test_each_bad_token_is_refused_with_its_reason(keys, case, token, words):
    tokens = checker(FakeIssuer([keys["k1"]]))
    with pytest.raises(TokenRefused) as refused:
        tokens.identity(token(keys))
    assert words in str(refused.value), case
    assert refused.value.error == "invalid_token"


def test_the_clock_skew_allowance_is_small_and_both_ways(keys):
    tokens = checker(FakeIssuer([keys["k1"]]))
    assert tokens.identity(sign(keys["k1"], exp=NOW - 59)).subject == "alice"
    assert tokens.identity(sign(keys["k1"], nbf=NOW + 59)).subject == "alice"


def test_a_key_type_that_does_not_fit_the_algorithm_is_refused(keys):
    fake = FakeIssuer([keys["k1"]])
    tokens = checker(fake)
    forged = sign(keys["ec"], alg="ES256", kid="k1")
    with pytest.raises(TokenRefused, match="does not fit key"):
        tokens.identity(forged)


def test_an_unknown_kid_refreshes_the_keys_at_most_once_a_minute(keys):
    fake, clock = FakeIssuer([keys["k1"]]), Clock()
    tokens = checker(fake, clock)
    start = len(fake.fetched)
    for _ in range(50):
        with pytest.raises(TokenRefused):
            tokens.identity(sign(keys["k2"]))
    clock.now += 1
    assert fake.fetched[start:] == [], "a refresh within the minute after start"
    fake.keys.append(keys["k2"])          # the issuer rotates in a new key
    clock.now += REFRESH_MIN_S
    for _ in range(50):
        assert tokens.identity(sign(keys["k2"])).subject == "alice"
    assert fake.fetched[start:] == [ISSUER + "/jwks"], "one fetch for the rotation"
    for _ in range(50):
        tokens.identity(sign(keys["k1"]))
    assert len(fake.fetched) == start + 1, "known keys are never refetched within max-age"


def test_known_keys_work_while_the_issuer_is_down_and_new_ones_are_retryable(keys):
    fake, clock = FakeIssuer([keys["k1"]]), Clock()
    tokens = checker(fake, clock)
    fake.down = True
    clock.now += 10_000                   # past max-age and the refresh interval
    assert tokens.identity(sign(keys["k1"])).subject == "alice"
    clock.now += REFRESH_MIN_S
    with pytest.raises(KeysUnavailable, match="cannot be fetched"):
        tokens.identity(sign(keys["k2"]))


def test_the_cache_follows_max_age(keys):
    fake, clock = FakeIssuer([keys["k1"]]), Clock()
    fake.cache_control = "public, max-age=120"
    tokens = checker(fake, clock)
    start = len(fake.fetched)
    clock.now += 100
    tokens.identity(sign(keys["k1"]))
    assert len(fake.fetched) == start
    clock.now += 30
    tokens.identity(sign(keys["k1"]))
    assert len(fake.fetched) == start + 1


@pytest.mark.parametrize("headers, seconds", [
    ({}, 300.0), ({"Cache-Control": "max-age=60"}, 60.0), ({"Cache-Control": "no-store"}, 0.0),
    ({"Cache-Control": "max-age=999999"}, 3600.0), ({"Cache-Control": "max-age=x"}, 300.0),
])
def test_max_age(headers, seconds):
    assert max_age(headers) == seconds


@pytest.mark.parametrize("url, words", [
    ("http://id.example.com", "must use https"), ("ftp://id.example.com", "https:// URL"),
    ("https://id.example.com/?x=1", "no query"), ("", "https:// URL"),
])
def test_issuer_urls_that_are_not_https_are_refused(url, words):
    with pytest.raises(IssuerError, match=words):
        check_issuer_url(url)


def test_loopback_issuers_may_be_plain_http():
    for url in ("http://127.0.0.1:8080", "http://localhost:1/", "http://[::1]:9"):
        assert check_issuer_url(url) == url.rstrip("/")


def test_metadata_is_looked_for_where_the_specification_says():
    assert metadata_urls("https://a.example") == [
        "https://a.example/.well-known/oauth-authorization-server",
        "https://a.example/.well-known/openid-configuration"]
    assert metadata_urls("https://a.example/realms/t") == [
        "https://a.example/.well-known/oauth-authorization-server/realms/t",
        "https://a.example/.well-known/openid-configuration/realms/t",
        "https://a.example/realms/t/.well-known/openid-configuration"]


@pytest.mark.parametrize("metadata, words", [
    ({"issuer": ISSUER}, "no jwks_uri"),
    ({"issuer": "https://evil.example.com", "jwks_uri": ISSUER + "/jwks"}, "names the issuer"),
])
def test_an_unusable_issuer_is_one_line_at_start(keys, metadata, words):
    with pytest.raises(IssuerError, match=words):
        Issuer(ISSUER, fetch=FakeIssuer([keys["k1"]], metadata)).start()


def test_an_unreachable_issuer_is_one_line_at_start(keys):
    fake = FakeIssuer([keys["k1"]])
    fake.down = True
    with pytest.raises(IssuerError, match="unreachable") as refused:
        Issuer(ISSUER, fetch=fake).start()
    assert "\n" not in str(refused.value)


def test_scopes_give_rights_and_the_broader_implies_the_narrower():
    assert scopes.rights({"kb:support:write", "kb:docs:review", "kb:x y:read", "openid",
                          "kb:support:admin"}) == {
        "support": {"read", "write"}, "docs": {"read", "review"}}
    assert scopes.scope("support", "write") == "kb:support:write"
