"""kb-server's resources under clients no one here wrote: the official MCP Python SDK (the
``mcp`` package, Python 3.10 and newer) over stdio and Streamable HTTP in both eras, and the
TypeScript SDK's clients (``@modelcontextprotocol/sdk`` 1.x for 2025-11-25, and
``@modelcontextprotocol/client`` 2.x for 2026-07-28 too) from the npm registry where Node.js is
at hand.

Each session lists, reads the current version and a pinned one, completes both template
arguments, subscribes, and must hear of another client's edit within a second.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import warnings

import pytest

import kbcite
from support.commands import ROOT
from support.http_server import Server
from support.sdk_session import HttpSession
from support.stdio_client import EDIT, make_db

mcp = pytest.importorskip("mcp", reason="the official MCP SDK (pip install mcp, Python >= 3.10) "
                                        "is not installed")
anyio = pytest.importorskip("anyio")
httpx2 = pytest.importorskip("httpx2")
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.client.subscriptions import ResourceUpdated  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp.shared.uri_template import UriTemplate  # noqa: E402
import mcp.types as types  # noqa: E402

CURRENT = "kb://{knowledge_base_id}/articles/{article_id}"
PINNED = "kb://{knowledge_base_id}/articles/{article_id}@{updated_at}"
# The TypeScript clients, pinned: the 1.x line (2025-11-25, what the conformance suite drives)
# and the 2.x client (the one TypeScript client that speaks 2026-07-28).
TS_PACKAGES = ["@modelcontextprotocol/sdk@1.32.2", "@modelcontextprotocol/client@2.4.0"]
# A notification must come this soon after the edit that caused it (the proof).
WITHIN_S = 1.0


@pytest.fixture
def served(tmp_path):
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        made.token = store.tokens.create("sdk", ["support"], "allow")
        made.editor = store.tokens.create("editor", ["support"], "allow")
        store.create_article("internal", "Secret", "Not for this token.")
    return made


def stdio_params(served):
    return StdioServerParameters(command=sys.executable, args=[
        "-m", "kbcite.server", "--db", str(served.path), "--grant", "support"], cwd=str(ROOT))


def http_client(url, token, mode, handler=None):
    http = httpx2.AsyncClient(headers={"Authorization": "Bearer " + token},
                              timeout=httpx2.Timeout(30.0, read=300.0))
    return http, Client(streamable_http_client(url, http_client=http), mode=mode,
                        message_handler=handler)


def person_edit(served):
    """Another client's change, made through the store (a person's save); returns when it
    began."""
    with kbcite.KBStore(str(served.path)) as store:
        began = time.monotonic()
        store.save_article("support", served.password, content="Saved at %f." % time.time())
    return began


def agent_edit(url, served):
    """Another client's change, made through the server with the edit tool (2026-07-28);
    returns when its tools/call was sent."""
    async def main():
        http, client = http_client(url, served.editor, "2026-07-28")
        async with http:
            async with client:
                read = await client.call_tool("read_knowledge_article", {
                    "knowledge_base_id": "support", "article_id": served.password})
                began = time.monotonic()
                done = await client.call_tool(EDIT, {
                    "knowledge_base_id": "support", "article_id": served.password,
                    "content": "Edited by another client at %f." % time.time(),
                    "expected_version": read.structured_content["updated_at"],
                    "idempotency_key": "other-%f" % time.time()})
                assert not done.is_error, done
                return began
    return anyio.run(main)


async def proof(client, served, edit, updates):
    """List, read, read pinned, complete, then subscribe and time another client's edit."""
    listed = await client.list_resources(cache_mode="bypass")
    uris = [r.uri for r in listed.resources]
    current = "kb://support/articles/%s" % served.password
    assert uris == [current, "kb://support/articles/%s" % served.billing]
    templates = await client.list_resource_templates(cache_mode="bypass")
    assert [t.uri_template for t in templates.resource_templates] == [CURRENT, PINNED]
    read = (await client.read_resource(current, cache_mode="bypass")).contents[0]
    cited = read.meta["kbcite/citation"]
    assert cited["article_id"] == served.password and read.mime_type == "text/markdown"
    pinned_uri = UriTemplate.parse(PINNED).expand(cited)  # the SDK's own expansion (%3A)
    pinned = (await client.read_resource(pinned_uri, cache_mode="bypass")).contents[0]
    assert pinned.text == read.text and pinned.meta["kbcite/citation"] == cited
    with pytest.raises(MCPError) as missing:
        await client.read_resource("kb://internal/articles/art-000001", cache_mode="bypass")
    assert missing.value.error.code in (-32002, -32602)
    ref = types.ResourceTemplateReference(uri=CURRENT)
    kbs = await client.complete(ref, {"name": "knowledge_base_id", "value": "s"})
    assert kbs.completion.values == ["support"]
    ids = await client.complete(ref, {"name": "article_id", "value": "art-"},
                                context_arguments={"knowledge_base_id": "support"})
    assert ids.completion.values == [served.password, served.billing]
    return await subscribed(client, current, edit, updates)


async def subscribed(client, uri, edit, updates):
    """Subscribe to ``uri`` in the client's era, make ``edit`` happen, and return how long
    the notification took after the edit was sent."""
    if client.protocol_version == "2026-07-28":
        async with client.listen(resource_subscriptions=[uri]) as sub:
            assert sub.honored.resource_subscriptions == [uri]
            began = await anyio.to_thread.run_sync(edit)
            with anyio.fail_after(10):
                async for event in sub:
                    if isinstance(event, ResourceUpdated):
                        assert event.uri == uri
                        return time.monotonic() - began
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated: 2026-07-28 has no resources/subscribe
        await client.subscribe_resource(uri)
    began = await anyio.to_thread.run_sync(edit)
    with anyio.fail_after(10):
        got = await updates.receive()
    assert got == uri
    return time.monotonic() - began


def run(connect, served, edit):
    send, receive = anyio.create_memory_object_stream(10)

    async def handler(message):
        if isinstance(message, types.ResourceUpdatedNotification):
            await send.send(message.params.uri)

    async def main():
        async with connect(handler) as client:
            return client.protocol_version, await proof(client, served, edit, receive)
    return anyio.run(main)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_python_sdk_over_stdio(served, mode):
    version, elapsed = run(lambda handler: Client(stdio_params(served), mode=mode,
                                                  message_handler=handler),
                           served, lambda: person_edit(served))
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert elapsed < WITHIN_S, elapsed


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_python_sdk_over_streamable_http(served, mode):
    server = Server(served.path)
    url = "http://127.0.0.1:%d/mcp" % server.port
    try:
        version, elapsed = run(lambda handler: HttpSession(*http_client(url, served.token, mode,
                                                                     handler)),
                               served, lambda: agent_edit(url, served))
    finally:
        server.stop()
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert elapsed < WITHIN_S, elapsed


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_an_edit_through_one_worker_reaches_a_stream_on_another(served, mode):
    """--workers 2: the client's stream and the other client's edit go wherever the kernel
    sends them; the watcher of each worker reads the one log."""
    server = Server(served.path, "--workers", "2")
    url = "http://127.0.0.1:%d/mcp" % server.port
    try:
        for _ in range(3):  # a few rounds, so that both workers have served both sides
            _, elapsed = run(lambda handler: HttpSession(*http_client(url, served.token, mode,
                                                                   handler)),
                             served, lambda: agent_edit(url, served))
            assert elapsed < WITHIN_S, elapsed
    finally:
        server.stop()


# -- the TypeScript SDK clients ------------------------------------------------------------------


TS_CLIENT = r"""
import { Client as V1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Http } from
  '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import * as v2 from '@modelcontextprotocol/client';

const [url, token, flavour] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
const current = 'kb://support/articles/art-000001';
const say = (what) => console.log(JSON.stringify(what));
let client, listen;
let updated;
const heard = new Promise((resolve) => (updated = resolve));
if (flavour === 'v1') {
  client = new V1({ name: 'kb-test-ts-v1', version: '1' }, { capabilities: {} });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updated(n.params.uri));
  await client.connect(new V1Http(new URL(url), { requestInit: { headers } }));
} else {
  const options = flavour === 'v2-2026' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } }
                                        : {};
  client = new v2.Client({ name: 'kb-test-ts-v2', version: '1' }, options);
  client.setNotificationHandler('notifications/resources/updated', (n) => updated(n.params.uri));
  await client.connect(new v2.StreamableHTTPClientTransport(new URL(url),
                                                            { requestInit: { headers } }));
}
const listed = await client.listResources();
const read = await client.readResource({ uri: current });
const cited = read.contents[0]._meta['kbcite/citation'];
const pinned = await client.readResource(
  { uri: `${current}@${encodeURIComponent(cited.updated_at)}` });
const completed = await client.complete({
  ref: { type: 'ref/resource', uri: 'kb://{knowledge_base_id}/articles/{article_id}' },
  argument: { name: 'article_id', value: 'art-' },
  context: { arguments: { knowledge_base_id: 'support' } } });
let missing = null;
try { await client.readResource({ uri: 'kb://internal/articles/art-000001' }); }
catch (e) { missing = e.code ?? e.constructor.name; }
if (flavour === 'v2-2026') listen = await client.listen({ resourceSubscriptions: [current] });
else await client.subscribeResource({ uri: current });
say({ ready: true, listed: listed.resources.map((r) => r.uri), cited,
      same: pinned.contents[0].text === read.contents[0].text,
      completed: completed.completion.values, missing });
const uri = await heard;
say({ updated: uri });
if (listen) await listen.close();
await client.close();
process.exit(0);
"""


@pytest.fixture(scope="module")
def ts_clients(tmp_path_factory):
    """A folder with the TypeScript SDK clients installed from the npm registry."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("Node.js (node and npm) is not installed: the TypeScript SDK clients "
                    "cannot run here")
    folder = tmp_path_factory.mktemp("ts-clients")
    (folder / "package.json").write_text('{"type": "module", "private": true}')
    done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"]
                          + TS_PACKAGES, cwd=str(folder), capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail("npm could not install %s: %s" % (TS_PACKAGES, done.stderr[-2000:]))
        pytest.skip("the TypeScript SDK clients could not be fetched from the npm registry: %s"
                    % (done.stderr.strip().splitlines() or ["(no output)"])[-1])
    (folder / "client.mjs").write_text(TS_CLIENT)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("flavour", ["v1", "v2", "v2-2026"])
def test_the_typescript_sdk_clients(served, ts_clients, flavour):
    server = Server(served.path)
    url = "http://127.0.0.1:%d/mcp" % server.port
    proc = subprocess.Popen(["node", "client.mjs", url, served.token, flavour],
                            cwd=str(ts_clients), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        ready = json.loads(line)
        assert ready["listed"] == ["kb://support/articles/%s" % served.password,
                                   "kb://support/articles/%s" % served.billing]
        assert ready["cited"]["article_id"] == served.password and ready["same"] is True
        assert ready["completed"] == [served.password, served.billing]
        assert ready["missing"] is not None
        began = agent_edit(url, served)
        line = proc.stdout.readline()
        elapsed = time.monotonic() - began
        assert json.loads(line) == {"updated": "kb://support/articles/%s" % served.password}
        assert elapsed < WITHIN_S, elapsed
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        server.stop()
