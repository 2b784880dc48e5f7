"""Resources and their notification streams over Streamable HTTP, spoken to in raw HTTP: a
2025-11-25 session's GET stream and its end, a 2026-07-28 listen stream with its keep-alives,
what the server says to a stream that cannot be opened, and the not-found's bytes.
"""

import http.client
import json
import socket
import time

import pytest

import kbcite
from kbcite.server.resources import format_uri
from support.http_server import Server
from support.stdio_client import make_db

MODERN = "2026-07-28"
TIMEOUT = 15


@pytest.fixture
def served(tmp_path):
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        made.token = store.tokens.create("streams", ["support"], "allow")
        made.secret = store.create_article("internal", "Secret", "Not for this token.")
    return made


def meta():
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}


def post(s, token, message, headers=None):
    """``(status, headers, body bytes)`` of one POST."""
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=TIMEOUT)
    sent = {"Authorization": "Bearer " + token, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"}
    sent.update(headers or {})
    conn.request("POST", "/mcp", json.dumps(message), sent)
    response = conn.getresponse()
    return response.status, response.headers, response.read()


def modern(s, token, method, params, request_id=1):
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    return post(s, token, {"jsonrpc": "2.0", "id": request_id, "method": method,
                           "params": dict(params, _meta=meta())}, headers)


def handshake(s, token):
    """A 2025-11-25 session, initialized: its ID."""
    status, headers, _ = post(s, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                         "params": {"protocolVersion": "2025-11-25",
                                                    "capabilities": {},
                                                    "clientInfo": {"name": "t", "version": "1"}}})
    assert status == 200
    session = headers["Mcp-Session-Id"]
    status, _, _ = post(s, token, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"Mcp-Session-Id": session})
    assert status == 202
    return session


def legacy(s, token, session, method, params, request_id=2):
    status, _, body = post(s, token, {"jsonrpc": "2.0", "id": request_id, "method": method,
                                      "params": params}, {"Mcp-Session-Id": session,
                                                          "MCP-Protocol-Version": "2025-11-25"})
    return status, json.loads(body)


class Stream:
    """A long-lived event stream read off a raw socket: its status, then event by event."""

    def __init__(self, s, method, token, headers=(), body=b""):
        self.sock = socket.create_connection(("127.0.0.1", s.port), timeout=TIMEOUT)
        lines = ["%s /mcp HTTP/1.1" % method, "Host: 127.0.0.1:%d" % s.port,
                 "Authorization: Bearer " + token, "Accept: application/json, text/event-stream"]
        lines += ["%s: %s" % pair for pair in headers]
        if body:
            lines += ["Content-Type: application/json", "Content-Length: %d" % len(body)]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        self.buffer = b""
        head = self._until(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1])
        self.chunked = b"transfer-encoding: chunked" in head.lower()
        self.text = b""

    def _until(self, mark):
        while mark not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError(self.buffer)
            self.buffer += data
        found, _, self.buffer = self.buffer.partition(mark)
        return found

    def _chunk(self):
        size = int(self._until(b"\r\n"), 16)
        if size == 0:
            raise EOFError("the stream ended")
        while len(self.buffer) < size + 2:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError(self.buffer)
            self.buffer += data
        chunk, self.buffer = self.buffer[:size], self.buffer[size + 2:]
        return chunk

    def next(self, timeout=TIMEOUT):
        """The next event: ``(\"comment\", b\"\")`` for a keep-alive, or ``(\"message\", dict)``."""
        self.sock.settimeout(timeout)
        while b"\r\n\r\n" not in self.text:
            self.text += self._chunk()
        block, _, self.text = self.text.partition(b"\r\n\r\n")
        if block.startswith(b":"):
            return "comment", b""
        data = [line[6:] for line in block.split(b"\r\n") if line.startswith(b"data: ")]
        return "message", json.loads(b"".join(data))

    def message(self, timeout=TIMEOUT):
        """The next message, keep-alives skipped."""
        while True:
            kind, value = self.next(timeout)
            if kind == "message":
                return value

    def ended(self, timeout=TIMEOUT):
        """Whether the server ends the stream (within ``timeout``) without another message."""
        try:
            while True:
                kind, value = self.next(timeout)
                assert kind == "comment", value
        except EOFError:
            return True

    def close(self):
        self.sock.close()


def save(served, article_id, content):
    with kbcite.KBStore(str(served.path)) as store:
        return store.save_article("support", article_id, content=content)


def test_a_sessions_get_stream_carries_its_subscriptions_from_any_request(served, server):
    """2025-11-25 transports.mdx "Listening for Messages from the Server": GET opens the
    session's stream; one a session (409 for a second); DELETE ends it."""
    s = server()
    session = handshake(s, served.token)
    stream = Stream(s, "GET", served.token, [("Mcp-Session-Id", session)])
    assert stream.status == 200
    assert stream.next() == ("comment", b"")  # open at once
    second = Stream(s, "GET", served.token, [("Mcp-Session-Id", session)])
    assert second.status == 409
    second.close()
    target = format_uri("support", served.password)
    hidden = format_uri("internal", served.secret)
    for uri in (target, hidden):
        assert legacy(s, served.token, session, "resources/subscribe",
                      {"uri": uri})[1]["result"] == {}
    with kbcite.KBStore(str(served.path)) as store:
        store.save_article("internal", served.secret, content="Hidden change.")
    save(served, served.password, "Changed by someone else.")
    started = time.monotonic()  # committed
    message = stream.message()
    assert time.monotonic() - started < 1.0
    assert message == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                       "params": {"uri": target}}
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=TIMEOUT)
    conn.request("DELETE", "/mcp", headers={"Authorization": "Bearer " + served.token,
                                            "Mcp-Session-Id": session})
    assert conn.getresponse().status == 204
    save(served, served.password, "Changed after the session ended.")
    assert stream.ended(timeout=10)  # the watcher drops it with its session
    stream.close()


def test_a_get_without_a_live_session_opens_nothing(served, server):
    s = server()
    for headers, status in (((), 405), ((("Mcp-Session-Id", "nope"),), 404)):
        stream = Stream(s, "GET", served.token, headers)
        assert stream.status == status
        stream.close()


def test_a_listen_stream_acknowledges_first_keeps_alive_and_tags_what_it_sends(served, server):
    """2026-07-28 basic/patterns/subscriptions.mdx and transports/streamable-http.mdx:
    acknowledgement first, SSE comments as keep-alives, nothing that was not asked for."""
    s = server("--keepalive", "0.3")
    target = format_uri("support", served.password)
    body = json.dumps({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
                       "params": {"_meta": meta(), "notifications": {
                           "toolsListChanged": True, "resourcesListChanged": True,
                           "resourceSubscriptions": [target]}}}).encode()
    stream = Stream(s, "POST", served.token, [("MCP-Protocol-Version", MODERN),
                                              ("Mcp-Method", "subscriptions/listen")], body)
    assert stream.status == 200
    tag = {"io.modelcontextprotocol/subscriptionId": "listen-1"}
    assert stream.next() == ("message", {
        "jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": tag, "notifications": {"resourcesListChanged": True,
                                                   "resourceSubscriptions": [target]}}})
    assert stream.next(timeout=5) == ("comment", b"")
    save(served, served.billing, "Not subscribed to: says nothing.")
    save(served, served.password, "Subscribed to.")
    assert stream.message() == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                "params": {"_meta": tag, "uri": target}}
    with kbcite.KBStore(str(served.path)) as store:
        store.unpublish("support", served.billing)
    assert stream.message() == {"jsonrpc": "2.0",
                                "method": "notifications/resources/list_changed",
                                "params": {"_meta": tag}}
    stream.close()


@pytest.mark.slow
def test_revoking_the_token_ends_its_listen_stream(served, server):
    s = server()
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
                       "params": {"_meta": meta(), "notifications": {
                           "resourceSubscriptions": [format_uri("support", served.password)]}}})
    stream = Stream(s, "POST", served.token, [("MCP-Protocol-Version", MODERN),
                                              ("Mcp-Method", "subscriptions/listen")],
                    body.encode())
    assert stream.message()["method"] == "notifications/subscriptions/acknowledged"
    with kbcite.KBStore(str(served.path)) as store:
        store.tokens.revoke("streams")
    # The graceful end: the listen request's result, then the stream closes.
    assert stream.message(timeout=15) == {
        "jsonrpc": "2.0", "id": 7, "result": {
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}
    assert stream.ended(timeout=5)
    stream.close()


def test_a_server_that_stops_ends_its_listen_streams_with_their_result(served):
    """2026-07-28 subscriptions.mdx "Graceful Closure": the server SHOULD send the listen
    request's result, then close the stream."""
    s = Server(served.path)
    body = json.dumps({"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen",
                       "params": {"_meta": meta(), "notifications": {
                           "resourcesListChanged": True}}}).encode()
    stream = Stream(s, "POST", served.token, [("MCP-Protocol-Version", MODERN),
                                              ("Mcp-Method", "subscriptions/listen")], body)
    assert stream.message()["method"] == "notifications/subscriptions/acknowledged"
    started = time.monotonic()
    s.proc.terminate()
    ended = stream.message()
    assert ended["id"] == "l" and ended["result"]["_meta"] == {
        "io.modelcontextprotocol/subscriptionId": "l"}
    assert stream.ended()
    s.proc.wait(timeout=15)  # uvicorn re-raises SIGTERM once it has shut down
    assert time.monotonic() - started < 4  # not the 5 s grace of a request that never ends
    stream.close()


def test_subscriptions_are_bounded_per_token(served, server):
    s = server("--subscriptions-per-token", "2")
    one, two = handshake(s, served.token), handshake(s, served.token)
    for session, uri in ((one, "kb://support/articles/a"), (two, "kb://support/articles/b")):
        assert legacy(s, served.token, session, "resources/subscribe",
                      {"uri": uri})[1]["result"] == {}
    # Subscribing again to one already held is fine; a third is refused, saying why.
    assert legacy(s, served.token, one, "resources/subscribe",
                  {"uri": "kb://support/articles/a"})[1]["result"] == {}
    refused = legacy(s, served.token, two, "resources/subscribe",
                     {"uri": "kb://support/articles/c"})[1]["error"]
    assert refused["data"] == {"reason": "subscription_limit"}
    assert "unsubscribe some first" in refused["message"]
    assert legacy(s, served.token, one, "resources/unsubscribe",
                  {"uri": "kb://support/articles/a"})[1]["result"] == {}
    assert legacy(s, served.token, two, "resources/subscribe",
                  {"uri": "kb://support/articles/c"})[1]["result"] == {}


def test_ungranted_and_missing_read_the_same_bytes_over_http(served, server):
    s = server()
    answers = set()
    for uri in (format_uri("internal", served.secret), format_uri("internal", "art-999999"),
                format_uri("nowhere", served.password), format_uri("support", served.draft)):
        status, headers, body = modern(s, served.token, "resources/read", {"uri": uri})
        assert status == 400
        answers.add(body.replace(json.dumps(uri).encode(), b'"URI"'))
    assert len(answers) == 1
    session = handshake(s, served.token)
    legacy_answers = {json.dumps(legacy(s, served.token, session, "resources/read",
                                        {"uri": uri})[1]).replace(uri, "URI")
                      for uri in (format_uri("internal", served.secret),
                                  format_uri("nowhere", "x"))}
    assert len(legacy_answers) == 1 and '"code": -32002' in legacy_answers.pop()
