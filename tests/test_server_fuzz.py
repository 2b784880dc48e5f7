"""Bad input through a real kb-server: every line gets a clear error, nothing is written.

A corpus of malformed JSON, invalid UTF-8, NUL bytes, huge and deeply nested messages, and
every tool called with every argument wrong in every way, sent to one server process. Each
must be answered with a JSON-RPC error or a tool error that says what was wrong; the server
must keep serving; and a full dump of the database must be the same before and after.
"""

import json

import pytest

import kbcite
from kbcite.limits import CONTENT_MAX_BYTES
from kbcite.testing import dump_file as dump
from support.stdio_client import Client, error_of, make_db, structured

# JSON-RPC error codes the server may answer bad input with.
PARSE, INVALID_REQUEST, NOT_FOUND_METHOD, INVALID_PARAMS = -32700, -32600, -32601, -32602
DEEP = 100000  # nesting deeper than any JSON decoder in Python follows


@pytest.fixture(params=["allow", "ask"])
def served(request, tmp_path):
    """A server on a fresh database; at teardown the database must be exactly as it was."""
    db = make_db(tmp_path / "kb.db")
    before = dump(db.path)
    with kbcite.KBStore(str(db.path)) as store:
        db.version = store.get_article("support", db.password)["updated_at"]
    client = Client(db.path, writes=request.param)
    client.initialize(capabilities={"elicitation": {}})
    yield client, db
    try:
        # still serving after everything, and exits cleanly when its input closes
        assert client.call("ping", request_id="last")["result"] == {}
        read = structured(client.tool("read_knowledge_article", knowledge_base_id="support",
                                      article_id=db.password))
        assert read["updated_at"] == db.version
        assert client.close() == 0
        for line in client.lines:
            json.loads(line.decode("utf-8"))  # every line it wrote is one JSON message
    finally:
        client.kill()
    assert dump(db.path) == before


def alive(client):
    assert client.call("ping", request_id="alive")["result"] == {}


# -- the transport: lines that are not one valid JSON-RPC message -----------------------------

def nested(depth, open_, close):
    return open_ * depth + close * depth


RAW_LINES = [
    # malformed JSON
    (b"{", PARSE),
    (b"}", PARSE),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping",}', PARSE),
    (b"{'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}", PARSE),
    (b'{"jsonrpc": "2.0" "id": 1}', PARSE),
    (b"nul", PARSE),
    (b"\xef\xbb\xbf" + b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', PARSE),  # a BOM
    # NUL bytes and control characters, raw
    (b"\x00", PARSE),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "pi\x00ng"}', PARSE),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\x00', PARSE),
    # invalid UTF-8
    (b"\xff\xfe\xfd", PARSE),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
     b'"search_knowledge_base", "arguments": {"knowledge_base_id": "support", '
     b'"query": "pass\xc3\x28word"}}}', PARSE),
    (b'{"jsonrpc": "2.0", "id": "\xed\xa0\x80", "method": "ping"}', PARSE),  # CESU surrogate
    # deeply nested
    (nested(DEEP, b"[", b"]"), PARSE),
    (nested(DEEP, b'{"a":', b"}").replace(b"}", b"", 1) + b"1}", PARSE),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
     + nested(DEEP, b"[", b"]") + b"}", PARSE),
    # valid JSON, not a valid message
    (b"null", INVALID_REQUEST),
    (b"true", INVALID_REQUEST),
    (b"1e400", INVALID_REQUEST),
    (b"NaN", INVALID_REQUEST),
    (b'"' + b"x" * 3000000 + b'"', INVALID_REQUEST),
    (b"[" + b",".join([b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'] * 1000) + b"]",
     INVALID_REQUEST),
    (b'{"jsonrpc": 2.0, "id": 1, "method": "ping"}', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": Infinity, "method": "ping"}', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 1, "method": null}', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 1, "method": ["tools/call"]}', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}', None),  # a stray response
    # requests with wrong methods or params
    (b'{"jsonrpc": "2.0", "id": 1, "method": ""}', NOT_FOUND_METHOD),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "' + b"m" * 100000 + b'"}', NOT_FOUND_METHOD),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call\\u0000"}', NOT_FOUND_METHOD),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}', INVALID_PARAMS),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": 7}', INVALID_PARAMS),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}', INVALID_PARAMS),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": null}}',
     INVALID_PARAMS),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
     b'"search_knowledge_base", "arguments": [1, 2]}}', INVALID_PARAMS),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
     b'"search_knowledge_base", "arguments": "' + b"a" * 1000000 + b'"}}', INVALID_PARAMS),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
     b'"edit_knowledge_article\\ud800", "arguments": {}}}', INVALID_PARAMS),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": '
     b'"2025-11-25"}}', INVALID_REQUEST),  # already initialized
]


def test_bad_lines_get_clear_errors_and_the_server_lives_on(served):
    client, _ = served
    for line, code in RAW_LINES:
        client.send_raw(line + b"\n")
        if code is None:  # a response to nothing: ignored, no answer
            alive(client)
            continue
        response = client.recv()
        assert "error" in response, (line[:80], response)
        assert response["error"]["code"] == code, (line[:80], response)
        assert response["error"]["message"], line[:80]
        if code == PARSE:
            assert response["id"] is None
        alive(client)


# -- the tools: every argument of every tool, wrong in every way ---------------------------------

TOOLS = {tool["name"]: tool["inputSchema"] for tool in kbcite.TOOLS}
HUGE = "x" * 2000000


def wrong_values(name, rule):
    """(value, expected error code) pairs that are wrong for one argument's schema."""
    out = [(None, "invalid_argument"), (True, "invalid_argument"), ([], "invalid_argument"),
           ({}, "invalid_argument"), ({"a": {"b": {"c": [1, 2, {"d": None}]}}}, "invalid_argument"),
           (json.loads(nested(200, "[", "]")), "invalid_argument")]
    if rule["type"] == "string":
        out += [(0, "invalid_argument"), (1.5, "invalid_argument"), (["x"], "invalid_argument"),
                ("a\x00b", "invalid_argument"), ("\x00", "invalid_argument"),
                ("\ud800", "invalid_argument"), ("ok\udfffok", "invalid_argument")]
        if "enum" not in rule:  # a huge value outside an enum: see the known bugs below
            out.append((HUGE, "invalid_argument"))
        if rule.get("minLength", 0) >= 1:
            out.append(("", "invalid_argument"))
        if rule.get("minLength", 0) >= 2:
            out.append(("x", "invalid_argument"))
        if "maxLength" in rule:
            out.append(("y" * (rule["maxLength"] + 1), "invalid_argument"))
        if "enum" in rule:
            out += [(rule["enum"][0].upper(), "invalid_argument"), ("channel ", "invalid_argument")]
    else:
        out += [("1", "invalid_argument"), (1.5, "invalid_argument"), (-1, "invalid_argument"),
                (10 ** 30, "invalid_argument"), (-10 ** 30, "invalid_argument"),
                (float("inf"), "invalid_argument"), (float("nan"), "invalid_argument")]
        if "maximum" in rule:
            out.append((rule["maximum"] + 1, "invalid_argument"))
        if rule.get("minimum", 0) >= 1:
            out.append((0, "invalid_argument"))
    # Values of the right type that name nothing, or a version that is not the current one.
    semantic = {
        "knowledge_base_id": ["internal", "nope", "SUPPORT", " support", "../support",
                              "support' OR '1'='1"],
        "resource_id": ["internal", "nope", "support; DROP TABLE events"],
        "article_id": ["art-999999", "ART-000001", "../../etc/passwd", "art-000001' --"],
        "expected_version": ["yesterday", "2026-13-01T00:00:00Z", "2026-11-08T09:00:00",
                             "2026-11-08 09:00:00Z", "0000-01-01T00:00:00Z",
                             "9999-12-31T23:59:59.999999-23:59", "2026-11-08T09:00:00Z\n",
                             "２０２６-11-08T09:00:00Z"],
        "version": ["yesterday", "2026-13-01T00:00:00Z", "2026-11-08T09:00:00",
                    "2026-11-08T09:00:00Z\n", "２０２６-11-08T09:00:00Z"],
        "citations": [[{"knowledge_base_id": "support", "article_id": "art-000001",
                        "updated_at": "yesterday"}], [{"knowledge_base_id": "support"}],
                      [{"knowledge_base_id": "support", "article_id": "art-000001",
                        "updated_at": "2026-11-08T09:00:00Z", "extra": 1}]],
        "resource_type": ["channel", "note", "record", "session"],
        "after_sequence": [10 ** 6],
        "title": ["   ", "\t\n"],
        "content": ["é" * (CONTENT_MAX_BYTES // 2 + 1)],  # > 1 MiB of UTF-8
    }
    for value in semantic.get(name, []):
        code = "not_found" if name in ("knowledge_base_id", "resource_id", "article_id") \
            else "invalid_argument"
        out.append((value, code))
    return out


def base_arguments(db):
    """Valid arguments for each tool (the edit's would write: never sent unchanged)."""
    return {
        "search_knowledge_base": {"knowledge_base_id": "support", "query": "password",
                                  "limit": 5},
        "read_knowledge_article": {"knowledge_base_id": "support", "article_id": db.password},
        "edit_knowledge_article": {"knowledge_base_id": "support", "article_id": db.password,
                                   "content": "Rewritten.", "title": "New title",
                                   "expected_version": db.version, "idempotency_key": "fuzz"},
        "poll_resource_events": {"resource_type": "knowledge_base", "resource_id": "support",
                                 "after_sequence": 0, "limit": 10},
        "check_citations": {"knowledge_base_id": "support", "citations": [
            {"knowledge_base_id": "support", "article_id": db.password,
             "updated_at": db.version}]},
    }


def cases(db):
    """(tool, arguments, argument at fault, expected code) for every wrong argument."""
    base = base_arguments(db)
    out = []
    for tool, schema in TOOLS.items():
        for name, rule in schema["properties"].items():
            for value, code in wrong_values(name, rule):
                out.append((tool, dict(base[tool], **{name: value}), name, code))
            if name in schema["required"]:
                args = dict(base[tool])
                del args[name]
                out.append((tool, args, name, "invalid_argument"))
        out.append((tool, dict(base[tool], extra="x"), "extra", "invalid_argument"))
        out.append((tool, dict(base[tool], **{"": 1}), "", "invalid_argument"))
        out.append((tool, {name: None for name in schema["properties"]}, None,
                    "invalid_argument"))
        out.append((tool, {}, None, "invalid_argument"))
    edit = base["edit_knowledge_article"]
    out += [
        # right types, wrong state: a draft, an ungranted knowledge base's article, a version
        # that is stale or finer than a microsecond
        ("edit_knowledge_article", dict(edit, article_id=db.draft), None, "not_found"),
        ("read_knowledge_article", {"knowledge_base_id": "support", "article_id": db.draft},
         None, "not_found"),
        ("edit_knowledge_article", dict(edit, expected_version="2026-01-01T00:00:00Z"), None,
         "version_conflict"),
        ("edit_knowledge_article", dict(edit, expected_version=db.version.replace(
            "Z", "1Z")), None, "version_conflict"),
        ("poll_resource_events", {"resource_type": "knowledge_base", "resource_id": "support",
                                  "after_sequence": 10 ** 18}, "after_sequence",
         "invalid_argument"),
    ]
    return out


def test_every_tool_with_every_argument_wrong_gets_a_clear_tool_error(served):
    client, db = served
    seen = set()
    for i, (tool, arguments, culprit, code) in enumerate(cases(db)):
        response = client.call("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in response, (tool, culprit, response)
        error = error_of(response["result"])
        assert error["code"] == code, (tool, culprit, repr(arguments)[:200], error)
        assert isinstance(error["message"], str) and 10 < len(error["message"]) < 2000
        if code == "invalid_argument" and culprit is not None:
            # says which argument, unless another one (a required one missing) came first
            assert error["details"].get("argument") in (culprit, "arguments") or \
                culprit in error["message"], (tool, culprit, error)
        seen.add(tool)
        if i % 25 == 0:
            alive(client)
    assert seen == set(TOOLS)


# -- valid but hostile: accepted, answered, nothing written ---------------------------------------

HOSTILE_QUERIES = ["'; DROP TABLE articles; --", "NEAR(password reset)", '"unbalanced',
                   "password*", "title:password", "AND OR NOT", "^password", "{a b}",
                   "pass\u200bword", "🙂🙂", "密码 重置", "x" * 200, "- -", "\\\\",
                   "\ufeffpassword"]


def test_hostile_but_valid_queries_are_searched_as_text(served):
    client, db = served
    for query in HOSTILE_QUERIES:
        found = structured(client.tool("search_knowledge_base", knowledge_base_id="support",
                                       query=query))
        assert found["query"] == query
        for hit in found["results"]:
            assert hit["article_id"] in (db.password, db.billing)


# -- an error message never repeats a huge input back whole ----------------------------------------
# Found by this corpus: the store's enum and unknown-argument messages and the server's
# unknown-tool message once quoted the input without a bound, so a 1-2 MB value came back as a
# 1-2 MB error for the model to read.

HUGE_INPUT_CASES = [
    pytest.param({"name": "poll_resource_events", "arguments": {
        "resource_type": HUGE, "resource_id": "support"}}, id="store-enum-value"),
    pytest.param({"name": "search_knowledge_base", "arguments": {
        "knowledge_base_id": "support", "query": "password", "k" * 1000000: 1}},
        id="store-unknown-argument-name"),
    pytest.param({"name": "t" * 1000000, "arguments": {}}, id="server-unknown-tool-name"),
]


@pytest.mark.parametrize("params", HUGE_INPUT_CASES)
def test_error_messages_do_not_echo_huge_input(served, params):
    client, _ = served
    response = client.call("tools/call", params)
    if "error" in response:
        message = response["error"]["message"]
    else:
        message = error_of(response["result"])["message"]
    assert len(json.dumps(response)) < 10000, "a %d-character error" % len(message)
