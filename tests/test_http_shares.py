"""One client address cannot hold every connection slot of kb-server --http: past its share
(--max-connections / 8) and past the cap, connections are on probation and only one whose
request carries a valid token stays, so idle sockets from one address (more than the cap)
hold no client with a token out, even a client from that same address. Real sockets on the
loopback address, a server of this checkout on an ephemeral port and a fresh store."""

import socket
import time

import pytest

import kbcite
from kbcite.server.h11_guard import ADDRESS_SHARE, GRACE_S
from support.http_server import connect, head, read_until_closed, responses
from support.stdio_client import make_db

PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
CAP = 64


@pytest.fixture
def served(tmp_path):
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        made.token = store.create_token("shares", ["support"], "allow")
    return made


def request(server, token, keep=False):
    return head(server, token=token, headers=[
        ("Content-Type", "application/json"), ("Content-Length", str(len(PING)))]
        + ([] if keep else [("Connection", "close")])) + PING


def post(server, token):
    """One whole POST on a fresh connection; the statuses answered before the close."""
    sock = connect(server)
    sock.sendall(request(server, token))
    return responses(read_until_closed(sock))


def test_more_idle_sockets_than_the_cap_from_one_address_hold_no_client_out(served, server):
    s = server("--max-connections", str(CAP))
    idle = [connect(s) for _ in range(CAP * 2 + 20)]
    time.sleep(2 * GRACE_S)  # each idle one has had its grace: it may make room
    answers = [post(s, served.token) for _ in range(20)]
    assert sum(a == [200] for a in answers) >= 19, answers
    for sock in idle:
        sock.close()
    assert "Traceback" not in s.text()


def test_a_connection_past_the_share_whose_request_has_no_token_is_closed(served, server):
    s = server("--max-connections", str(CAP))
    share = [connect(s) for _ in range(CAP // ADDRESS_SHARE)]
    time.sleep(0.3)
    sock = connect(s)
    sock.sendall(request(s, None, keep=True))  # keep-alive asked, no token
    assert responses(read_until_closed(sock)) == [401]  # and closed after it
    sock = connect(s)
    sock.sendall(request(s, served.token, keep=True) * 2)  # a valid token: kept, both served
    sock.settimeout(10)
    received = b""
    while received.count(b"HTTP/1.1 200") < 2:
        chunk = sock.recv(65536)
        assert chunk, received
        received += chunk
    sock.close()
    for held in share:
        held.close()


def test_past_the_cap_and_its_reserve_with_no_idle_socket_to_close_is_503(served, server):
    """Eight connections (the cap) and one more (the reserve: 8 / 8), each authenticated
    and kept: nothing may be closed to make room, so one more gets 503 at once."""
    s = server("--max-connections", "8")
    held = []
    for _ in range(9):
        sock = connect(s)
        sock.sendall(request(s, served.token, keep=True))
        received = b""
        while b'"result"' not in received:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
        held.append(sock)
    extra = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    assert extra.recv(64).startswith(b"HTTP/1.1 503")
    for sock in held:
        sock.close()
    time.sleep(0.3)
    assert post(s, served.token) == [200]
