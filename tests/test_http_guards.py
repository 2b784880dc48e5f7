"""kb-server over HTTP against clients that attack the connection itself, with real sockets on
the loopback address: sockets that never finish a request, heads too large, framing two
readers would read differently, lengths that are not numbers, and idle connections; each test
on both parsers (--http-parser httptools and h11), behind the same guards.

RFC 9112 (HTTP/1.1) and RFC 9110 (HTTP semantics) are what each test follows.
"""

import socket
import threading
import time

import pytest

import kbcite
from support.http_server import (connect, head, read_until_closed,
                                 responses)
from support.stdio_client import make_db

PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'


@pytest.fixture(params=["httptools", "h11"])
def guarded(request, server):
    """``server(*flags)`` with ``--http-parser`` set to each parser in turn."""
    if request.param == "httptools":
        pytest.importorskip("httptools")

    def start(*flags, **kwargs):
        return server("--http-parser", request.param, *flags, **kwargs)
    start.parser = request.param
    return start


@pytest.fixture
def served(tmp_path):
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        made.token = store.tokens.create("guards", ["support"], "allow")
    return made


def post(server, token, body=PING, headers=()):
    """One whole POST on a fresh connection; the status codes answered before the close."""
    sock = connect(server)
    sock.sendall(head(server, token=token, headers=[
        ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
        ("Connection", "close")] + list(headers)) + body)
    return responses(read_until_closed(sock))


def test_a_client_is_served_while_idle_and_trickling_sockets_are_open(served, guarded):
    """Slowloris: 300 sockets that never finish a request (idle, a head a byte at a time, a
    body a byte at a time) hold no slot a client needs, and each is closed by its deadline."""
    s = guarded("--request-timeout", "3", "--idle-timeout", "3")
    attackers = []
    for i in range(300):
        sock = connect(s)
        if i % 3 == 1:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
        elif i % 3 == 2:
            sock.sendall(head(s, token=served.token, headers=[
                ("Content-Type", "application/json"), ("Content-Length", "100000")]) + b"{")
        attackers.append(sock)
    stop = threading.Event()

    def trickle():
        while not stop.wait(0.5):
            for i, sock in enumerate(attackers):
                if i % 3:  # the idle third sends nothing at all
                    try:
                        sock.send(b"X" if i % 3 == 1 else b" ")
                    except OSError:
                        pass
    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    try:
        for _ in range(10):
            started = time.monotonic()
            assert post(s, served.token) == [200]
            assert time.monotonic() - started < 1
        time.sleep(4)  # past both deadlines: the server has closed every attacker
        closed = 0
        for sock in attackers:
            sock.settimeout(0.2)
            try:
                data = sock.recv(65536)
                closed += data == b"" or data.startswith(b"HTTP/1.1 408")
            except socket.timeout:
                pass
            except OSError:
                closed += 1
        assert closed == len(attackers)
    finally:
        stop.set()
        trickler.join()
        for sock in attackers:
            sock.close()


@pytest.mark.parametrize("piece", [None, 4096], ids=["whole", "trickled"])
def test_a_head_over_64_kib_gets_431_and_the_connection_closes(served, guarded, piece):
    """RFC 6585 5: 431 Request Header Fields Too Large; whether the head arrives in one read
    or in pieces. A 60 KiB head is still served."""
    s = guarded()
    padding = [("X-Pad-%d" % i, "p" * 1000) for i in range(70)]
    data = head(s, token=served.token, headers=[("Content-Type", "application/json"),
                                                ("Content-Length", str(len(PING)))] + padding)
    sock = connect(s)
    if piece is None:
        sock.sendall(data + PING)
    else:
        try:
            for start in range(0, len(data), piece):
                sock.sendall(data[start:start + piece])
        except OSError:
            pass  # refused mid-way
    answer = read_until_closed(sock)
    assert responses(answer) == [431]
    assert b'"error"' in answer  # a JSON-RPC error body says why
    assert post(s, served.token, headers=padding[:58]) == [200]


def test_strict_framing_refuses_what_two_readers_would_read_differently(served, guarded):
    """RFC 9112 6.3: Transfer-Encoding with Content-Length is an error and the connection
    closes (behind a gateway framing by the chunks, one request became two); two differing
    lengths and two Hosts are 400."""
    s = guarded()
    smuggled = b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n"
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(PING), PING)
    sock = connect(s)
    sock.sendall(head(s, token=served.token, headers=[
        ("Content-Type", "application/json"), ("Transfer-Encoding", "chunked"),
        ("Content-Length", str(len(chunked) + len(smuggled)))]) + chunked + smuggled)
    answer = read_until_closed(sock)
    assert responses(answer) == [400]  # one answer, then closed: the GET never ran
    for headers in ([("Content-Length", str(len(PING))), ("Content-Length", "3")],
                    [("Content-Length", "%d, 3" % len(PING))],
                    [("Content-Length", str(len(PING))), ("Host", "other.example")]):
        sock = connect(s)
        sock.sendall(head(s, token=served.token, headers=[("Content-Type", "application/json")]
                          + headers) + PING)
        assert responses(read_until_closed(sock)) == [400], headers
    assert post(s, served.token) == [200]


@pytest.mark.parametrize("length", ["\u00b2", "\u0662", "9" * 5000, "+2", "0x2"],
                         ids=["superscript", "arabic-indic", "5000-digits", "plus", "hex"])
def test_a_content_length_that_is_not_ascii_digits_gets_400(served, guarded, length):
    """RFC 9110 8.6: Content-Length = 1*DIGIT. Characters Python calls digits are not."""
    s = guarded()
    sock = connect(s)
    sock.sendall(head(s, token=served.token, headers=[("Content-Type", "application/json")])
                 [:-2] + b"Content-Length: " + length.encode("utf-8") + b"\r\n\r\n" + PING)
    assert responses(read_until_closed(sock)) == [400]
    assert post(s, served.token) == [200]
    assert "Traceback" not in s.text()


def test_the_idle_timeout_is_what_it_says(served, guarded):
    """--idle-timeout 3 with --request-timeout 1: a connection between requests is kept 3 s
    (the request timeout is for a request under way), then closed."""
    s = guarded("--idle-timeout", "3", "--request-timeout", "1")
    sock = connect(s)
    request = head(s, token=served.token, headers=[("Content-Type", "application/json"),
                                                   ("Content-Length", str(len(PING)))]) + PING

    def exchange():
        sock.sendall(request)
        received = b""
        while b'"result"' not in received:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
        return responses(received)
    assert exchange() == [200]
    time.sleep(2)
    assert exchange() == [200]  # the same connection, idle 2 s: still open
    answered = time.monotonic()
    sock.settimeout(10)
    assert sock.recv(1) == b""
    assert 2.5 < time.monotonic() - answered < 5



def test_a_refusal_after_an_answer_on_the_same_connection_is_answered_too(served, guarded):
    """A kept connection's second request, its head too large, gets its 431 (the first
    request's finished answer does not stop it), and so does one pipelined behind a request
    in the same read (measured as it is parsed, not before)."""
    s = guarded()
    good = head(s, token=served.token, headers=[("Content-Type", "application/json"),
                                                ("Content-Length", str(len(PING)))]) + PING
    padding = [("X-Pad-%d" % i, "p" * 1000) for i in range(70)]
    big = head(s, token=served.token, headers=[("Content-Type", "application/json"),
                                               ("Content-Length", str(len(PING)))] + padding)
    sock = connect(s)
    sock.sendall(good)
    received = b""
    while b'"result"' not in received:
        received += sock.recv(65536)
    sock.sendall(big + PING)
    assert responses(received) + responses(read_until_closed(sock)) == [200, 431]
    sock = connect(s)
    sock.sendall(good + big + PING)
    # The 431 follows the first answer's body on the same line: split there.
    assert responses(read_until_closed(sock).replace(b"HTTP/1.1 ", b"\r\nHTTP/1.1 ")) == [
        200, 431]


@pytest.mark.parametrize("case", ["gzip-then-chunked", "no-host", "http-2.0", "upgrade-body"])
def test_what_one_parser_reads_and_the_other_refuses_is_refused_by_both(served, guarded, case):
    """RFC 9112 6.1 (a transfer coding this server does not decode: 501), 3.2 (HTTP/1.1
    without Host: 400), 2.3 (a version other than 1.x: 400), and RFC 9110 7.8 (an Upgrade
    head with a body: llhttp would hand the body to the new protocol, so 400 there, while
    h11 reads it and answers). A request asking to upgrade without a body is answered."""
    s = guarded()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(PING), PING)
    framing = [("Content-Type", "application/json"), ("Content-Length", str(len(PING)))]
    if case == "gzip-then-chunked":
        data = head(s, token=served.token, headers=[
            ("Content-Type", "application/json"),
            ("Transfer-Encoding", "gzip, chunked")]) + chunked
        expected = 501
    elif case == "no-host":
        data = (b"POST /mcp HTTP/1.1\r\nAuthorization: Bearer %s\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (served.token.encode(), len(PING), PING))
        expected = 400
    elif case == "http-2.0":
        data = head(s, token=served.token, headers=framing).replace(
            b"HTTP/1.1\r\n", b"HTTP/2.0\r\n", 1) + PING
        expected = 400
    else:
        data = head(s, token=served.token, headers=framing + [
            ("Connection", "Upgrade, HTTP2-Settings, close"), ("Upgrade", "h2c"),
            ("HTTP2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA")]) + PING
        expected = 400 if guarded.parser == "httptools" else 200
    sock = connect(s)
    sock.sendall(data)
    answer = read_until_closed(sock)
    assert responses(answer) == [expected], answer[:300]
    assert post(s, served.token) == [200]
    # Asked to switch without a body (curl --http2 asks so): answered as HTTP/1.1.
    sock = connect(s)
    sock.sendall(head(s, method="GET", path="/health", headers=[
        ("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
        ("HTTP2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA")]))
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    assert responses(received)[0] in (200, 404), received[:200]
    assert "Traceback" not in s.text()
