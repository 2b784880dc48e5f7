"""kb-server under clients no one here wrote: the official MCP Python SDK (the ``mcp`` package,
Python 3.10 and newer) over stdio and Streamable HTTP, pinned to each era and in its ``auto``
mode, and the MCP Inspector CLI over HTTP where ``npx`` is at hand.

Every structured result is checked against its tool's outputSchema here too, whatever the
client itself checks.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

import kbcite
from support.commands import ROOT
from support.http_server import Server
from support.sdk_session import HttpSession
from support.stdio_client import EDIT, check_schema, make_db

mcp = pytest.importorskip("mcp", reason="the official MCP SDK (pip install mcp, Python >= 3.10) "
                                        "is not installed")
anyio = pytest.importorskip("anyio")
httpx2 = pytest.importorskip("httpx2")
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
import mcp.types as types  # noqa: E402

OUTPUT = {tool["name"]: tool["outputSchema"] for tool in kbcite.TOOLS}
MODES = ["2026-07-28", "auto", "legacy"]
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"


@pytest.fixture
def served(tmp_path):
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        made.token = store.tokens.create("sdk", ["support"], "ask")
    return made


def stdio_params(served, *extra):
    return StdioServerParameters(command=sys.executable, args=[
        "-m", "kbcite.server", "--db", str(served.path), "--grant", "support"] + list(extra),
        cwd=str(ROOT))


def answering(action, asked):
    async def on_elicit(ctx, params):
        asked.append(params.message)
        return types.ElicitResult(action=action, content={})
    return on_elicit


async def session_checks(client, served, action, asked):
    """What every client session proves: tools listed, results matching their schemas, and an
    edit that is asked about and written (accept) or not (decline, cancel)."""
    names = [t.name for t in (await client.list_tools()).tools]
    assert names == [t["name"] for t in kbcite.TOOLS]
    found = await client.call_tool("search_knowledge_base", {"knowledge_base_id": "support",
                                                             "query": "password"})
    check_schema(found.structured_content, OUTPUT["search_knowledge_base"])
    read = await client.call_tool("read_knowledge_article", {"knowledge_base_id": "support",
                                                             "article_id": served.password})
    check_schema(read.structured_content, OUTPUT["read_knowledge_article"])
    polled = await client.call_tool("poll_resource_events", {"resource_type": "knowledge_base",
                                                             "resource_id": "support"})
    check_schema(polled.structured_content, OUTPUT["poll_resource_events"])
    before = read.structured_content
    edited = await client.call_tool(EDIT, {
        "knowledge_base_id": "support", "article_id": served.password,
        "content": before["content"] + " (%s)" % action, "expected_version": before["updated_at"],
        "idempotency_key": "sdk-%s" % action})
    assert len(asked) == 1 and "edit an article" in asked[0]
    if action == "accept":
        assert not edited.is_error
        check_schema(edited.structured_content, OUTPUT[EDIT])
    else:
        assert edited.is_error
        assert json.loads(edited.content[0].text)["error"]["code"] == "write_not_approved"
    return edited


def run_session(connect, served, action):
    asked = []

    async def main():
        async with connect(answering(action, asked)) as client:
            result = await session_checks(client, served, action, asked)
            return client.protocol_version, result
    return anyio.run(main)


def content_of(served):
    with kbcite.KBStore(str(served.path)) as store:
        return store.get_article("support", served.password)["content"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
def test_the_sdk_over_stdio(served, mode, action):
    before = content_of(served)
    version, _ = run_session(lambda elicit: Client(stdio_params(served), mode=mode,
                                                   elicitation_callback=elicit), served, action)
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert (content_of(served) != before) == (action == "accept")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
def test_the_sdk_over_streamable_http(served, mode, action):
    server = Server(served.path)
    url = "http://127.0.0.1:%d/mcp" % server.port
    try:
        def connect(elicit):
            http = httpx2.AsyncClient(headers={"Authorization": "Bearer " + served.token})
            return HttpSession(http, Client(streamable_http_client(url, http_client=http),
                                             mode=mode, elicitation_callback=elicit))
        before = content_of(served)
        version, _ = run_session(connect, served, action)
        assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert (content_of(served) != before) == (action == "accept")
    finally:
        server.stop()


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_the_sdk_without_elicitation_gets_a_proposal(served, mode):
    """A client that cannot be asked under --writes ask: the edit waits for kb review."""
    async def main():
        async with Client(stdio_params(served), mode=mode) as client:
            read = await client.call_tool("read_knowledge_article", {
                "knowledge_base_id": "support", "article_id": served.password})
            edited = await client.call_tool(EDIT, {
                "knowledge_base_id": "support", "article_id": served.password, "content": "x",
                "expected_version": read.structured_content["updated_at"],
                "idempotency_key": "k"})
            check_schema(edited.structured_content, OUTPUT[EDIT])
            return edited
    before = content_of(served)
    edited = anyio.run(main)
    assert not edited.is_error and edited.structured_content["status"] == "proposed"
    assert content_of(served) == before
    with kbcite.KBStore(str(served.path)) as store:
        assert [p["proposal_id"] for p in store.proposals.list("support")] == [
            edited.structured_content["proposal_id"]]


def test_two_http_servers_one_client_alternating_with_an_approval_across(served, tmp_path):
    """Two server instances on one database and one secret; a 2026-07-28 client alternates
    between them, and an approval asked by one is finished by the other."""
    env = dict(os.environ, KB_SIGNING_SECRET="a shared secret of some length")
    servers = [_server_with_env(served, env) for _ in range(2)]
    try:
        def connect(server):
            http = httpx2.AsyncClient(headers={"Authorization": "Bearer " + served.token})
            # The callback declares the elicitation capability; the test answers by hand.
            return HttpSession(http, Client(streamable_http_client(
                "http://127.0.0.1:%d/mcp" % server.port, http_client=http), mode="2026-07-28",
                elicitation_callback=answering("accept", [])))

        async def main():
            async with connect(servers[0]) as one:
                async with connect(servers[1]) as two:
                    versions = []
                    for client in (one, two, one, two):
                        read = await client.call_tool("read_knowledge_article", {
                            "knowledge_base_id": "support", "article_id": served.password})
                        versions.append(read.structured_content["updated_at"])
                    assert len(set(versions)) == 1
                    arguments = {"knowledge_base_id": "support", "article_id": served.password,
                                 "content": "Asked on one, approved on two.",
                                 "expected_version": versions[-1], "idempotency_key": "across"}
                    first = await one.session.call_tool(EDIT, arguments,
                                                        allow_input_required=True)
                    assert isinstance(first, types.InputRequiredResult)
                    done = await two.session.call_tool(
                        EDIT, arguments, input_responses={"approve": types.ElicitResult(
                            action="accept", content={})},
                        request_state=first.request_state, allow_input_required=True)
                    return done.structured_content
        done = anyio.run(main)
        assert done["replayed"] is False
        assert content_of(served) == "Asked on one, approved on two."
    finally:
        for server in servers:
            server.stop()


def _server_with_env(served, env):
    old = dict(os.environ)
    os.environ.update(env)
    try:
        return Server(served.path)
    finally:
        os.environ.clear()
        os.environ.update(old)


# -- the MCP Inspector CLI -----------------------------------------------------------------------


def inspector(server, token, *args):
    if shutil.which("npx") is None:
        pytest.skip("npx is not installed: the MCP Inspector CLI cannot run here")
    done = subprocess.run(["npx", "-y", INSPECTOR, "--cli", "http://127.0.0.1:%d/mcp"
                           % server.port, "--transport", "http", "--header",
                           "Authorization: Bearer " + token, "--format", "json"] + list(args),
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and ("ENOTFOUND" in done.stderr or "E404" in done.stderr
                                 or "ETIMEDOUT" in done.stderr):
        pytest.skip("the MCP Inspector could not be fetched from the npm registry: %s"
                    % done.stderr.strip().splitlines()[-1])
    return done


@pytest.mark.slow
@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_the_inspector_cli_lists_and_calls_over_http(served, era):
    server = Server(served.path)
    try:
        listed = inspector(server, served.token, "--protocol-era", era, "--method", "tools/list")
        assert listed.returncode == 0, listed.stderr
        names = [t["name"] for t in json.loads(listed.stdout)["result"]["tools"]]
        assert names == [t["name"] for t in kbcite.TOOLS]
        called = inspector(server, served.token, "--protocol-era", era, "--method", "tools/call",
                           "--tool-name", "read_knowledge_article", "--tool-arg",
                           "knowledge_base_id=support", "--tool-arg",
                           "article_id=%s" % served.password)
        assert called.returncode == 0, called.stderr
        result = json.loads(called.stdout)["result"]
        check_schema(result["structuredContent"], OUTPUT["read_knowledge_article"])
    finally:
        server.stop()


@pytest.mark.slow
def test_the_inspector_cli_cannot_approve_and_gets_a_proposal(served):
    """The CLI declares no elicitation capability: an edit that needs approval is kept as a
    proposal for a person to review."""
    server = Server(served.path)
    try:
        with kbcite.KBStore(str(served.path)) as store:
            version = store.get_article("support", served.password)["updated_at"]
        done = inspector(server, served.token, "--protocol-era", "modern", "--method", "tools/call",
                         "--tool-name", EDIT, "--tool-arg", "knowledge_base_id=support",
                         "--tool-arg", "article_id=%s" % served.password, "--tool-arg",
                         "content=from the inspector", "--tool-arg",
                         "expected_version=%s" % version, "--tool-arg", "idempotency_key=i1")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["result"]["structuredContent"]["status"] == "proposed"
        assert content_of(served) != "from the inspector"
    finally:
        server.stop()
