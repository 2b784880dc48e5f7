"""The HTTP server's handshake sessions in the store, on each engine: found only by their own
token, ended by idleness, by the token's cap, by DELETE and by revoking the token; and the
messages one server process leaves for the request another holds.
"""

import pytest

import kbcite
from kbcite.store import KBStore
from support.old_schemas import as_schema_4

KB = "support"
IDLE_S = 3600


@pytest.fixture
def tokens(kb):
    """Two tokens of the store, named ``one`` and ``two``."""
    kb.tokens.create("one", [KB], "allow")
    kb.tokens.create("two", [KB], "allow")
    return kb


def opened(store, session_id, token="one", per_token=3):
    return store.sessions.open(session_id, token, "2025-11-25", {"elicitation": {}},
                               idle_s=IDLE_S, per_token=per_token)


def test_a_session_is_found_by_its_token_only(tokens):
    opened(tokens, "s1")
    found = tokens.sessions.find("s1", "one", idle_s=IDLE_S)
    assert found["protocol_version"] == "2025-11-25"
    assert found["capabilities"] == {"elicitation": {}} and found["initialized"] is False
    assert tokens.sessions.find("s1", "two", idle_s=IDLE_S) is None  # another token's: none
    assert tokens.sessions.find("nope", "one", idle_s=IDLE_S) is None
    assert tokens.sessions.initialized("s1") is True
    assert tokens.sessions.find("s1", "one", idle_s=IDLE_S)["initialized"] is True
    assert tokens.sessions.initialized("nope") is False


def test_an_idle_session_expires_and_a_used_one_does_not(tokens, clock):
    opened(tokens, "idle")
    opened(tokens, "used")
    clock.advance(seconds=IDLE_S - 10)
    tokens.sessions.touch("used")
    clock.advance(seconds=20)
    assert tokens.sessions.find("idle", "one", idle_s=IDLE_S) is None
    assert tokens.sessions.find("used", "one", idle_s=IDLE_S) is not None
    # The next initialize clears the expired row out of the store.
    evicted, expired = opened(tokens, "new", token="two")
    assert (evicted, expired) == ([], 1)


def test_a_tokens_cap_ends_its_least_recently_used_session(tokens, clock):
    for name in ("a", "b", "c"):
        opened(tokens, name)
        clock.advance(seconds=1)
    tokens.sessions.touch("a")
    assert opened(tokens, "d") == (["b"], 0)
    assert opened(tokens, "x", token="two") == ([], 0)  # another token has its own cap
    assert [s for s in "abcd" if tokens.sessions.find(s, "one", idle_s=IDLE_S)] == ["a", "c", "d"]


def test_delete_and_revocation_end_sessions(tokens):
    opened(tokens, "s1")
    opened(tokens, "s2")
    opened(tokens, "t1", token="two")
    assert tokens.sessions.end("s1", "two") is False  # not its session
    assert tokens.sessions.end("s1", "one") is True
    assert tokens.sessions.end("s1", "one") is False
    tokens.tokens.revoke("one")
    assert tokens.sessions.find("s2", "one", idle_s=IDLE_S) is None
    assert tokens.sessions.find("t1", "two", idle_s=IDLE_S) is not None


def test_messages_reach_the_process_that_collects_them_once(tokens):
    opened(tokens, "s1")
    opened(tokens, "s2")
    answer = {"jsonrpc": "2.0", "id": "approve-x", "result": {"action": "accept"}}
    assert tokens.sessions.leave("s1", "response", "approve-x", answer) is True
    assert tokens.sessions.leave("s2", "cancelled", "7", {"requestId": 7}) is True
    assert tokens.sessions.leave("gone", "response", "approve-y", answer) is False
    messages, live = tokens.sessions.collect(["s1", "gone"])
    assert live == {"s1"}
    assert [(m["kind"], m["target"], m["body"]) for m in messages] == [
        ("response", "approve-x", answer)]
    tokens.sessions.forget([m["id"] for m in messages])
    assert tokens.sessions.collect(["s1"]) == ([], {"s1"})
    tokens.sessions.end("s2", "one")  # its messages go with it
    assert tokens.sessions.collect(["s2"]) == ([], set())
    with pytest.raises(ValueError):
        tokens.sessions.leave("s1", "chatter", "x", {})


def test_a_schema_4_store_is_upgraded_with_sessions(engine, tmp_path, request):
    address = (str(tmp_path / "old.db") if engine == "sqlite"
               else request.getfixturevalue("pg_url"))
    with KBStore(address, create=True) as store:
        store.create_knowledge_base(KB)
        store.tokens.create("one", [KB], "allow")
    as_schema_4(address, engine)
    with pytest.raises(kbcite.NotAStore, match="kb upgrade"):
        KBStore(address)
    assert KBStore.upgrade(address) == (4, kbcite.SCHEMA_VERSION)
    with KBStore(address) as store:
        assert store.audit() == []
        opened(store, "s1")
        assert store.sessions.find("s1", "one", idle_s=IDLE_S) is not None


def test_web_sessions_and_handshakes_have_their_own_caps_and_idle_times(tokens, clock):
    """A person's page and an agent's handshakes of one token: neither's cap ends the other's
    sessions, and each kind's idle time ends only its own."""
    for kind in ("web", "web-oidc"):
        tokens.sessions.open(kind, "one", kind, {}, idle_s=8 * IDLE_S, per_token=1)
    evicted = [opened(tokens, "mcp%d" % i, per_token=2)[0] for i in range(4)]
    assert evicted == [[], [], ["mcp0"], ["mcp1"]]  # handshakes evict handshakes only
    assert tokens.sessions.find("web", "one", idle_s=8 * IDLE_S) is not None
    assert tokens.sessions.find("web-oidc", "one", idle_s=8 * IDLE_S) is not None
    tokens.sessions.open("web2", "one", "web", {}, idle_s=8 * IDLE_S, per_token=1)
    assert tokens.sessions.find("web", "one", idle_s=8 * IDLE_S) is None  # its own cap
    assert tokens.sessions.find("web-oidc", "one", idle_s=8 * IDLE_S) is not None
    clock.advance(seconds=IDLE_S + 1)
    # A handshake opened past the handshakes' idle time ends the idle handshakes only.
    assert opened(tokens, "mcp9")[1] == 2
    assert tokens.sessions.find("web2", "one", idle_s=8 * IDLE_S) is not None
    assert tokens.sessions.find("mcp3", "one", idle_s=IDLE_S) is None
    # A page's sign-in past the pages' idle time ends idle pages, never a live handshake.
    clock.advance(seconds=8 * IDLE_S)
    opened(tokens, "mcp10")
    tokens.sessions.open("web3", "one", "web", {}, idle_s=8 * IDLE_S, per_token=5)
    assert tokens.sessions.find("web2", "one", idle_s=10 * IDLE_S) is None
    assert tokens.sessions.find("mcp10", "one", idle_s=IDLE_S) is not None


@pytest.mark.slow
def test_the_servers_web_and_handshake_timeouts_and_caps_are_its_own(tmp_path):
    """kb-server over HTTP: one handshake allowed a token and a second of idle time for it
    end neither the token's page nor its idle clock; the pages' own timeout ends the page."""
    pytest.importorskip("jinja2")
    import json
    import time
    import urllib.request
    from support.http_server import Server
    from support.web import WebClient
    path = tmp_path / "kb.db"
    with KBStore(str(path), create=True) as store:
        store.create_knowledge_base(KB)
        token = store.tokens.create("one", [KB], "allow")
    server = Server(path, "--session-timeout", "1", "--sessions-per-token", "1",
                    "--web-session-timeout", "6", "--web-sessions-per-token", "2")

    def initialize():
        request = urllib.request.Request(
            "http://127.0.0.1:%d/mcp" % server.port, data=json.dumps({
                "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}}).encode(),
            headers={"Content-Type": "application/json", "Authorization": "Bearer " + token,
                     "Accept": "application/json, text/event-stream"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.headers["Mcp-Session-Id"]
    try:
        web = WebClient("127.0.0.1", server.port)
        assert web.sign_in(token) == 303
        initialize()
        initialize()  # the token's one handshake: the first ends, the page does not
        assert web.get("/")[0] == 200
        time.sleep(1.5)  # past the handshakes' idle time, inside the pages'
        initialize()
        assert web.get("/")[0] == 200
        time.sleep(6.5)  # past the pages' own
        status, headers, _ = web.get("/")
        assert status == 303 and headers["location"].startswith("/login")
    finally:
        server.stop()
