"""kb-server over Streamable HTTP, spoken to with raw HTTP: tokens that carry grants, the
2026-07-28 routing headers, handshake sessions with their event streams, and hostile clients.

Each test names the specification section it follows (docs/specification/<revision>/...).
"""

import http.client
import json
import socket
import subprocess
import sys
import threading
import time

import pytest

import kbcite
from kbcite.server.protocol import SUBSCRIPTIONS_MAX
from kbcite.server import cli
from kbcite.testing import PostgresCluster, postgres_binaries
from kbcite.testing import dump_file as store_dump
from support.commands import ROOT, child_env
from support.http_server import TIMEOUT, Server, connect, head
from support.stdio_client import EDIT, make_db

MODERN = "2026-07-28"


class Http:
    """One HTTP connection to the server, with a token."""

    def __init__(self, server, token=None):
        self.conn = http.client.HTTPConnection(server.host, server.port, timeout=TIMEOUT)
        self.token = token

    def post(self, body, headers=None, raw=None):
        """POST a message (or raw bytes); returns (status, headers, body text)."""
        data = raw if raw is not None else json.dumps(body).encode("utf-8")
        sent = {"Content-Type": "application/json",
                "Accept": "application/json, text/event-stream"}
        if self.token:
            sent["Authorization"] = "Bearer " + self.token
        sent.update(headers or {})
        self.conn.request("POST", "/mcp", body=data, headers=sent)
        response = self.conn.getresponse()
        return response.status, response.headers, response.read().decode("utf-8")

    def modern(self, method, params=None, request_id=1, capabilities=None, headers=None):
        """A 2026-07-28 request with matching routing headers; returns (status, JSON)."""
        params = dict(params or {})
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientCapabilities": capabilities or {}}
        sent = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        if method == "tools/call":
            sent["Mcp-Name"] = params["name"]
        sent.update(headers or {})
        status, _, text = self.post({"jsonrpc": "2.0", "id": request_id, "method": method,
                                     "params": params}, sent)
        return status, json.loads(text) if text else None


@pytest.fixture
def served(tmp_path):
    """A store with knowledge bases support and internal, and tokens for them."""
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        made.support = store.tokens.create("support-ask", ["support"], "ask")
        made.support2 = store.tokens.create("support-ask-2", ["support"], "ask")
        made.allow = store.tokens.create("support-allow", ["support"], "allow")
        made.deny = store.tokens.create("support-deny", ["support"], "deny")
        made.internal = store.tokens.create("internal-only", ["internal"], "allow")
    return made


def dump(path):
    """The store's dump, tokens left out (a request may note a token's use)."""
    return [line for line in store_dump(path) if "tokens" not in line]


def structured(reply):
    result = reply["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]


# -- tokens --------------------------------------------------------------------------------------


def test_no_token_a_wrong_one_or_a_revoked_one_gets_401_with_a_bearer_challenge(served, server):
    """2025-11-25/basic/authorization.mdx, "Token Handling": invalid tokens get 401."""
    s = server()
    status, headers, body = Http(s).post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
    assert "error=" not in headers["WWW-Authenticate"]
    status, headers, _ = Http(s, "kbt_wrong").post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"]
    client = Http(s, served.allow)
    assert client.modern("tools/list")[0] == 200
    with kbcite.KBStore(str(served.path)) as store:
        store.tokens.revoke("support-allow")
    status, _ = client.modern("tools/list")
    assert status == 401  # the very next request


def test_a_token_granted_only_one_knowledge_base_sees_others_as_missing(served, server):
    s = server()
    client = Http(s, served.internal)

    def read(kb_id):
        status, reply = client.modern("tools/call", {"name": "read_knowledge_article",
                                                     "arguments": {"knowledge_base_id": kb_id,
                                                                   "article_id": "art-000001"}})
        assert status == 200
        return reply["result"]["content"][0]["text"]
    assert "Salaries" in read("internal")
    assert read("support") == read("nowhere").replace("nowhere", "support")


def test_a_deny_token_has_no_edit_tool(served, server):
    s = server()
    names = [t["name"] for t in Http(s, served.deny).modern("tools/list")[1]["result"]["tools"]]
    assert EDIT not in names and names == [t["name"] for t in kbcite.TOOLS if t["name"] != EDIT]


def test_the_authorization_server_is_published_when_there_is_one(served, server):
    """2026-07-28/basic/authorization/index.mdx: RFC 9728 protected-resource metadata."""
    s = server("--authorization-server", "https://auth.example.com")
    status, headers, _ = Http(s).post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert 'resource_metadata="http://127.0.0.1:%d/.well-known/oauth-protected-resource/mcp"' \
        % s.port in headers["WWW-Authenticate"]
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=TIMEOUT)
    conn.request("GET", "/.well-known/oauth-protected-resource/mcp")
    response = conn.getresponse()
    assert response.status == 200
    assert json.loads(response.read())["authorization_servers"] == ["https://auth.example.com"]


# -- 2026-07-28 over HTTP ------------------------------------------------------------------------


def test_routing_headers_must_match_the_body(served, server):
    """2026-07-28/basic/transports/streamable-http.mdx, "Server Validation": -32020, 400."""
    s = server()
    client = Http(s, served.allow)
    params = {"name": "search_knowledge_base",
              "arguments": {"knowledge_base_id": "support", "query": "password"}}
    assert client.modern("tools/call", params)[0] == 200
    for headers in ({"Mcp-Name": "read_knowledge_article"}, {"Mcp-Method": "tools/list"},
                    {"MCP-Protocol-Version": "2025-11-25"}):
        status, reply = client.modern("tools/call", params, headers=headers)
        assert status == 400 and reply["error"]["code"] == -32020, headers
    status, reply = client.modern("tools/call", params, headers={
        "Mcp-Name": "=?base64?c2VhcmNoX2tub3dsZWRnZV9iYXNl?="})  # the sentinel form, decoded
    assert status == 200


def test_a_routing_header_sent_twice_is_refused_whichever_copy_comes_last(served, server):
    """A reader of the first copy and one of the last would route the request differently
    (streamable-http.mdx, "Server Validation": a malformed header is a mismatch)."""
    s = server()
    params = {"name": "search_knowledge_base",
              "arguments": {"knowledge_base_id": "support", "query": "password"},
              "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                        "io.modelcontextprotocol/clientCapabilities": {}}}
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
    for copies in (("tools/list", "tools/call"), ("tools/call", "tools/list"),
                   ("tools/call", "tools/call")):
        conn = http.client.HTTPConnection(s.host, s.port, timeout=TIMEOUT)
        conn.putrequest("POST", "/mcp")
        for name, value in [("Content-Type", "application/json"),
                            ("Authorization", "Bearer " + served.allow),
                            ("MCP-Protocol-Version", MODERN), ("Mcp-Name", params["name"]),
                            ("Content-Length", str(len(body)))]:
            conn.putheader(name, value)
        for value in copies:
            conn.putheader("Mcp-Method", value)
        conn.endheaders(body.encode("utf-8"))
        response = conn.getresponse()
        reply = json.loads(response.read())
        conn.close()
        assert response.status == 400 and reply["error"]["code"] == -32020, copies
        assert "Mcp-Method header is sent more than once" in reply["error"]["message"]


def test_modern_errors_have_their_http_statuses(served, server):
    """streamable-http.mdx, "Request Metadata": unknown method 404; versions 400 -32022."""
    s = server()
    client = Http(s, served.allow)
    status, reply = client.modern("prompts/list")
    assert status == 404 and reply["error"]["code"] == -32601
    status, reply = client.modern("tools/list", headers={"MCP-Protocol-Version": "2099-01-01"})
    assert status == 400 and reply["error"]["code"] == -32020
    status, _, text = client.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                   "params": {}})
    assert status == 400 and json.loads(text)["error"]["code"] == -32602


def test_an_initialize_carrying_modern_meta_gets_404_and_no_session(served, server):
    """2026-07-28/basic/versioning.mdx: a request with modern _meta is served statelessly;
    streamable-http.mdx ("Protocol Version Header"): a method not served is 404, -32601."""
    s = server()
    client = Http(s, served.allow)
    params = {"protocolVersion": "2025-11-25", "capabilities": {},
              "clientInfo": {"name": "t", "version": "1"}}
    params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                       "io.modelcontextprotocol/clientCapabilities": {}}
    status, headers, text = client.post({"jsonrpc": "2.0", "id": 3, "method": "initialize",
                                         "params": params},
                                        {"MCP-Protocol-Version": MODERN,
                                         "Mcp-Method": "initialize"})
    assert status == 404 and json.loads(text)["error"]["code"] == -32601, text
    assert "Mcp-Session-Id" not in headers
    assert client.modern("tools/list")[0] == 200  # and the server lives on


def test_an_approval_over_http_is_stateless(served, server):
    """mrtr.mdx over HTTP: the input_required round trip, each POST on its own."""
    s = server()
    client = Http(s, served.support)
    status, read = client.modern("tools/call", {"name": "read_knowledge_article", "arguments": {
        "knowledge_base_id": "support", "article_id": served.password}})
    arguments = {"knowledge_base_id": "support", "article_id": served.password,
                 "content": "Over HTTP.", "expected_version": structured(read)["updated_at"],
                 "idempotency_key": "h1"}
    status, first = client.modern("tools/call", {"name": EDIT, "arguments": arguments},
                                  capabilities={"elicitation": {}})
    assert status == 200 and first["result"]["resultType"] == "input_required"
    other = Http(s, served.support)  # another connection finishes it
    status, done = other.modern("tools/call", {
        "name": EDIT, "arguments": arguments, "requestState": first["result"]["requestState"],
        "inputResponses": {"approve": {"action": "accept"}}}, request_id=2,
        capabilities={"elicitation": {}})
    assert status == 200 and structured(done)["replayed"] is False
    # The approval is bound to the token that was asked: another one cannot use it.
    status, reply = Http(s, served.support2).modern("tools/call", {
        "name": EDIT, "arguments": dict(arguments, idempotency_key="h2"),
        "requestState": first["result"]["requestState"],
        "inputResponses": {"approve": {"action": "accept"}}}, request_id=3,
        capabilities={"elicitation": {}})
    assert status == 400 and reply["error"]["code"] == -32602


# -- 2025-11-25 sessions over HTTP ---------------------------------------------------------------


def initialize(client, capabilities=None):
    status, headers, text = client.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                         "params": {"protocolVersion": "2025-11-25",
                                                    "capabilities": capabilities or {},
                                                    "clientInfo": {"name": "t", "version": "1"}}})
    assert status == 200, text
    session = headers["Mcp-Session-Id"]
    assert len(session) >= 24
    status, _, _ = client.post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                               {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
    assert status == 202
    return session


def test_a_session_asks_on_the_posts_event_stream(served, server):
    """2025-11-25/basic/transports.mdx, "Sending Messages to the Server" 6, "Session
    Management": the question on the POST's stream, the answer by another POST (202)."""
    s = server()
    client = Http(s, served.support)
    session = initialize(client, {"elicitation": {}})
    headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    status, _, text = client.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "read_knowledge_article", "arguments": {
            "knowledge_base_id": "support", "article_id": served.password}}}, headers)
    version = structured(json.loads(text))["updated_at"]
    stream = socket.create_connection(("127.0.0.1", s.port), timeout=TIMEOUT)
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": EDIT, "arguments": {"knowledge_base_id": "support", "article_id": served.password,
                                    "content": "Asked on a stream.", "expected_version": version,
                                    "idempotency_key": "s1"}}}).encode()
    stream.sendall(("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json"
                    "\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer %s"
                    "\r\nMcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\n"
                    "Content-Length: %d\r\n\r\n" % (s.port, served.support, session, len(body))
                    ).encode() + body)
    received = b""
    while b"elicitation/create" not in received:
        received += stream.recv(65536)
    assert b"content-type: text/event-stream" in received.lower()  # names: any case
    question = json.loads(received.split(b"data: ", 1)[1].split(b"\r\n", 1)[0])
    assert question["method"] == "elicitation/create"
    status, _, _ = Http(s, served.support).post({"jsonrpc": "2.0", "id": question["id"], "result": {
        "action": "accept"}}, headers)
    assert status == 202
    while b'"id":2' not in received:
        chunk = stream.recv(65536)
        assert chunk, received
        received += chunk
    final = json.loads(received.rsplit(b"data: ", 1)[1].split(b"\r\n", 1)[0])
    assert final["result"]["structuredContent"]["replayed"] is False
    stream.close()
    with kbcite.KBStore(str(served.path)) as store:
        assert store.get_article("support", served.password)["content"] == "Asked on a stream."


def test_sessions_end_and_are_not_anyones_but_their_callers(served, server):
    """transports.mdx, "Session Management" 3 and 5; security best practices, "Session
    Hijacking": a session is not authentication."""
    s = server()
    mine = Http(s, served.allow)
    session = initialize(mine)
    headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    assert mine.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers)[0] == 200
    theirs = Http(s, served.internal)
    assert theirs.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers)[0] == 404
    assert mine.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, dict(
        headers, **{"Mcp-Session-Id": "made-up"}))[0] == 404
    mine.conn.request("DELETE", "/mcp", headers=dict(headers, Authorization="Bearer " +
                                                     served.allow))
    assert mine.conn.getresponse().status == 204
    mine.conn.close()
    mine = Http(s, served.allow)
    assert mine.post({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers)[0] == 404


# -- hostile clients -----------------------------------------------------------------------------


def test_hostile_requests_get_clear_errors_and_write_nothing(served, server):
    s = server("--max-body", "100000")
    before = dump(served.path)
    client = Http(s, served.allow)
    cases = [
        ({"Origin": "http://evil.example"}, None, 403),  # DNS rebinding: transports.mdx
        ({"Host": "evil.example:80"}, None, 421),
        ({"Content-Type": "text/plain"}, None, 415),
        ({}, b"{not json", 400),
        ({}, b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', 400),  # no batches
        ({}, b'{"jsonrpc": "2.0", "id": 1}', 400),
    ]
    for headers, raw, status in cases:
        got, _, text = Http(s, served.allow).post(None, headers, raw=raw or b'{"jsonrpc": "2.0", '
                                                                        b'"id": 1, "method": '
                                                                        b'"ping"}')
        assert got == status, (headers, raw, text)
        if text:
            assert "error" in json.loads(text)
    # A 10 MB body is refused by its length, without being read.
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=TIMEOUT)
    conn.putrequest("POST", "/mcp")
    for name, value in (("Content-Type", "application/json"), ("Authorization",
                                                               "Bearer " + served.allow),
                        ("Content-Length", str(10 * 1024 * 1024))):
        conn.putheader(name, value)
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 413
    # GET opens no stream; the server still answers afterwards.
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=TIMEOUT)
    conn.request("GET", "/mcp", headers={"Authorization": "Bearer " + served.allow})
    assert conn.getresponse().status == 405
    assert client.modern("tools/list")[0] == 200
    assert dump(served.path) == before


def test_a_slow_client_is_cut_off_while_others_are_served(served, server):
    s = server("--request-timeout", "2")
    slow = socket.create_connection(("127.0.0.1", s.port), timeout=TIMEOUT)
    request = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    started = time.monotonic()
    cut = None
    for byte in request:
        try:
            slow.sendall(bytes([byte]))
        except OSError:
            cut = time.monotonic() - started
            break
        # Meanwhile another client is answered at once.
        if byte == ord("\n"):
            assert Http(s, served.allow).modern("tools/list")[0] == 200
        time.sleep(0.2)
        slow.settimeout(0.01)
        try:
            if slow.recv(1) == b"":
                cut = time.monotonic() - started
                break
        except socket.timeout:
            pass
        except OSError:
            cut = time.monotonic() - started
            break
    if cut is None:  # the request line trickled in; the rest never comes
        slow.settimeout(TIMEOUT)
        try:
            assert slow.recv(1) == b""
        except OSError:
            pass
        cut = time.monotonic() - started
    assert cut < 10, cut


def test_clients_connecting_all_at_once_are_all_served(served, server):
    # A team's agents starting together: as many connections at once as the server serves
    # by default, each with one request. A listen queue of 5 reset about half of them.
    s = server()
    count = 64
    barrier = threading.Barrier(count)
    statuses = []

    def client():
        barrier.wait()
        try:
            statuses.append(Http(s, served.allow).modern("tools/list")[0])
        except OSError as exc:
            statuses.append(type(exc).__name__)

    threads = [threading.Thread(target=client) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert statuses == [200] * count


# -- what the issue found: versions in a session, own addresses, CORS, logs ----------------------


def test_a_session_serves_any_handshake_version_it_speaks_and_refuses_others(served, server):
    """2025-11-25/basic/transports.mdx, "Protocol Version Header": 400 is for "an invalid or
    unsupported MCP-Protocol-Version"; the SDKs' servers and the conformance suite send any
    supported one inside a session (0.1.16 sends 2025-03-26 in a 2025-11-25 session)."""
    s = server()
    client = Http(s, served.allow)
    session = initialize(client)
    for version, status in (("2025-11-25", 200), ("2025-03-26", 200), ("2024-11-05", 200),
                            ("1999-01-01", 400), ("2026-07-28", 400)):
        got, _, text = client.post({"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
                                   {"Mcp-Session-Id": session, "MCP-Protocol-Version": version})
        assert got == status, (version, text)


def test_the_servers_own_address_is_never_misdirected(served, server):
    """A server on 127.0.0.2 (a loopback address, but not one of the usual names) answers
    requests made to 127.0.0.2, Origin included; another name is still 421."""
    s = server(host="127.0.0.2")
    client = Http(s, served.allow)
    assert client.modern("tools/list")[0] == 200
    assert client.modern("tools/list", headers={
        "Origin": "http://127.0.0.2:%d" % s.port})[0] == 200
    assert client.modern("tools/list", headers={"Host": "evil.example:%d" % s.port})[0] == 421


def non_loopback_address():
    """An address of this machine that is not loopback, or None."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: it only picks a route
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_a_server_beyond_this_machine_answers_its_own_address(served, server):
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    s = server(host=address)
    client = Http(s, served.allow)
    assert client.modern("tools/list")[0] == 200
    assert client.modern("tools/list", headers={
        "Origin": "http://%s:%d" % (address, s.port)})[0] == 200
    assert "beyond this machine" in s.text()


def test_allowed_origins_get_cors_and_a_preflight(served, server):
    """The Fetch standard's CORS protocol for --allow-origin: a browser preflights every POST
    (Authorization and application/json are not safelisted) and must read Mcp-Session-Id."""
    s = server("--allow-origin", "https://app.example")
    conn = http.client.HTTPConnection(s.host, s.port, timeout=TIMEOUT)
    asked = "authorization, content-type, mcp-protocol-version, mcp-method, mcp-name"
    conn.request("OPTIONS", "/mcp", headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": asked})
    response = conn.getresponse()
    response.read()
    assert response.status == 204
    assert response.getheader("Access-Control-Allow-Origin") == "https://app.example"
    assert "POST" in response.getheader("Access-Control-Allow-Methods")
    assert response.getheader("Access-Control-Allow-Headers") == asked
    assert response.getheader("Vary") == "Origin"
    for origin, method, headers in (("https://evil.example", "POST", "content-type"),
                                    ("https://app.example", "PUT", "content-type"),
                                    ("https://app.example", "POST", "x-evil")):
        conn.request("OPTIONS", "/mcp", headers={
            "Origin": origin, "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": headers})
        refused = conn.getresponse()
        refused.read()
        assert refused.status == 403 and not refused.getheader("Access-Control-Allow-Origin")
    client = Http(s, served.allow)
    status, headers, _ = client.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "browser", "version": "1"}}}, {"Origin": "https://app.example"})
    assert status == 200 and headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert "Mcp-Session-Id" in headers["Access-Control-Expose-Headers"]
    status, headers, _ = Http(s).post({"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                      {"Origin": "https://app.example"})
    assert status == 401 and "WWW-Authenticate" in headers["Access-Control-Expose-Headers"]


def test_every_401_is_logged_with_its_reason_and_never_the_token(served, server):
    s = server()
    wrong = "kbt_" + "x" * 43
    for token, header in ((None, None), (None, "Basic dXNlcjpwYXNz"), (wrong, None),
                          ("not-ours", None)):
        client = Http(s, token)
        status, _, _ = client.post({"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                   {"Authorization": header} if header else None)
        assert status == 401
    with kbcite.KBStore(str(served.path)) as store:
        store.tokens.revoke("support-deny")
    assert Http(s, served.deny).post({"jsonrpc": "2.0", "id": 1, "method": "ping"})[0] == 401
    s.wait_for_log("401 for", count=5)
    log = s.text()
    for reason in ("no Authorization header", "not Bearer TOKEN", "no token of this store",
                   "does not start with kbt_", "token 'support-deny' was revoked"):
        assert reason in log, log
    assert wrong not in log and served.deny not in log and "dXNlcjpwYXNz" not in log


def test_a_declined_approval_is_logged(served, server):
    """mrtr.mdx: the retry carries the person's answer; a decline writes nothing, and the log
    says so, as a session's decline always did."""
    s = server()
    client = Http(s, served.support)
    status, read = client.modern("tools/call", {"name": "read_knowledge_article", "arguments": {
        "knowledge_base_id": "support", "article_id": served.password}})
    arguments = {"knowledge_base_id": "support", "article_id": served.password,
                 "content": "Declined.", "expected_version": structured(read)["updated_at"],
                 "idempotency_key": "d1"}
    _, first = client.modern("tools/call", {"name": EDIT, "arguments": arguments},
                             capabilities={"elicitation": {}})
    _, done = client.modern("tools/call", {
        "name": EDIT, "arguments": arguments, "requestState": first["result"]["requestState"],
        "inputResponses": {"approve": {"action": "decline"}}}, request_id=2,
        capabilities={"elicitation": {}})
    assert done["result"]["isError"] is True
    s.wait_for_log("not approved: 'decline'")


def test_a_question_whose_client_went_away_ends_at_once(served, server):
    """Ten ask-mode edits whose clients close their streams once asked: each question ends
    unanswered at once (not after the 600 s a person gets), and nothing is written."""
    s = server()
    client = Http(s, served.support)
    session = initialize(client, {"elicitation": {}})
    with kbcite.KBStore(str(served.path)) as store:
        before = store.get_article("support", served.password)
    streams = []
    for i in range(10):
        body = json.dumps({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": {
            "name": EDIT, "arguments": {
                "knowledge_base_id": "support", "article_id": served.password,
                "content": "Never approved %d." % i, "expected_version": before["updated_at"],
                "idempotency_key": "gone-%d" % i}}}).encode()
        sock = connect(s)
        sock.sendall(head(s, token=served.support, headers=[
            ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", session), ("MCP-Protocol-Version", "2025-11-25"),
            ("Content-Length", str(len(body)))]) + body)
        received = b""
        while b"elicitation/create" not in received:
            received += sock.recv(65536)
        streams.append(sock)
    started = time.monotonic()
    for sock in streams:
        sock.close()
    s.wait_for_log("the question ends unanswered", count=10, timeout=10)
    assert time.monotonic() - started < 5
    with kbcite.KBStore(str(served.path)) as store:
        assert store.get_article("support", served.password) == before
    assert client.post({"jsonrpc": "2.0", "id": 99, "method": "ping"}, {
        "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})[0] == 200


def test_a_modern_edit_whose_client_went_away_is_cancelled(served, server, hold_write_lock):
    """2026-07-28/basic/transports/streamable-http.mdx, "Cancellation": closing the response
    stream is the request's cancellation. An edit waiting for another writer's lock stops
    where it waits, and nothing is written when the lock comes free."""
    s = server()
    with kbcite.KBStore(str(served.path)) as store:
        before = store.get_article("support", served.password)
    body = json.dumps({"jsonrpc": "2.0", "id": "gone", "method": "tools/call", "params": {
        "name": EDIT, "arguments": {
            "knowledge_base_id": "support", "article_id": served.password,
            "content": "Never written.", "expected_version": before["updated_at"],
            "idempotency_key": "modern-gone"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
    with hold_write_lock(served.path) as release:
        sock = connect(s)
        sock.sendall(head(s, token=served.allow, headers=[
            ("Content-Type", "application/json"), ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/call"), ("Mcp-Name", EDIT),
            ("Content-Length", str(len(body)))]) + body)
        time.sleep(1)
        sock.close()
        s.wait_for_log("the client closed its connection, which cancels it")
        release()
    time.sleep(1)
    with kbcite.KBStore(str(served.path)) as store:
        assert store.get_article("support", served.password) == before


def test_sessions_expire_are_capped_per_token_and_end_with_their_token(served, server):
    """transports.mdx, "Session Management" 3: the server may end a session; the client then
    hears 404 and initializes anew. Idle ones end, a token's oldest beyond its cap end, and
    revoking the token ends them all."""
    s = server("--session-timeout", "2", "--sessions-per-token", "2")
    client = Http(s, served.allow)

    def alive(session):
        return client.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, {
            "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})[0] == 200
    first, second, third = (initialize(client) for _ in range(3))
    assert [alive(x) for x in (first, second, third)] == [False, True, True]
    time.sleep(1.2)
    assert alive(third)
    time.sleep(1.2)
    assert not alive(second) and alive(third)  # idle 2.4 s against used 1.2 s ago
    kept = initialize(Http(s, served.internal))
    with kbcite.KBStore(str(served.path)) as store:
        store.tokens.revoke("support-allow")
        assert store.sessions.find(third, "support-allow", idle_s=60) is None
        assert store.sessions.find(kept, "internal-only", idle_s=60) is not None


def test_reads_are_answered_while_edits_wait_for_a_lock(served, server, hold_write_lock):
    """Twelve edits waiting for another writer's lock (more than the server's threads), each on
    a connection of its own: a read-only token's read is answered at once."""
    s = server()
    with kbcite.KBStore(str(served.path)) as store:
        version = store.get_article("support", served.password)["updated_at"]
    results = []

    def edit(i):
        results.append(Http(s, served.allow).modern("tools/call", {"name": EDIT, "arguments": {
            "knowledge_base_id": "support", "article_id": served.password,
            "content": "Waited %d." % i, "expected_version": version,
            "idempotency_key": "wait-%d" % i}})[0])
    with hold_write_lock(served.path) as release:
        editors = [threading.Thread(target=edit, args=(i,)) for i in range(12)]
        for thread in editors:
            thread.start()
        time.sleep(1)
        started = time.monotonic()
        status, reply = Http(s, served.deny).modern("tools/call", {
            "name": "read_knowledge_article", "arguments": {
                "knowledge_base_id": "support", "article_id": served.billing}})
        assert status == 200 and structured(reply)["article_id"] == served.billing
        assert time.monotonic() - started < 2
        release()
        for thread in editors:
            thread.join(TIMEOUT)
    assert results == [200] * 12


def test_the_help_states_the_defaults_the_http_modules_use():
    from kbcite import tokens
    from kbcite.server.http import h11_guard, handshakes, settings
    assert cli.HTTP_DEFAULTS == {
        "max_body": settings.MAX_BODY, "max_connections": h11_guard.MAX_CONNECTIONS,
        "request_timeout": h11_guard.REQUEST_TIMEOUT_S, "idle_timeout": h11_guard.IDLE_TIMEOUT_S,
        "session_timeout": handshakes.SESSION_TIMEOUT_S,
        "sessions_per_token": handshakes.SESSIONS_PER_TOKEN,
        "web_session_timeout": tokens.WEB_SESSION_TIMEOUT_S,
        "web_sessions_per_token": tokens.WEB_SESSIONS_PER_TOKEN,
        "keepalive": settings.KEEPALIVE_S, "subscriptions_per_token": SUBSCRIPTIONS_MAX}
    from kbcite.server import options
    from kbcite.server.http import connection_guard
    assert options.PARSERS == connection_guard.PARSERS


def test_the_guarded_parser_is_httptools_where_installed_and_h11_when_asked():
    pytest.importorskip("httptools")
    from kbcite.server.http.connection_guard import Guard
    from kbcite.server.http.h11_guard import GuardedH11Protocol
    from kbcite.server.http.httptools_guard import GuardedHttpToolsProtocol
    from kbcite.server.http.serve import protocol_class
    assert protocol_class(Guard()) is GuardedHttpToolsProtocol
    assert protocol_class(Guard(parser="httptools")) is GuardedHttpToolsProtocol
    assert protocol_class(Guard(parser="h11")) is GuardedH11Protocol


WITHOUT_UVICORN = """
import sys
sys.modules["uvicorn"] = None  # as if the [http] extra were not installed
sys.modules["h11"] = None
from kbcite.server.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_the_http_extra_http_says_what_to_install_and_stdio_still_runs(served):
    done = subprocess.run([sys.executable, "-c", WITHOUT_UVICORN, "--db", str(served.path),
                           "--http", "127.0.0.1:0"], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=str(ROOT), env=child_env())
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == cli.MISSING_HTTP
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + "\n"
    done = subprocess.run([sys.executable, "-c", WITHOUT_UVICORN, "--db", str(served.path),
                           "--grant", "support"], input=line, capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=str(ROOT), env=child_env())
    assert done.returncode == 0 and json.loads(done.stdout)["result"] == {}


@pytest.mark.slow
def test_on_postgresql_a_lock_in_one_knowledge_base_delays_no_call_of_another(pg_url):
    """A token granted only internal: its reads and edits are answered at once while twelve
    edits of support wait for a lock another session holds on support's row; no timing tells
    it of support's lock."""
    import psycopg

    made = make_db(pg_url)
    with kbcite.KBStore(pg_url) as store:
        writer = store.tokens.create("support-writer", ["support"], "allow")
        other = store.tokens.create("internal-only", ["internal"], "allow")
        version = store.get_article("support", made.password)["updated_at"]
    s = Server(pg_url)
    results = []
    try:
        def edit(i):
            results.append(Http(s, writer).modern("tools/call", {"name": EDIT, "arguments": {
                "knowledge_base_id": "support", "article_id": made.password,
                "content": "Waited %d." % i, "expected_version": version,
                "idempotency_key": "pg-wait-%d" % i}})[0])
        with psycopg.connect(pg_url) as holder:
            holder.execute("SELECT pk FROM knowledge_bases WHERE kb_id = 'support' FOR UPDATE")
            editors = [threading.Thread(target=edit, args=(i,)) for i in range(12)]
            for thread in editors:
                thread.start()
            time.sleep(1)
            client = Http(s, other)
            started = time.monotonic()
            status, read = client.modern("tools/call", {"name": "read_knowledge_article",
                                                        "arguments": {
                                                            "knowledge_base_id": "internal",
                                                            "article_id": "art-000001"}})
            status, edited = client.modern("tools/call", {"name": EDIT, "arguments": {
                "knowledge_base_id": "internal", "article_id": "art-000001",
                "content": "Moved.", "expected_version": structured(read)["updated_at"],
                "idempotency_key": "pg-other"}})
            assert structured(edited)["replayed"] is False
            assert time.monotonic() - started < 2
            holder.rollback()
        for thread in editors:
            thread.join(TIMEOUT)
        assert results == [200] * 12
    finally:
        s.stop()


@pytest.mark.slow
def test_the_store_failing_while_a_token_is_checked_is_a_retryable_503(tmp_path):
    """PostgreSQL stops under the server: every request is answered 503 with Retry-After and
    a JSON-RPC error that says to retry (never a dropped connection, never a traceback), and
    the server serves again once the database is back."""
    pytest.importorskip("psycopg", reason="psycopg is not installed")
    binaries = postgres_binaries()
    if binaries is None:
        pytest.skip("no initdb and pg_ctl on this machine")
    cluster = PostgresCluster(*binaries)
    s = None
    try:
        make_db(cluster.url)
        with kbcite.KBStore(cluster.url) as store:
            token = store.tokens.create("outage", ["support"], "allow")
        s = Server(cluster.url)
        assert Http(s, token).modern("tools/list")[0] == 200
        cluster.stop()
        for method in ("tools/list", "tools/call"):
            params = {"name": "read_knowledge_article", "arguments": {
                "knowledge_base_id": "support", "article_id": "art-000001"}} \
                if method == "tools/call" else None
            for _ in range(5):
                client = Http(s, token)
                client.conn.request("POST", "/mcp", body=json.dumps({
                    "jsonrpc": "2.0", "id": 1, "method": method, "params": dict(
                        params or {}, _meta={
                            "io.modelcontextprotocol/protocolVersion": MODERN,
                            "io.modelcontextprotocol/clientCapabilities": {}})}), headers={
                    "Content-Type": "application/json", "Authorization": "Bearer " + token,
                    "MCP-Protocol-Version": MODERN, "Mcp-Method": method,
                    "Mcp-Name": "read_knowledge_article"})
                response = client.conn.getresponse()
                body = json.loads(response.read())
                assert response.status == 503 and response.getheader("Retry-After") == "1"
                assert body["error"]["data"]["retryable"] is True, body
        cluster.start()
        deadline = time.monotonic() + 20
        while Http(s, token).modern("tools/list")[0] != 200:
            assert time.monotonic() < deadline, s.text()
            time.sleep(0.2)
        assert "Traceback" not in s.text()
        assert "503 for 127.0.0.1: the store failed" in s.text()
    finally:
        if s is not None:
            s.stop()
        cluster.remove()
