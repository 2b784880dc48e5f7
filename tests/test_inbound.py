"""The inbound step alone: messages and headers in, routes out, no socket and no store."""

import pytest

from kbcite.server import inbound
from kbcite.server.inbound import (ERROR_STATUS, WAITING_TOOLS, decode_name, encode_name, route,
                                   session_version_error)
from kbcite.server.jsonrpc import HEADER_MISMATCH, INVALID_REQUEST, METHOD_NOT_FOUND
from kbcite.tools import TOOLS

MODERN = "2026-07-28"
META = {inbound.META_VERSION: MODERN, inbound.META_CAPABILITIES: {}}


def modern_call(name="search_knowledge_base"):
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": {}, "_meta": META}}


def headers(*pairs):
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in pairs]


ROUTED = (("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/call"),
          ("Mcp-Name", "search_knowledge_base"))


def test_a_request_is_judged_once_into_one_route():
    found = route(modern_call(), headers(*ROUTED))
    assert (found.kind, found.method, found.era, found.tool) == (
        "request", "tools/call", "modern", "search_knowledge_base")
    assert found.error is None and found.needs_store and not found.may_wait
    assert not found.opens_session and found.sessionless and found.meta == META
    legacy = route({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}})
    assert legacy.era == "legacy" and legacy.opens_session and legacy.sessionless
    assert not legacy.needs_store
    ping = route({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert ping.era == "legacy" and not ping.opens_session and not ping.sessionless


def test_only_the_tools_that_write_may_wait():
    writers = {t["name"] for t in TOOLS if not t["annotations"]["readOnlyHint"]}
    assert WAITING_TOOLS == writers == {"edit_knowledge_article"}
    edit = route(modern_call("edit_knowledge_article"))
    assert edit.may_wait and edit.needs_store


def test_notifications_responses_and_invalid_messages_are_told_apart():
    assert route({"jsonrpc": "2.0", "method": "notifications/initialized"}).kind == \
        "notification"
    assert route({"jsonrpc": "2.0", "id": "a", "result": {}}).kind == "response"
    bad = route([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert bad.kind is None and bad.error.code == INVALID_REQUEST


def test_stdio_requests_have_no_header_checks():
    assert route(modern_call()).error is None


@pytest.mark.parametrize("sent, problem", [
    ((("Mcp-Method", "tools/call"), ("Mcp-Name", "search_knowledge_base")),
     "MCP-Protocol-Version header is missing"),
    ((("MCP-Protocol-Version", MODERN), ("Mcp-Name", "search_knowledge_base")),
     "Mcp-Method header is missing"),
    ((("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/call")),
     "Mcp-Name header is missing"),
    (ROUTED[:2] + (("Mcp-Name", "read_knowledge_article"),), "Mcp-Name read_knowledge_article"),
    ((("MCP-Protocol-Version", "2025-11-25"),) + ROUTED[1:], "MCP-Protocol-Version 2025-11-25"),
])
def test_routing_headers_must_match_the_body(sent, problem):
    error = route(modern_call(), headers(*sent)).error
    assert error.code == HEADER_MISMATCH and problem in error.message


@pytest.mark.parametrize("copies", [("tools/list", "tools/call"), ("tools/call", "tools/list"),
                                    ("tools/call", "tools/call")])
def test_a_routing_header_sent_twice_is_refused_in_either_order(copies):
    sent = headers(ROUTED[0], ROUTED[2], *[("Mcp-Method", value) for value in copies])
    error = route(modern_call(), sent).error
    assert error.code == HEADER_MISMATCH
    assert "Mcp-Method header is sent more than once" in error.message


def test_the_name_codec_round_trips_and_refuses_bad_base64():
    for name in ("search_knowledge_base", "kb://support/Ünïcode", " padded ", "=?base64?x?="):
        encoded = encode_name(name)
        assert decode_name(encoded) == name
        assert encoded.isascii()
    assert encode_name("plain") == "plain"
    assert decode_name("=?base64?c2VhcmNoX2tub3dsZWRnZV9iYXNl?=") == "search_knowledge_base"
    assert decode_name("=?base64?not base64!?=") is None


def test_a_session_refuses_only_a_version_it_cannot_speak():
    legacy = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert session_version_error(route(legacy, headers(("MCP-Protocol-Version",
                                                         "2025-06-18"))), "2025-11-25") is None
    assert session_version_error(route(legacy, []), "2025-11-25") is None
    error = session_version_error(route(legacy, headers(("MCP-Protocol-Version", "2099-01-01"))),
                                  "2025-11-25")
    assert error.code == INVALID_REQUEST and "negotiated 2025-11-25" in error.message


def test_error_codes_map_to_their_http_statuses():
    assert ERROR_STATUS[METHOD_NOT_FOUND] == 404 and ERROR_STATUS[HEADER_MISMATCH] == 400


def test_only_a_stateless_request_that_writes_nothing_and_holds_nothing_open_is_quick():
    assert route(modern_call(), headers(*ROUTED)).quick
    assert route({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                  "params": {"_meta": META}}).quick
    assert not route(modern_call("edit_knowledge_article")).quick
    assert not route({"jsonrpc": "2.0", "id": 1, "method": inbound.LISTEN_METHOD,
                      "params": {"_meta": META}}).quick
    legacy = dict(modern_call(), params={"name": "search_knowledge_base", "arguments": {}})
    assert not route(legacy).quick
    assert not route({"jsonrpc": "2.0", "method": "notifications/initialized"}).quick
