"""A revoked token's notification streams hear nothing more and end at once: the watcher
looks at revocations before every look at the event log, so a change saved just after the
revocation never reaches the stream, and the stream ends (with the listen request's result,
2026-07-28 "Graceful Closure") within a fraction of a second, not at the next 5 s check. A
server of this checkout on an ephemeral port and a fresh store."""

import http.client
import json
import time

import pytest

import kbcite
from kbcite.server.resources import format_uri
from support.stdio_client import make_db

MODERN = "2026-07-28"
# Generous for a loaded machine: the watcher looks every 0.2 s; the old one every 5 s.
ENDS_WITHIN_S = 2.0


@pytest.fixture
def served(tmp_path):
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        made.token = store.create_token("streams", ["support"], "allow")
    return made


def messages(response):
    """The stream's messages, one at a time (keep-alive comments skipped)."""
    data = []
    while True:
        line = response.readline()
        if not line:
            return
        line = line.rstrip(b"\r\n")
        if line.startswith(b"data: "):
            data.append(line[6:])
        elif not line and data:
            yield json.loads(b"".join(data))
            data = []


@pytest.mark.parametrize("attempt", range(3))
def test_a_revoked_tokens_stream_hears_nothing_more_and_ends_at_once(served, server, attempt):
    s = server()
    uri = format_uri("support", served.password)
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    conn.request("POST", "/mcp", json.dumps({
        "jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": {
            "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                      "io.modelcontextprotocol/clientCapabilities": {}},
            "notifications": {"resourceSubscriptions": [uri]}}}), {
        "Authorization": "Bearer " + served.token, "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen"})
    response = conn.getresponse()
    assert response.status == 200
    stream = messages(response)
    assert next(stream)["method"] == "notifications/subscriptions/acknowledged"
    time.sleep(0.3 * attempt)  # the revocation at other points of the watcher's cycle
    with kbcite.KBStore(str(served.path)) as store:
        revoked = time.monotonic()
        store.revoke_token("streams")
        store.save_article("support", served.password, content="Saved after the revocation.")
    heard = list(stream)
    ended = time.monotonic() - revoked
    assert [m.get("method", "result") for m in heard] == ["result"], heard
    assert heard[0]["id"] == 7
    assert ended < ENDS_WITHIN_S, ended
    print("the stream ended %.3f s after the revocation" % ended)
