"""kb-server's HTTP endpoint built on the official MCP Python SDK instead, over the same store:
the benchmark's twin (``bench/http_load.py --targets sdk``).

    python bench/sdk_twin.py --db STORE --http 127.0.0.1:0 [--threads 8]

The SDK's low-level server (``mcp`` 2.3 and newer, Python 3.10 and newer) lists the store's
tools verbatim and calls them through ``KBStore.call_tool`` with the grants of the caller's
token, as kb-server does: the store's bearer tokens checked by an SDK ``TokenVerifier`` on
connections of their own, tool calls on worker threads each with a store connection of its
own (at most ``--threads`` at once), both eras served by the SDK's own Streamable HTTP app
(stateless, answering JSON: the closest to kb-server's answers), on uvicorn with h11 and
TCP_NODELAY set, as kb-server runs. Prints ``kb-server: serving http://HOST:PORT/mcp`` on
stderr once it listens, as kb-server does, so the benchmark starts either alike.

Not the same server: it does not ask a person (a token with ``--writes ask`` has its edits
refused) and has none of kb-server's HTTP safeguards; the benchmark uses a token that may edit.
"""

import argparse
import json
import os
import queue
import socket
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import anyio  # noqa: E402  (the SDK's own dependency)
import anyio.to_thread  # noqa: E402
import mcp_types as types  # noqa: E402
import uvicorn  # noqa: E402
from mcp.server import Server  # noqa: E402
from mcp.server.auth.middleware.auth_context import get_access_token  # noqa: E402
from mcp.server.auth.provider import AccessToken  # noqa: E402
from mcp.server.auth.settings import AuthSettings  # noqa: E402

from kbcite import TOOLS, KBStore, ToolError  # noqa: E402

EDIT = "edit_knowledge_article"

# Token checks have connections of their own, as in kb-server.
AUTH_CONNECTIONS = 4


class Stores:
    """Store connections lent one to a call, at most ``size`` calls at once."""

    def __init__(self, address, size):
        self.address = address
        self.limiter = anyio.CapacityLimiter(size)
        self.idle = queue.LifoQueue()

    def _run(self, fn):
        try:
            store = self.idle.get_nowait()
        except queue.Empty:
            store = KBStore(self.address)
        try:
            return fn(store)
        finally:
            self.idle.put(store)

    async def run(self, fn):
        """``fn(store)`` on a worker thread."""
        return await anyio.to_thread.run_sync(self._run, fn, limiter=self.limiter)


class StoreTokens:
    """The SDK's TokenVerifier over the store's bearer tokens; grants ride in the claims."""

    def __init__(self, stores):
        self.stores = stores

    async def verify_token(self, token):
        """The AccessToken of a live token, or None."""
        found = await self.stores.run(lambda store: store.tokens.principal(token))
        if found is None:
            return None
        return AccessToken(token=token, client_id=found["name"], scopes=[],
                           claims={"grants": sorted(found["grants"]), "writes": found["writes"]})


def error_result(error):
    """A tool error as kb-server words it: isError, the error object as text."""
    return types.CallToolResult(content=[types.TextContent(
        type="text", text=json.dumps({"error": error}, ensure_ascii=False))], is_error=True)


def build_app(address, threads, host, port):
    """The SDK's Streamable HTTP app serving the store's tools."""
    tools = Stores(address, threads)
    listed = [types.Tool.model_validate(tool) for tool in TOOLS]

    def caller():
        token = get_access_token()
        claims = (token.claims or {}) if token else {}
        return frozenset(claims.get("grants", ())), claims.get("writes", "deny"), (
            token.client_id if token else None)

    def visible(writes):
        return [t for t in listed if not (writes == "deny" and t.name == EDIT)]

    async def on_list_tools(ctx, params):
        return types.ListToolsResult(tools=visible(caller()[1]))

    async def on_call_tool(ctx, params):
        grants, writes, name = caller()
        tool, arguments = params.name, params.arguments or {}
        if tool not in {t.name for t in visible(writes)}:
            raise ValueError("Unknown tool: %s" % tool)
        if tool == EDIT and writes == "ask":
            return error_result({"code": "write_not_approved", "details": {},
                                 "message": "this twin does not ask; use a token made with "
                                            "--writes allow"})
        try:
            result = await tools.run(lambda store: store.call_tool(tool, arguments,
                                                                   granted=grants, actor=name))
        except ToolError as err:
            return error_result(err.to_dict())
        return types.CallToolResult(content=[types.TextContent(
            type="text", text=json.dumps(result, ensure_ascii=False, separators=(",", ":")))],
            structured_content=result)

    server = Server("kb-server-sdk-twin", version="1", on_list_tools=on_list_tools,
                    on_call_tool=on_call_tool)
    url = "http://%s:%d" % (host, port)
    return server.streamable_http_app(
        stateless_http=True, json_response=True, host=host,
        auth=AuthSettings(issuer_url="https://issuer.invalid", resource_server_url=url + "/mcp",
                          validate_token_resource=False),
        token_verifier=StoreTokens(Stores(address, AUTH_CONNECTIONS)))


def main(argv=None):
    """Listen, say where, serve until interrupted."""
    parser = argparse.ArgumentParser(prog="bench/sdk_twin.py", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--db", required=True, help="the store (made with kb init)")
    parser.add_argument("--http", default="127.0.0.1:0", metavar="HOST:PORT")
    parser.add_argument("--threads", type=int, default=8, help="tool calls at once (8)")
    args = parser.parse_args(argv)
    host, _, port = args.http.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # asyncio turns Nagle off only on sockets it made; Linux copies this to accepted ones.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, int(port)))
    sock.listen(2048)
    port = sock.getsockname()[1]
    app = build_app(args.db, args.threads, host, port)
    config = uvicorn.Config(app, http="h11", lifespan="on", log_level="warning",
                            access_log=False)
    print("kb-server: serving http://%s:%d/mcp" % (host, port), file=sys.stderr, flush=True)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
