"""An OAuth 2.1 / OpenID Connect issuer as a resource server sees it: its metadata and its keys.

The server validates access tokens locally, so it needs two documents of the issuer: its
metadata (RFC 8414 or OpenID Connect Discovery, tried in the order the MCP specification's
authorization section gives) and the key set its ``jwks_uri`` names. Both are fetched at start
(a wrong issuer is one line there, not a refusal per request later), then kept for as long as
their own ``Cache-Control: max-age`` says. A token that names a key the cached set lacks makes
the set be fetched again at once, for a rotation, but never more than once a minute whatever
the load: tokens with made-up key IDs cost the issuer one request a minute, not one each. If the
set cannot be fetched then, tokens signed with keys already known keep working and the others
are refused as a retryable 503 (``KeysUnavailable``).
"""

import ipaddress
import json
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

# A fresh set at most this often (seconds), and an unknown key ID answered from the cache in
# between: one fetch a minute under any load (the bound), and a rotation seen within it.
REFRESH_MIN_S = 60.0
# How long documents are kept when the issuer's response names no max-age, and the longest we
# keep them whatever it names: a key the issuer withdrew is distrusted within the hour.
DEFAULT_MAX_AGE_S = 300.0
MAX_AGE_CAP_S = 3600.0
# One fetch may take this long: the server's start and a refresh both wait on it.
FETCH_TIMEOUT_S = 5.0
# A metadata document or key set larger than this is not an issuer's.
DOCUMENT_MAX_BYTES = 1 << 20


class IssuerError(Exception):
    """The issuer cannot be used: a bad URL, unreachable, or a document without what we need."""


class KeysUnavailable(Exception):
    """A token names a key we do not have, and the issuer's key set cannot be fetched now."""


def is_loopback(host):
    """Whether ``host`` names this machine (``localhost`` or a loopback address)."""
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_issuer_url(url, option="--oauth-issuer"):
    """``url`` without a trailing slash, or IssuerError: https only, except on loopback."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise IssuerError("%s must be an https:// URL of the issuer, got %r" % (option, url))
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise IssuerError("%s must use https (plain http only on loopback, for tests), got %r"
                          % (option, url))
    if parts.query or parts.fragment:
        raise IssuerError("%s must have no query or fragment (RFC 8414), got %r"
                          % (option, url))
    return url.rstrip("/")


def metadata_urls(issuer):
    """Where an issuer's metadata may be, in the order the MCP specification tries them."""
    parts = urlsplit(issuer)
    origin = "%s://%s" % (parts.scheme, parts.netloc)
    path = parts.path.rstrip("/")
    if not path:
        return [origin + "/.well-known/oauth-authorization-server",
                origin + "/.well-known/openid-configuration"]
    return [origin + "/.well-known/oauth-authorization-server" + path,
            origin + "/.well-known/openid-configuration" + path,
            origin + path + "/.well-known/openid-configuration"]


def max_age(headers, default=DEFAULT_MAX_AGE_S):
    """Seconds a response may be kept, from its Cache-Control (no-store and no-cache: 0)."""
    control = (headers.get("Cache-Control") or "").lower()
    seconds = default
    for directive in control.split(","):
        name, _, value = directive.strip().partition("=")
        if name in ("no-store", "no-cache"):
            return 0.0
        if name == "max-age":
            try:
                seconds = float(int(value.strip().strip('"')))
            except ValueError:
                pass
    return max(0.0, min(seconds, MAX_AGE_CAP_S))


def fetch_json(url, timeout=FETCH_TIMEOUT_S):
    """``(document, headers)`` of a JSON GET; raises OSError or ValueError when it fails."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (https)
        body = response.read(DOCUMENT_MAX_BYTES + 1)
        if len(body) > DOCUMENT_MAX_BYTES:
            raise ValueError("%s answered more than %d bytes" % (url, DOCUMENT_MAX_BYTES))
        document = json.loads(body.decode("utf-8"))
        if not isinstance(document, dict):
            raise ValueError("%s answered JSON that is not an object" % url)
        return document, dict(response.headers.items())


class Issuer:
    """One issuer's metadata and key set, cached as their HTTP caching says; thread-safe."""

    def __init__(self, url, fetch=fetch_json, clock=time.monotonic):
        self.url = check_issuer_url(url)
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self.metadata = None
        self._keys = {}          # kid (or "" for a key without one) -> JWK dict
        self._keys_expire = 0.0
        self._keys_fetched = None

    def start(self):
        """Fetch the metadata and the keys now; IssuerError, in one line, when either fails."""
        tried = []
        for url in metadata_urls(self.url):
            try:
                document, _ = self._fetch(url)
            except (OSError, ValueError) as exc:
                tried.append("%s: %s" % (url, getattr(exc, "reason", None) or exc))
                continue
            break
        else:
            raise IssuerError("the issuer %s is unreachable or has no metadata (tried %s)"
                              % (self.url, "; ".join(tried)))
        if document.get("issuer", "").rstrip("/") != self.url:
            # RFC 8414 3.3: a document for another issuer is a mix-up, never to be trusted.
            raise IssuerError("the metadata at %s names the issuer %r, not %r"
                              % (url, document.get("issuer"), self.url))
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri:
            raise IssuerError("the issuer %s publishes no jwks_uri in its metadata (%s): its "
                              "tokens cannot be checked here" % (self.url, url))
        self.metadata = document
        try:
            self._refresh()
        except KeysUnavailable as exc:
            raise IssuerError(str(exc)) from None
        return self

    @property
    def introspection_endpoint(self):
        """RFC 7662's endpoint, where the issuer offers one."""
        return (self.metadata or {}).get("introspection_endpoint")

    @property
    def signing_algorithms(self):
        """The JWS algorithms the issuer says it signs with, or None where it says none."""
        metadata = self.metadata or {}
        named: list[str] = []
        for key in ("id_token_signing_alg_values_supported",
                    "authorization_signing_alg_values_supported",
                    "introspection_signing_alg_values_supported"):
            values = metadata.get(key)
            if isinstance(values, list):
                named.extend(v for v in values if isinstance(v, str))
        return frozenset(named) or None

    def key(self, kid):
        """The JWK (a dict) named ``kid`` (None: the set's only key), refreshing the set once
        a minute at most; None when the issuer has no such key. KeysUnavailable when a
        refresh was due for it and failed."""
        with self._lock:
            now = self._clock()
            found = self._lookup(kid)
            stale = now >= self._keys_expire
            may_refresh = self._keys_fetched is None or now - self._keys_fetched >= REFRESH_MIN_S
            if (found is None or stale) and may_refresh:
                try:
                    self._refresh()
                except KeysUnavailable:
                    if found is None:
                        raise
                    return found      # a known key keeps working while the issuer is down
                found = self._lookup(kid)
            return found

    def _lookup(self, kid):
        """The cached key of ``kid``, or the only one for a token that names none."""
        if kid is None:
            keys = list(self._keys.values())
            return keys[0] if len(keys) == 1 else None
        return self._keys.get(kid)

    def _refresh(self):
        """Fetch the key set (the caller holds the lock, or is start)."""
        self._keys_fetched = self._clock()
        if self.metadata is None:
            raise KeysUnavailable("the issuer's metadata was not read, so its key set is not "
                                  "known")
        uri = self.metadata["jwks_uri"]
        try:
            document, headers = self._fetch(uri)
        except (OSError, ValueError) as exc:
            raise KeysUnavailable("the issuer's key set %s cannot be fetched: %s"
                                  % (uri, getattr(exc, "reason", None) or exc)) from None
        keys = document.get("keys")
        if not isinstance(keys, list):
            raise KeysUnavailable("the issuer's key set %s has no \"keys\" list" % uri)
        usable = {}
        for key in keys:
            if isinstance(key, dict) and key.get("use", "sig") == "sig" and "kty" in key:
                usable[key.get("kid") or ""] = key
        self._keys = usable
        self._keys_expire = self._keys_fetched + max_age(headers)
