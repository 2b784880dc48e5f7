"""kb-server over Streamable HTTP, spoken to with raw HTTP: tokens that carry grants, the
2026-07-28 routing headers, handshake sessions with their event streams, and hostile clients.

Each test names the specification section it follows (docs/specification/<revision>/...).
"""

import http.client
import json
import socket
import threading
import time

import pytest

import kbcite
from kbcite.server.http import MAX_CONNECTIONS, Stream
from kbcite.server.session import Call, Cancelled, Session
from kbcite.testing import dump_file as store_dump
from support.http_server import TIMEOUT, Server
from support.stdio_client import EDIT, make_db

MODERN = "2026-07-28"


class Http:
    """One HTTP connection to the server, with a token."""

    def __init__(self, server, token=None):
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
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
        return response.status, dict(response.getheaders()), response.read().decode("utf-8")

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
        made.support = store.create_token("support-ask", ["support"], "ask")
        made.support2 = store.create_token("support-ask-2", ["support"], "ask")
        made.allow = store.create_token("support-allow", ["support"], "allow")
        made.deny = store.create_token("support-deny", ["support"], "deny")
        made.internal = store.create_token("internal-only", ["internal"], "allow")
    return made


@pytest.fixture
def server(served):
    started = []

    def start(*extra):
        s = Server(served.path, *extra)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


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
        store.revoke_token("support-allow")
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


def test_modern_errors_have_their_http_statuses(served, server):
    """streamable-http.mdx, "Request Metadata": unknown method 404; versions 400 -32022."""
    s = server()
    client = Http(s, served.allow)
    status, reply = client.modern("resources/list")
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
    assert b"Content-Type: text/event-stream" in received
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


def test_connections_beyond_the_cap_get_503(served, server):
    s = server("--max-connections", "2")
    held = [socket.create_connection(("127.0.0.1", s.port), timeout=TIMEOUT) for _ in range(2)]
    time.sleep(0.3)
    extra = socket.create_connection(("127.0.0.1", s.port), timeout=TIMEOUT)
    assert extra.recv(64).startswith(b"HTTP/1.1 503")
    for sock in held:
        sock.close()
    time.sleep(0.3)
    assert Http(s, served.allow).modern("tools/list")[0] == 200


def test_clients_connecting_all_at_once_are_all_served(served, server):
    # A team's agents starting together: as many connections at once as the server serves
    # by default, each with one request. A listen queue of 5 reset about half of them.
    s = server()
    count = MAX_CONNECTIONS
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


def test_a_question_the_stream_cannot_carry_is_not_waited_for():
    """A client gone before its question could be written: the call ends as cancelled at
    once, instead of holding a worker for the whole approval timeout."""
    class Gone:
        def write(self, data):
            raise BrokenPipeError("the client hung up")

        def flush(self):
            pass

    class Handler:
        wfile = Gone()
        close_connection = False

        def send_response(self, status):
            pass

        def send_header(self, name, value):
            pass

        def end_headers(self):
            pass

    session = Session(principal=None, session_id="s")
    call = Call("r1")
    outcome = []

    def ask():
        try:
            Stream(Handler(), {}).ask(session, call, {"message": "Approve?"})
        except Cancelled:
            outcome.append("cancelled")

    worker = threading.Thread(target=ask, daemon=True)
    worker.start()
    worker.join(5)
    assert outcome == ["cancelled"] and not worker.is_alive()
    assert session.asks == {}
