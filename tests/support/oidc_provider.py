"""The npm oidc-provider package as the tests' authorization server, and a person at its form.

``OidcProvider`` starts ``tests/support/oidc/provider.mjs`` (installing its one npm dependency
into that folder the first time, from the lock file) on a loopback port it picks itself.
``Browser`` is a person without a browser: a cookie jar that follows the provider's redirects,
fills its development login form as the named user and confirms the consent page, and hands
back the authorization code where the provider redirects to the client.
"""

import base64
import fcntl
import hashlib
import html.parser
import http.cookiejar
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "oidc"
START_TIMEOUT_S = 60


def node_ready():
    """Why the provider cannot run here, or None: node and npm, and the package installed."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node and npm are not installed"
    # Test processes running side by side (pytest -n) install it once: one npm ci at a time
    # in the folder, each looking again once it holds the lock.
    with open(os.path.join(tempfile.gettempdir(), "kbcite-tests-oidc-npm.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (FOLDER / "node_modules" / "oidc-provider").is_dir():
            done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--silent"],
                                  cwd=str(FOLDER), capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                return "npm ci of oidc-provider failed: %s" % done.stderr.strip()[-300:]
    return None


class OidcProvider:
    """A running provider: ``issuer``, and ``stop()``."""

    def __init__(self, resource, web_redirect, scopes=()):
        self.process = subprocess.Popen(
            ["node", str(FOLDER / "provider.mjs"), resource, web_redirect] + list(scopes),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=10)
            raise RuntimeError("oidc-provider did not start: %s" % self.process.stderr.read())
        self.issuer = json.loads(line)["issuer"]

    def stop(self):
        """End the provider."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            stream.close()

    def metadata(self):
        """The provider's discovery document."""
        with urllib.request.urlopen(self.issuer + "/.well-known/openid-configuration") as r:
            return json.loads(r.read())


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class _Form(html.parser.HTMLParser):
    """The first form of a page: its action and its inputs' values."""

    def __init__(self):
        super().__init__()
        self.action = None
        self.fields = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and self.action is None:
            self.action = attrs.get("action")
        elif tag == "input" and attrs.get("name"):
            self.fields.setdefault(attrs["name"], attrs.get("value") or "")


def pkce_pair():
    """``(verifier, S256 challenge)`` of RFC 7636."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class Browser:
    """A person signing in at the provider's form: follows redirects until the client's."""

    def __init__(self, user):
        self.user = user
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), _NoRedirect())

    def _open(self, url, data=None):
        """``(status, location, body)`` of one request, redirects not followed."""
        body = urllib.parse.urlencode(data).encode("ascii") if data is not None else None
        try:
            with self.opener.open(url, data=body, timeout=30) as response:
                return response.status, None, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as answer:
            location = answer.headers.get("Location")
            text = answer.read().decode("utf-8", "replace")
            if location is None:
                raise RuntimeError("%s answered %d: %s" % (url, answer.code, text[:500]))
            return answer.code, urllib.parse.urljoin(url, location), text

    def authorize(self, authorization_url, redirect_uri):
        """Sign in and consent; returns the query of the redirect to ``redirect_uri``."""
        url, data = authorization_url, None
        for _ in range(12):
            status, location, body = self._open(url, data)
            data = None
            if location is not None:
                if location.startswith(redirect_uri):
                    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
                url = location
                continue
            form = _Form()
            form.feed(body)
            if form.action is None:
                raise RuntimeError("no form at %s: %s" % (url, body[:500]))
            fields = dict(form.fields)
            if "login" in fields:
                fields.update(login=self.user, password="any")
            url, data = urllib.parse.urljoin(url, form.action), fields
        raise RuntimeError("the sign-in at %s did not come back to the client" % authorization_url)


def code_flow(provider, user, client_id, client_secret, redirect_uri, scope, resource):
    """The whole authorization-code flow with PKCE as a web client does it: the token
    endpoint's answer (access_token, id_token, ...), plus the nonce sent."""
    metadata = provider.metadata()
    verifier, challenge = pkce_pair()
    state, nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    query = urllib.parse.urlencode({
        "client_id": client_id, "response_type": "code", "redirect_uri": redirect_uri,
        "scope": scope, "state": state, "nonce": nonce, "code_challenge": challenge,
        "code_challenge_method": "S256", "resource": resource})
    answer = Browser(user).authorize(metadata["authorization_endpoint"] + "?" + query,
                                     redirect_uri)
    assert answer.get("state") == state, answer
    body = urllib.parse.urlencode({"grant_type": "authorization_code", "code": answer["code"],
                                   "redirect_uri": redirect_uri, "code_verifier": verifier,
                                   "resource": resource}).encode("ascii")
    basic = base64.b64encode(("%s:%s" % (client_id, client_secret)).encode()).decode()
    request = urllib.request.Request(metadata["token_endpoint"], data=body, headers={
        "Authorization": "Basic " + basic,
        "Content-Type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(request, timeout=30) as response:
        tokens = json.loads(response.read())
    tokens["nonce"] = nonce
    return tokens
