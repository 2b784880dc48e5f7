"""kb-server over HTTP in several processes, and its app run the other ways the docs show:
both eras with ``--workers 2`` (a handshake session and an approval finished by whichever
process a request reaches), a question asked by one process and answered through another, the
app factory under ``uvicorn --factory``, and the app mounted inside a Starlette application.
"""

import http.client
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import kbcite
from kbcite.server.http.handshakes import HttpSessions
from kbcite.server.protocol import Principal
from kbcite.server.calls import Call
from support.commands import ROOT, child_env
from support.http_server import TIMEOUT, Server, connect, head
from support.stdio_client import EDIT, make_db

MODERN = "2026-07-28"
LEGACY = "2025-11-25"


@pytest.fixture
def served(tmp_path):
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        made.allow = store.tokens.create("allow", ["support"], "allow")
        made.ask = store.tokens.create("ask", ["support"], "ask")
    return made


def request(port, token, message, headers=None):
    """One POST on a connection of its own: (status, headers, JSON or None)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "Authorization": "Bearer " + token}
    sent.update(headers or {})
    conn.request("POST", "/mcp", body=json.dumps(message), headers=sent)
    response = conn.getresponse()
    text = response.read().decode("utf-8")
    conn.close()
    return response.status, response.headers, json.loads(text) if text else None


def modern(port, token, method, params=None, capabilities=None, request_id=1):
    params = dict(params or {}, _meta={"io.modelcontextprotocol/protocolVersion": MODERN,
                                       "io.modelcontextprotocol/clientCapabilities":
                                           capabilities or {}})
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    return request(port, token, {"jsonrpc": "2.0", "id": request_id, "method": method,
                                 "params": params}, headers)


def read_version(port, token, served):
    _, _, reply = modern(port, token, "tools/call", {"name": "read_knowledge_article",
                                                     "arguments": {
                                                         "knowledge_base_id": "support",
                                                         "article_id": served.password}})
    return reply["result"]["structuredContent"]["updated_at"]


def edit_arguments(served, version, key):
    return {"knowledge_base_id": "support", "article_id": served.password,
            "content": "Edited through %s." % key, "expected_version": version,
            "idempotency_key": key}


@pytest.mark.slow
@pytest.mark.py39  # the guarded server's workers on Python 3.9's uvicorn too
def test_both_eras_work_with_two_worker_processes(served):
    """--workers 2: requests on fresh connections reach either process. 2026-07-28 is
    stateless, and an approval asked by one process is finished by the other (one signing
    secret for all); a 2025-11-25 session, its questions and its end live where both see them."""
    s = Server(served.path, "--workers", "2")
    try:
        port = s.port
        for i in range(6):
            version = read_version(port, served.ask, served)
            arguments = edit_arguments(served, version, "modern-%d" % i)
            _, _, first = modern(port, served.ask, "tools/call", {
                "name": EDIT, "arguments": arguments}, {"elicitation": {}})
            assert first["result"]["resultType"] == "input_required", first
            status, _, done = modern(port, served.ask, "tools/call", {
                "name": EDIT, "arguments": arguments,
                "requestState": first["result"]["requestState"],
                "inputResponses": {"approve": {"action": "accept"}}}, {"elicitation": {}}, 2)
            assert status == 200 and done["result"]["structuredContent"]["replayed"] is False

        status, headers, _ = request(port, served.ask, {
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": LEGACY, "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "workers", "version": "1"}}})
        session = headers["Mcp-Session-Id"]
        in_session = {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}
        assert request(port, served.ask, {"jsonrpc": "2.0", "method":
                                          "notifications/initialized"}, in_session)[0] == 202
        for i in range(10):
            status, _, listed = request(port, served.ask, {"jsonrpc": "2.0", "id": 100 + i,
                                                          "method": "tools/list"}, in_session)
            assert status == 200 and len(listed["result"]["tools"]) == len(kbcite.TOOLS)
        for i in range(4):
            version = read_version(port, served.ask, served)
            body = json.dumps({"jsonrpc": "2.0", "id": 200 + i, "method": "tools/call",
                               "params": {"name": EDIT, "arguments": edit_arguments(
                                   served, version, "legacy-%d" % i)}}).encode()
            stream = connect(s)
            stream.sendall(head(s, token=served.ask, headers=[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("Mcp-Session-Id", session), ("MCP-Protocol-Version", LEGACY),
                ("Content-Length", str(len(body)))]) + body)
            received = b""
            while b"elicitation/create" not in received:
                received += stream.recv(65536)
            question = json.loads(received.split(b"data: ", 1)[1].split(b"\r\n", 1)[0])
            assert request(port, served.ask, {"jsonrpc": "2.0", "id": question["id"],
                                              "result": {"action": "accept"}},
                           in_session)[0] == 202
            while b'"id":%d' % (200 + i) not in received:
                chunk = stream.recv(65536)
                assert chunk, received
                received += chunk
            stream.close()
            final = json.loads(received.rsplit(b"data: ", 1)[1].split(b"\r\n", 1)[0])
            assert final["result"]["structuredContent"]["replayed"] is False
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        conn.request("DELETE", "/mcp", headers=dict(in_session,
                                                     Authorization="Bearer " + served.ask))
        assert conn.getresponse().status == 204
        for _ in range(4):  # gone for both processes
            assert request(port, served.ask, {"jsonrpc": "2.0", "id": 9, "method": "ping"},
                           in_session)[0] == 404
    finally:
        s.stop()
    with kbcite.KBStore(str(served.path)) as store:
        assert store.get_article("support", served.password)["content"] == \
            "Edited through legacy-3."
        assert store.audit() == []


def test_a_question_asked_in_one_process_is_answered_through_another(served):
    """Two processes' sessions on one store, side by side: the answer POSTed to the one that
    does not hold the question is left in the store and reaches the one that does; a
    cancellation the same way; and ending the session ends its calls in both."""
    one, two = HttpSessions(str(served.path)), HttpSessions(str(served.path))
    principal = Principal("ask", frozenset(["support"]), "ask")
    try:
        opened = one.new(principal)
        opened.protocol_version, opened.client_capabilities = LEGACY, {"elicitation": {}}
        one.open(opened)
        with kbcite.KBStore(str(served.path)) as store:
            here = one.find(store, opened.id, principal)
            there = two.find(store, opened.id, principal)
        assert here is not there and there.protocol_version == LEGACY
        call = here.begin({"jsonrpc": "2.0", "id": 7, "method": "tools/call"})
        asked, replies = [], []
        waiting = threading.Thread(target=lambda: replies.append(here.ask(
            call, {"message": "Approve?"}, asked.append)[1]))
        waiting.start()
        while not asked:
            time.sleep(0.01)
        two.deliver(there, {"jsonrpc": "2.0", "id": asked[0]["id"],
                            "result": {"action": "accept"}})
        waiting.join(10)
        assert replies == [{"jsonrpc": "2.0", "id": asked[0]["id"],
                            "result": {"action": "accept"}}]
        long_call = here.begin({"jsonrpc": "2.0", "id": "long", "method": "tools/call"})
        long_call.started -= 10  # in flight long enough for the poller to look for it
        two.cancel(there, {"requestId": "long", "reason": "changed my mind"})
        assert long_call.cancelled.wait(10)
        other = here.begin({"jsonrpc": "2.0", "id": 8, "method": "tools/call"})
        other.started -= 10
        two.end(there)
        assert other.cancelled.wait(10)  # ended elsewhere: its calls here end too
    finally:
        one.close()
        two.close()


def wait_for_line(proc, needle, lines):
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError("exited: %s" % "".join(lines))
        lines.append(line)
        if needle in line:
            return line
    raise AssertionError("no %r in %s" % (needle, "".join(lines)))


def uvicorn_process(served, args, cwd):
    env = child_env({"KB_DB": str(served.path), "KB_SIGNING_SECRET": "a secret of some length"})
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn"] + args + ["--port", "0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=str(cwd), env=env)
    lines = []
    line = wait_for_line(proc, "Uvicorn running on", lines)
    return proc, int(line.split(":")[-1].split()[0])


def test_the_app_factory_runs_under_uvicorn_itself(served):
    pytest.importorskip("uvicorn")
    proc, port = uvicorn_process(served, [
        "--factory", "kbcite.server.asgi:app_from_env",
        "--http", "kbcite.server.h11_guard:GuardedH11Protocol"], ROOT)
    try:
        status, _, reply = modern(port, served.allow, "tools/list")
        assert status == 200 and len(reply["result"]["tools"]) == len(kbcite.TOOLS)
    finally:
        proc.terminate()
        proc.wait(TIMEOUT)


MOUNTED = """
    import os
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    from kbcite.server.asgi import create_app

    kb = create_app(os.environ["KB_DB"], signing_secret=os.environ["KB_SIGNING_SECRET"].encode())
    app = Starlette(routes=[Route("/health", lambda request: PlainTextResponse("ok")),
                            Mount("/kb", app=kb)], lifespan=kb.lifespan)
"""


def test_the_app_mounts_inside_a_starlette_application(served, tmp_path):
    pytest.importorskip("starlette", reason="Starlette is not installed (it comes with mcp)")
    (tmp_path / "team_app.py").write_text(textwrap.dedent(MOUNTED), encoding="utf-8")
    proc, port = uvicorn_process(served, ["team_app:app"], tmp_path)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        conn.request("GET", "/health")
        assert conn.getresponse().read() == b"ok"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
            "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                      "io.modelcontextprotocol/clientCapabilities": {}}}})
        conn.request("POST", "/kb/mcp", body=body, headers={
            "Content-Type": "application/json", "Authorization": "Bearer " + served.allow,
            "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
        response = conn.getresponse()
        tools = json.loads(response.read())["result"]["tools"]
        assert response.status == 200 and len(tools) == len(kbcite.TOOLS)
    finally:
        proc.terminate()
        proc.wait(TIMEOUT)
