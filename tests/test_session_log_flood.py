"""A flood of initialize calls from one token writes a few log lines, as a flood of refusals
does: 20,000 of them wrote 39,977 lines (each session's line, and each session it pushed out
past --sessions-per-token). A server of this checkout on an ephemeral port, a fresh store."""

import http.client
import json

import pytest

import kbcite
from kbcite.server.throttle import Throttle
from support.stdio_client import make_db

FLOOD = 150


@pytest.fixture
def served(tmp_path):
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        made.token = store.create_token("flood", ["support"], "allow")
    return made


def test_an_initialize_flood_writes_a_few_log_lines(served, server):
    s = server("--sessions-per-token", "4")
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    for i in range(FLOOD):
        conn.request("POST", "/mcp", json.dumps({
            "jsonrpc": "2.0", "id": i, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "flood", "version": "1"}}}), {
            "Authorization": "Bearer " + served.token, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"})
        response = conn.getresponse()
        response.read()
        assert response.status == 200
    s.wait_for_log("session ", count=1)
    lines = [line for line in s.text().splitlines() if "session " in line]
    burst = Throttle(None).burst
    # Each kind (the sessions, the sessions pushed out) its burst in the window, and no more.
    assert len(lines) <= 2 * burst + 2, len(lines)
    assert any("client flood 1" in line for line in lines)
