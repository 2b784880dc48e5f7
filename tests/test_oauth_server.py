"""kb-server --oauth-issuer: the MCP endpoint as an OAuth 2.1 resource server, for real.

The npm oidc-provider package is the team's issuer; people sign in at its form (driven over
HTTP by the test), and the server, with two workers, takes their access tokens beside kb
tokens: the RFC 9728 document, the challenges, each refused token's status and reason, the
scopes as grants, and every edit's actor the person's own name. The official Python SDK's
OAuth client signs in by itself and calls the tools.
"""

import base64
import json
import os
import urllib.error
import urllib.request

import pytest

pytest.importorskip("joserfc")
from joserfc import jwt  # noqa: E402
from joserfc.jwk import RSAKey  # noqa: E402

from kbcite.store import KBStore  # noqa: E402
from support.http_server import Server  # noqa: E402
from support.oidc_provider import Browser, OidcProvider, code_flow, node_ready  # noqa: E402

pytestmark = pytest.mark.slow

REDIRECT = "http://127.0.0.1:9/auth/callback"
WEB = ("kb-web", "kb-web-secret")
SCOPE = "openid email kb:support:read kb:support:write"


@pytest.fixture(scope="module")
def provider():
    why = node_ready()
    if why:
        if os.environ.get("CI"):
            pytest.fail("oidc-provider cannot run in CI: %s" % why)
        pytest.skip(why)
    started = OidcProvider("loopback", REDIRECT)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def team(provider, tmp_path_factory):
    """A store with three knowledge bases and an article, served with the issuer beside kb
    tokens by two workers; ``(server, url, store path, article ID, kb token)``."""
    path = tmp_path_factory.mktemp("oauth") / "kb.sqlite3"
    with KBStore(str(path), create=True) as store:
        store.create_knowledge_base("support")
        store.create_knowledge_base("docs")
        store.create_knowledge_base("hr")
        article = store.create_article("support", "Refund policy", "Refunds take five days.",
                                       actor="setup")
        token = store.tokens.create("bot", ["support"], writes="allow")
    server = Server(path, "--workers", "2", "--oauth-issuer", provider.issuer,
                    "--oauth-subject-claim", "email", "--oauth-writes", "allow",
                    "--oauth-scope", "kb:support:read", "--oauth-scope", "kb:support:write")
    yield server, "http://127.0.0.1:%d/mcp" % server.port, path, article, token
    server.stop()


def post(url, token, method, params, name=None):
    """A 2026-07-28 request; ``(status, headers, JSON body)``."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                       "params": dict(params, _meta=meta)}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if name:
        headers["Mcp-Name"] = name
    if token:
        headers["Authorization"] = "Bearer " + token
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as answer:
        text = answer.read()
        return answer.code, answer.headers, json.loads(text) if text else {}


def call(url, token, tool, arguments):
    return post(url, token, "tools/call", {"name": tool, "arguments": arguments}, name=tool)


def edit(url, token, article, version, key, line):
    return call(url, token, "edit_knowledge_article", {
        "knowledge_base_id": "support", "article_id": article, "expected_version": version,
        "content": "Refunds take five days.\n\n" + line, "idempotency_key": key})


def version_of(url, token, article):
    status, _, body = call(url, token, "read_knowledge_article",
                           {"knowledge_base_id": "support", "article_id": article})
    assert status == 200, body
    return body["result"]["structuredContent"]["updated_at"]


def sign_in(provider, url, user, scope=SCOPE, resource=None):
    return code_flow(provider, user, WEB[0], WEB[1], REDIRECT, scope, resource or url)


def history(path, article):
    with KBStore(str(path)) as store:
        return store.history("support", article)


def test_the_protected_resource_metadata_names_the_issuer_and_scopes(team, provider):
    server, url, *_ = team
    with urllib.request.urlopen(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"),
                                timeout=30) as response:
        document = json.loads(response.read())
    assert document["resource"] == url
    assert document["authorization_servers"] == [provider.issuer]
    assert document["bearer_methods_supported"] == ["header"]
    assert document["scopes_supported"] == ["kb:support:read", "kb:support:write"]


def test_no_token_is_401_with_where_to_sign_in_and_the_scope_the_call_needs(team):
    server, url, _, article, _ = team
    status, headers, _ = post(url, None, "tools/list", {})
    challenge = headers["WWW-Authenticate"]
    assert status == 401
    assert 'resource_metadata="%s"' % url.replace(
        "/mcp", "/.well-known/oauth-protected-resource/mcp") in challenge
    assert 'scope="kb:support:read kb:support:write"' in challenge
    status, headers, _ = edit(url, None, article, "2026-01-01T00:00:00.000000Z", "k", "x")
    assert status == 401 and 'scope="kb:support:write"' in headers["WWW-Authenticate"]


def test_two_people_edit_as_themselves_and_the_history_names_each(team, provider):
    server, url, path, article, _ = team
    alice = sign_in(provider, url, "alice")["access_token"]
    bob = sign_in(provider, url, "bob")["access_token"]
    status, _, body = edit(url, alice, article, version_of(url, alice, article), "a1", "Alice.")
    assert status == 200 and not body["result"].get("isError"), body
    status, _, body = edit(url, bob, article, version_of(url, bob, article), "b1", "Bob.")
    assert status == 200 and not body["result"].get("isError"), body
    actors = [(v["actor"], v["actor_issuer"]) for v in history(path, article)]
    assert actors[-2:] == [("alice@example.com", provider.issuer),
                           ("bob@example.com", provider.issuer)], actors


def test_a_read_scope_alone_cannot_edit_403_naming_the_scope(team, provider):
    server, url, path, article, _ = team
    reader = sign_in(provider, url, "bob", "openid kb:support:read")["access_token"]
    before = len(history(path, article))
    status, headers, body = edit(url, reader, article, version_of(url, reader, article), "r1",
                                 "Never written.")
    assert status == 403, body
    assert 'error="insufficient_scope"' in headers["WWW-Authenticate"]
    assert 'scope="kb:support:write"' in headers["WWW-Authenticate"]
    assert len(history(path, article)) == before
    status, _, body = call(url, reader, "search_knowledge_base",
                           {"knowledge_base_id": "support", "query": "refund"})
    assert status == 200 and body["result"]["structuredContent"]["results"]


def test_a_knowledge_base_without_a_scope_is_not_found_as_a_missing_one(team, provider):
    server, url, _, _, _ = team
    alice = sign_in(provider, url, "alice")["access_token"]
    answers = [call(url, alice, "search_knowledge_base", {"knowledge_base_id": kb,
                                                           "query": "refund"})[2]
               for kb in ("hr", "nothing-here")]
    errors = [json.loads(a["result"]["content"][0]["text"])["error"] for a in answers]
    assert [e["code"] for e in errors] == ["not_found", "not_found"]
    texts = [json.dumps(e).replace("nothing-here", "hr") for e in errors]
    assert texts[0] == texts[1]


def forged(kid="test-key-1", alg="RS256", **claims):
    key = RSAKey.generate_key(2048, parameters={"kid": kid})
    return jwt.encode({"alg": alg, "kid": kid}, claims, key, algorithms=[alg])


def unsigned(claims):
    part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return part({"alg": "none", "kid": "test-key-1"}) + "." + part(claims) + "."


def test_each_bad_token_is_401_and_writes_nothing(team, provider):
    server, url, path, article, _ = team
    real = sign_in(provider, url, "alice")["access_token"]
    claims = json.loads(base64.urlsafe_b64decode(real.split(".")[1] + "=="))
    other = sign_in(provider, url, "alice", resource="http://127.0.0.1:1/mcp")["access_token"]
    before = len(history(path, article))
    cases = {"another audience": (other, "not for this server"),
             "wrongly signed": (forged(**claims), "signature does not verify"),
             "alg none": (unsigned(claims), "'none'"),
             "an unknown kid": (forged(kid="rotated-away", **claims), "no key 'rotated-away'"),
             "an ID token": (sign_in(provider, url, "alice")["id_token"], "audience"),
             "garbage": ("eyJhbGciOi.x.y", "base64url")}
    for case, (token, words) in cases.items():
        status, headers, body = edit(url, token, article, "2026-01-01T00:00:00.000000Z",
                                     "bad-" + case, "Never.")
        assert status == 401, case
        assert 'error="invalid_token"' in headers["WWW-Authenticate"], case
        assert words in body["error"]["message"], (case, body)
    assert len(history(path, article)) == before


def test_kb_tokens_keep_working_beside_the_issuer(team):
    server, url, path, article, token = team
    status, _, body = edit(url, token, article, version_of(url, token, article), "bot-1", "Bot.")
    assert status == 200 and not body["result"].get("isError"), body
    assert history(path, article)[-1]["actor"] == "bot"


def test_the_official_sdk_signs_in_by_itself_and_calls_the_tools(team, provider):
    pytest.importorskip("mcp", reason="the official MCP SDK needs Python >= 3.10")
    anyio = pytest.importorskip("anyio")
    httpx2 = pytest.importorskip("httpx2")
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
    server, url, path, article, _ = team

    class Memory:
        tokens = client = None

        async def get_tokens(self):
            return self.tokens

        async def set_tokens(self, tokens):
            self.tokens = tokens

        async def get_client_info(self):
            return self.client

        async def set_client_info(self, info):
            self.client = info

    redirect = "http://127.0.0.1:9/sdk/callback"
    answer = {}

    async def redirect_handler(authorization_url):
        answer.update(await anyio.to_thread.run_sync(
            Browser("alice").authorize, authorization_url, redirect))

    async def callback_handler():
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"),
                                       iss=answer.get("iss"))

    storage = Memory()
    auth = OAuthClientProvider(url, OAuthClientMetadata(
        client_name="kb test", redirect_uris=[redirect], grant_types=["authorization_code"],
        response_types=["code"], token_endpoint_auth_method="none",
        application_type="native"), storage, redirect_handler, callback_handler)

    async def main():
        async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
            async with Client(streamable_http_client(url, http_client=http),
                              mode="2026-07-28") as client:
                found = await client.call_tool("search_knowledge_base", {
                    "knowledge_base_id": "support", "query": "refund"})
                return found.structured_content

    found = anyio.run(main)
    assert found["results"][0]["article_id"] == article
    assert storage.tokens is not None and storage.client is not None
    assert "kb:support:read" in (storage.tokens.scope or "")


def test_the_store_grants_people_and_groups_what_their_scopes_do_not(team, provider):
    """kb grant: for an issuer that cannot mint kb scopes; read at every request."""
    server, url, path, _, _ = team
    with KBStore(str(path)) as store:
        doc = store.create_article("docs", "Deploying", "Deploy on Tuesdays.", actor="setup")
        store.grants.add("group", "readers", "docs", "deny")
        store.grants.add("subject", "alice@example.com", "docs", "allow")
    alice = sign_in(provider, url, "alice", "openid kb:support:read")["access_token"]
    bob = sign_in(provider, url, "bob", "openid kb:support:read")["access_token"]
    status, _, body = call(url, bob, "search_knowledge_base",
                           {"knowledge_base_id": "docs", "query": "deploy"})
    assert status == 200 and body["result"]["structuredContent"]["results"], body
    version = body["result"]["structuredContent"]["results"][0]["updated_at"]
    status, headers, _ = call(url, bob, "edit_knowledge_article", {
        "knowledge_base_id": "docs", "article_id": doc, "expected_version": version,
        "content": "Never.", "idempotency_key": "bob-docs"})
    assert status == 403 and 'scope="kb:docs:write"' in headers["WWW-Authenticate"]
    status, _, body = call(url, alice, "edit_knowledge_article", {
        "knowledge_base_id": "docs", "article_id": doc, "expected_version": version,
        "content": "Deploy on Tuesdays and Thursdays.", "idempotency_key": "alice-docs"})
    assert status == 200 and not body["result"].get("isError"), body
    with KBStore(str(path)) as store:
        assert store.history("docs", doc)[-1]["actor"] == "alice@example.com"
        store.grants.remove("group", "readers", "docs")
    status, _, body = call(url, bob, "search_knowledge_base",
                           {"knowledge_base_id": "docs", "query": "deploy"})
    assert json.loads(body["result"]["content"][0]["text"])["error"]["code"] == "not_found"


# -- the 2025-11-25 era: the initialize handshake and Mcp-Session-Id, over raw HTTP ---------------

HANDSHAKE = "2025-11-25"


def handshake_post(url, token, message, session=None):
    """A 2025-11-25 POST; ``(status, headers, the JSON-RPC answer or None)``, an event
    stream's answer read off its data lines."""
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    if session is not None:
        headers.update({"Mcp-Session-Id": session, "MCP-Protocol-Version": HANDSHAKE})
    if token:
        headers["Authorization"] = "Bearer " + token
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, got, text = response.status, response.headers, response.read()
    except urllib.error.HTTPError as answer:
        status, got, text = answer.code, answer.headers, answer.read()
    text = text.decode("utf-8")
    if got.get("Content-Type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = data[-1] if data else ""
    return status, got, json.loads(text) if text.strip() else None


def open_session(url, token):
    """initialize and notifications/initialized with a person's token; the session ID."""
    status, headers, answer = handshake_post(url, token, {
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
    assert status == 200 and answer["result"]["protocolVersion"] == HANDSHAKE, answer
    session = headers["Mcp-Session-Id"]
    status, _, _ = handshake_post(url, token, {"jsonrpc": "2.0",
                                               "method": "notifications/initialized"}, session)
    assert status == 202
    return session


def session_call(url, token, session, tool, arguments, request_id=1):
    return handshake_post(url, token, {"jsonrpc": "2.0", "id": request_id,
                                       "method": "tools/call",
                                       "params": {"name": tool, "arguments": arguments}},
                          session)


def test_a_handshake_session_signs_in_with_the_issuers_token_and_edits_as_the_person(
        team, provider):
    server, url, path, article, _ = team
    alice = sign_in(provider, url, "alice")["access_token"]
    # No token: 401 naming where to sign in, before any session exists.
    status, headers, _ = handshake_post(url, None, {
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
    assert status == 401 and "resource_metadata=" in headers["WWW-Authenticate"]
    session = open_session(url, alice)
    status, _, answer = session_call(url, alice, session, "search_knowledge_base",
                                     {"knowledge_base_id": "support", "query": "refund"})
    assert status == 200 and answer["result"]["structuredContent"]["results"], answer
    status, _, answer = session_call(url, alice, session, "read_knowledge_article",
                                     {"knowledge_base_id": "support", "article_id": article}, 5)
    assert status == 200, answer
    version = answer["result"]["structuredContent"]["updated_at"]
    # Each request of the session is on any of the two workers; every one checks the token.
    status, _, answer = session_call(url, alice, session, "edit_knowledge_article", {
        "knowledge_base_id": "support", "article_id": article, "expected_version": version,
        "content": "Refunds take five days.\n\nIn a session.", "idempotency_key": "s1"}, 2)
    assert status == 200 and not answer["result"].get("isError"), answer
    last = history(path, article)[-1]
    assert (last["actor"], last["actor_issuer"]) == ("alice@example.com", provider.issuer)
    # DELETE ends it; the next request of it hears 404, and initializes anew.
    request = urllib.request.Request(url, method="DELETE", headers={
        "Authorization": "Bearer " + alice, "Mcp-Session-Id": session,
        "MCP-Protocol-Version": HANDSHAKE})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status in (200, 204)
    status, _, _ = session_call(url, alice, session, "search_knowledge_base",
                                {"knowledge_base_id": "support", "query": "refund"}, 3)
    assert status == 404


def test_a_handshake_session_is_its_persons_and_its_scopes_still_hold(team, provider):
    server, url, path, article, _ = team
    alice = sign_in(provider, url, "alice")["access_token"]
    reader = sign_in(provider, url, "bob", "openid email kb:support:read")["access_token"]
    session = open_session(url, alice)
    # Another person's valid token cannot use alice's session: it is not found for them.
    status, _, _ = session_call(url, reader, session, "search_knowledge_base",
                                {"knowledge_base_id": "support", "query": "refund"})
    assert status == 404
    # A session opened with a read scope: its edit is 403 insufficient_scope, nothing written.
    theirs = open_session(url, reader)
    before = len(history(path, article))
    status, headers, _ = session_call(url, reader, theirs, "edit_knowledge_article", {
        "knowledge_base_id": "support", "article_id": article,
        "expected_version": history(path, article)[-1]["updated_at"],
        "content": "Never written.", "idempotency_key": "r9"})
    assert status == 403
    assert 'error="insufficient_scope", scope="kb:support:write"' in headers["WWW-Authenticate"]
    assert len(history(path, article)) == before
    # A token that stops being valid (here: garbage in its place) is 401 mid-session.
    status, headers, _ = session_call(url, "not.a.token", session, "search_knowledge_base",
                                      {"knowledge_base_id": "support", "query": "refund"})
    assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"]
