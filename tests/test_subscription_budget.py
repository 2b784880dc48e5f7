"""Listen streams cannot pin a server's memory: a subscribed URI is no longer than a real
article's can be, one token's streams hold a bounded number of bytes of them, and what a
stream held is let go when it closes. The issue's reproduction (16 listen streams, the
per-token cap, of 1,000 URIs of 7.9 KB each) took a process from 31 to 482 MB; here a
server of this checkout on an ephemeral port and a fresh store grows by less than 50 MB."""

import json
import socket
import time

import pytest

import kbcite
from kbcite.server.resources import URI_MAX
from kbcite.server.subscriptions import STREAMS_PER_TOKEN
from support.stdio_client import make_db

MODERN = "2026-07-28"
GROWTH_MAX_MB = 50


@pytest.fixture
def served(tmp_path):
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        made.token = store.create_token("streams", ["support"], "allow")
    return made


def rss_mb(pid):
    with open("/proc/%d/status" % pid, encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmRSS")


def listen(s, token, uris, request_id):
    """Send a subscriptions/listen; ``(socket, status, first bytes of the answer)``."""
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen",
                       "params": {"_meta": {
                           "io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientCapabilities": {}},
                           "notifications": {"resourceSubscriptions": uris}}}).encode()
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=60)
    lines = ["POST /mcp HTTP/1.1", "Host: 127.0.0.1:%d" % s.port,
             "Authorization: Bearer " + token, "Accept: application/json, text/event-stream",
             "MCP-Protocol-Version: " + MODERN, "Mcp-Method: subscriptions/listen",
             "Content-Type: application/json", "Content-Length: %d" % len(body)]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    received = b""

    def more():
        chunk = sock.recv(65536)
        assert chunk, received
        return chunk
    while b"\r\n\r\n" not in received:
        received += more()
    status = int(received.split(b" ", 2)[1])
    if status == 200 and b"text/event-stream" in received:
        while b"data:" not in received:  # the acknowledgement: the stream is open
            received += more()
    return sock, status, received


def uris_of(length, count, stream):
    """``count`` distinct URIs of ``length`` characters (of article IDs no store holds)."""
    out = []
    for i in range(count):
        stem = "kb://support/articles/art-%d-%d-" % (stream, i)
        out.append(stem + "x" * (length - len(stem)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("length", [7900, URI_MAX])
def test_sixteen_listen_streams_of_long_uris_grow_the_server_under_50_mb(served, server,
                                                                         length):
    s = server()
    before = rss_mb(s.proc.pid)
    held, statuses = [], []
    for n in range(STREAMS_PER_TOKEN):
        sock, status, answer = listen(s, served.token, uris_of(length, 1000, n), n + 1)
        statuses.append((status, b"text/event-stream" in answer))
        held.append(sock)
    time.sleep(0.5)
    grown = rss_mb(s.proc.pid) - before
    opened = sum(1 for status, streaming in statuses if status == 200 and streaming)
    for sock in held:
        sock.close()
    time.sleep(1.5)
    after = rss_mb(s.proc.pid) - before
    print("length %d: grew %.1f MB with %d of %d streams open, %.1f MB after they closed"
          % (length, grown, opened, len(held), after))
    assert grown < GROWTH_MAX_MB, (grown, statuses)
    assert after < GROWTH_MAX_MB, after
    # Over the real length nothing opens; at it, the token's byte budget lets few open, and
    # the rest are told why (429, subscription_limit), not held.
    assert opened == 0 if length > URI_MAX else 1 <= opened < STREAMS_PER_TOKEN
    assert "Traceback" not in s.text()
