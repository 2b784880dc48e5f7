"""kb-server as a client sees it: a subprocess spoken to in raw JSON-RPC lines."""

import importlib.util
import json
import subprocess
import sys

import pytest

import kbcite
from support.commands import ROOT
from support.stdio_client import (
    EDIT, LATEST, SERVER, TIMEOUT, VERSIONS, check_jsonrpc, check_schema, edit_args, error_of,
    make_db, store_head, store_read, structured,
)


def begin_edit(client, db, content="New text.", key="k1", **extra):
    """Read the password article, then send an edit of it; returns (call ID, version read)."""
    version = structured(client.tool("read_knowledge_article", knowledge_base_id="support",
                                     article_id=db.password))["updated_at"]
    call_id = client.start_tool(EDIT, **edit_args(db, db.password, version, content, key, **extra))
    return call_id, version


def expect_elicitation(client):
    """The next message, which must be the server's approval question."""
    message = client.recv()
    assert message.get("method") == "elicitation/create", message
    assert isinstance(message["id"], (str, int))
    return message


def answer(client, question, action):
    """Answer an approval question as the person would: accept, decline or cancel."""
    client.send({"jsonrpc": "2.0", "id": question["id"], "result": {"action": action}})


# -- handshake ------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_handshake_echoes_each_supported_version(start, db, version):
    client = start(db.path)
    result = client.initialize(version)
    assert result["protocolVersion"] == version
    expected = {"tools": {"listChanged": False}, "logging": {},
                "resources": {"subscribe": True, "listChanged": True}}
    if version >= "2025-03-26":  # the completions capability is new there
        expected["completions"] = {}
    assert result["capabilities"] == expected
    assert result["serverInfo"]["name"] == "kb-server" and result["serverInfo"]["version"]
    instructions = result["instructions"]
    for needle in ("citation", "expected_version", "poll_resource_events", "check_citations",
                   "re-apply"):
        assert needle in instructions
    assert client.call("ping")["result"] == {}


def test_handshake_answers_latest_for_an_unknown_version(start, db):
    client = start(db.path)
    assert client.initialize("2099-01-01")["protocolVersion"] == LATEST


def test_requests_before_initialize_are_refused_but_ping_is_answered(start, db):
    # 2026-07-28 basic/index.mdx, "Per-request protocol fields": a request missing the
    # required _meta is malformed, -32602; with no handshake either, it names both ways.
    client = start(db.path)
    assert client.call("ping", request_id="p")["result"] == {}
    response = client.call("tools/list")
    assert response["error"]["code"] == -32602
    assert "initialize" in response["error"]["message"]
    assert "_meta" in response["error"]["message"]
    client.initialize()
    response = client.call("initialize", {"protocolVersion": LATEST})
    assert response["error"]["code"] == -32600 and "already" in response["error"]["message"]


def test_initialize_without_a_version_is_invalid_params(start, db):
    client = start(db.path)
    assert client.call("initialize", {"capabilities": {}})["error"]["code"] == -32602
    assert client.initialize()["protocolVersion"] == LATEST


# -- tools/list -----------------------------------------------------------------------------------

@pytest.mark.parametrize("writes", ["ask", "allow"])
def test_tools_list_is_the_store_tools_with_output_schemas(start, db, writes):
    client = start(db.path, writes=writes)
    client.initialize()
    tools = client.call("tools/list")["result"]["tools"]
    assert tools == kbcite.TOOLS
    assert [t["name"] for t in tools] == ["search_knowledge_base", "read_knowledge_article",
                                          EDIT, "poll_resource_events", "check_citations"]
    for tool in tools:
        assert tool["outputSchema"]["type"] == "object"
        assert tool["inputSchema"]["type"] == "object"
    assert client.call("tools/list", {"cursor": "x"})["error"]["code"] == -32602


def test_writes_deny_hides_the_edit_tool_and_refuses_calls(start, db):
    client = start(db.path, writes="deny")
    client.initialize(capabilities={"elicitation": {}})
    names = [t["name"] for t in client.call("tools/list")["result"]["tools"]]
    assert names == [t["name"] for t in kbcite.TOOLS if t["name"] != EDIT]
    before = store_read(db, db.password)
    response = client.call("tools/call", {"name": EDIT, "arguments": edit_args(
        db, db.password, before["updated_at"], "Hacked.", "k1")})
    assert response["error"]["code"] == -32602
    assert "--writes deny" in response["error"]["message"]
    assert store_read(db, db.password) == before


# -- tools/call -----------------------------------------------------------------------------------

def test_every_tool_result_matches_its_output_schema(start, db):
    client = start(db.path, writes="allow")
    client.initialize()
    schemas = {t["name"]: t["outputSchema"] for t in client.call("tools/list")["result"]["tools"]}

    found = structured(client.tool("search_knowledge_base", knowledge_base_id="support",
                                   query="password"))
    check_schema(found, schemas["search_knowledge_base"])
    assert [hit["article_id"] for hit in found["results"]] == [db.password]
    assert found["results"][0]["citation"]["updated_at"] == found["results"][0]["updated_at"]

    read = structured(client.tool("read_knowledge_article", knowledge_base_id="support",
                                  article_id=db.password))
    check_schema(read, schemas["read_knowledge_article"])
    assert read["citation"] == {"knowledge_base_id": "support", "article_id": db.password,
                                "updated_at": read["updated_at"]}

    args = edit_args(db, db.password, read["updated_at"], read["content"] + "\nSee also SSO.",
                     "edit-1", title="Reset your password")
    edited = structured(client.tool(EDIT, **args))
    check_schema(edited, schemas[EDIT])
    assert edited["replayed"] is False and edited["previous_version"] == read["updated_at"]
    assert edited["title"] == "Reset your password"
    replay = structured(client.tool(EDIT, **args))
    check_schema(replay, schemas[EDIT])
    assert replay["replayed"] is True and replay["updated_at"] == edited["updated_at"]

    polled = structured(client.tool("poll_resource_events", resource_type="knowledge_base",
                                    resource_id="support", after_sequence=read["head_sequence"]))
    check_schema(polled, schemas["poll_resource_events"])
    assert [e["sequence"] for e in polled["events"]] == [edited["event"]["sequence"]]
    assert polled["events"][0]["article_id"] == db.password
    assert store_read(db, db.password)["content"].endswith("See also SSO.")


def test_tool_errors_are_results_with_is_error(start, db):
    client = start(db.path, writes="allow")
    client.initialize()
    error = error_of(client.tool("search_knowledge_base", knowledge_base_id="support", query="x"))
    assert error["code"] == "invalid_argument" and error["message"]
    error = error_of(client.tool("read_knowledge_article", knowledge_base_id="support"))
    assert error["code"] == "invalid_argument"
    error = error_of(client.tool("read_knowledge_article", knowledge_base_id="support",
                                 article_id=db.draft))
    assert error["code"] == "not_found"

    version = store_read(db, db.password)["updated_at"]
    structured(client.tool(EDIT, **edit_args(db, db.password, version, "One.", "a")))
    current = store_read(db, db.password)["updated_at"]
    error = error_of(client.tool(EDIT, **edit_args(db, db.password, version, "Two.", "b")))
    assert error["code"] == "version_conflict"
    assert error["details"]["current_version"] == current
    error = error_of(client.tool(EDIT, **edit_args(db, db.password, current, "Three.", "a")))
    assert error["code"] == "idempotency_key_reused"
    assert store_read(db, db.password)["content"] == "One."


def test_an_ungranted_knowledge_base_looks_exactly_like_a_missing_one(start, tmp_path):
    granted_elsewhere = make_db(tmp_path / "with.db", with_internal=True)
    missing = make_db(tmp_path / "without.db", with_internal=False)
    answers = []
    for db in (granted_elsewhere, missing):
        client = start(db.path)
        client.initialize()
        answers.append([
            client.call("tools/call", {"name": name, "arguments": args}, request_id=7)
            for name, args in [
                ("search_knowledge_base", {"knowledge_base_id": "internal", "query": "password"}),
                ("read_knowledge_article", {"knowledge_base_id": "internal",
                                            "article_id": "art-000001"}),
                ("poll_resource_events", {"resource_type": "knowledge_base",
                                          "resource_id": "internal"}),
            ]
        ])
    assert answers[0] == answers[1]
    assert all(error_of(r["result"])["code"] == "not_found" for r in answers[0])


def test_unknown_tool_is_a_protocol_error(start, db):
    client = start(db.path)
    client.initialize()
    response = client.call("tools/call", {"name": "drop_tables", "arguments": {}})
    assert response["error"]["code"] == -32602
    assert "drop_tables" in response["error"]["message"]


@pytest.mark.parametrize("params", [
    {"arguments": {}},
    {"name": 42},
    {"name": "search_knowledge_base", "arguments": ["support", "password"]},
    {"name": "search_knowledge_base", "arguments": "support"},
])
def test_malformed_tools_call_is_invalid_params(start, db, params):
    client = start(db.path)
    client.initialize()
    assert client.call("tools/call", params)["error"]["code"] == -32602


# -- protocol errors ------------------------------------------------------------------------------

def test_unknown_methods_are_answered_at_once(start, db):
    client = start(db.path)
    # server/discover without the 2026-07-28 _meta is malformed (basic/index.mdx,
    # "Per-request protocol fields"): answered at once, never left to time out.
    response = client.call("server/discover", {}, request_id="d")
    assert response["error"]["code"] == -32602
    client.initialize()
    for method in ("server/discover", "prompts/list", "resources/delete", "tools/delete"):
        assert client.call(method)["error"]["code"] == -32601


@pytest.mark.parametrize("line,code", [
    (b"this is not json\n", -32700),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"\n', -32700),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}\n', -32700),
    pytest.param(b"[" * 100000 + b"]" * 100000 + b"\n", -32700, id="nested-too-deep"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "\\ud800"}\n', -32601),
    (b"42\n", -32600),
    (b'"ping"\n', -32600),
    (b"[]\n", -32600),
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]\n', -32600),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}\n', -32600),
    (b'{"id": 1, "method": "ping"}\n', -32600),
    (b'{"jsonrpc": "2.0"}\n', -32600),
    (b'{"jsonrpc": "2.0", "id": 1}\n', -32600),
    (b'{"jsonrpc": "2.0", "id": 1, "method": 5}\n', -32600),
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}\n', -32600),
    (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}\n', -32600),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}\n', -32600),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}\n', -32602),
])
def test_bad_lines_get_an_error_and_the_server_lives_on(start, db, line, code):
    client = start(db.path)
    client.initialize()
    client.send_raw(line)
    response = client.recv()
    assert response["error"]["code"] == code
    if code == -32700:
        assert response["id"] is None
    assert client.call("ping", request_id="alive")["result"] == {}


def test_notifications_are_never_answered_and_zero_is_an_id(start, db):
    client = start(db.path)
    client.initialize()
    client.notify("notifications/initialized")
    client.notify("notifications/roots/list_changed")
    client.notify("notifications/cancelled", {"requestId": 12345, "reason": "nothing to stop"})
    client.notify("notifications/cancelled", "malformed")
    client.notify("ping")
    client.notify("tools/list")
    client.send_raw(b"\n   \n")
    response = client.call("ping", request_id=0)
    assert response == {"jsonrpc": "2.0", "id": 0, "result": {}}
    assert client.call("ping", request_id="")["id"] == ""


def test_responses_to_unknown_requests_are_ignored(start, db):
    client = start(db.path)
    client.initialize()
    client.send({"jsonrpc": "2.0", "id": "approve-99", "result": {"action": "accept"}})
    client.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}})
    assert client.call("ping", request_id=5)["result"] == {}


# -- approval of writes ---------------------------------------------------------------------------

@pytest.mark.parametrize("version,capabilities,with_mode", [
    ("2025-11-25", {"elicitation": {}}, True),
    ("2025-11-25", {"elicitation": {"form": {}, "url": {}}}, True),
    ("2025-06-18", {"elicitation": {}}, False),
])
def test_an_accepted_edit_is_written(start, db, version, capabilities, with_mode):
    client = start(db.path)
    client.initialize(version, capabilities)
    call_id, version_read = begin_edit(client, db, content="Short.", title="Password reset")
    question = expect_elicitation(client)
    params = question["params"]
    assert ("mode" in params) == with_mode and params.get("mode", "form") == "form"
    assert params["requestedSchema"]["type"] == "object"
    assert isinstance(params["requestedSchema"]["properties"], dict)
    message = params["message"]
    current_bytes = len(store_read(db, db.password)["content"].encode("utf-8"))
    for needle in ('"support"', '"Resetting your password"', db.password, '"Password reset"',
                   "{:,} bytes".format(current_bytes), "6 bytes", version_read):
        assert needle in message, (needle, message)
    assert store_read(db, db.password)["updated_at"] == version_read  # not written yet

    answer(client, question, "accept")
    response = client.recv()
    assert response["id"] == call_id
    edited = structured(response["result"])
    assert edited["replayed"] is False
    after = store_read(db, db.password)
    assert (after["content"], after["title"]) == ("Short.", "Password reset")
    assert after["updated_at"] == edited["updated_at"] != version_read


@pytest.mark.parametrize("reply", [
    {"result": {"action": "decline"}},
    {"result": {"action": "cancel"}},
    {"result": {"action": "maybe"}},
    {"result": {}},
    {"error": {"code": -32602, "message": "form mode not supported"}},
])
def test_a_declined_cancelled_or_failed_question_writes_nothing(start, db, reply):
    client = start(db.path)
    client.initialize(capabilities={"elicitation": {}})
    head = store_head(db)
    before = store_read(db, db.password)
    call_id, _ = begin_edit(client, db)
    question = expect_elicitation(client)
    client.send(dict({"jsonrpc": "2.0", "id": question["id"]}, **reply))
    response = client.recv()
    assert response["id"] == call_id
    error = error_of(response["result"])
    assert error["code"] == "write_not_approved"
    assert "Nothing was written" in error["message"]
    assert error["details"]["article_id"] == db.password
    assert store_read(db, db.password) == before
    assert store_head(db) == head


@pytest.mark.parametrize("version,capabilities", [
    ("2025-11-25", {}),
    ("2025-11-25", {"sampling": {}, "roots": {"listChanged": True}}),
    ("2025-11-25", {"elicitation": {"url": {}}}),
    ("2025-03-26", {"elicitation": {}}),
])
def test_a_client_that_cannot_ask_gets_a_proposal(start, db, version, capabilities):
    client = start(db.path)
    client.initialize(version, capabilities)
    before = store_read(db, db.password)
    call_id, version_read = begin_edit(client, db)
    response = client.recv()  # the answer itself: no elicitation/create was sent
    assert response["id"] == call_id
    proposed = structured(response["result"])
    assert proposed["status"] == "proposed" and proposed["replayed"] is False
    assert proposed["citation"]["updated_at"] == version_read
    assert proposed["event"]["type"] == "proposal.created"
    after = store_read(db, db.password)  # nothing written until a person approves
    assert (after["content"], after["updated_at"]) == (before["content"], before["updated_at"])
    assert after["head_sequence"] == before["head_sequence"] + 1  # its proposal.created
    with kbcite.KBStore(str(db.path)) as store:
        [pending] = store.proposals.list("support")
    assert pending["proposal_id"] == proposed["proposal_id"]


def test_no_question_before_the_client_says_initialized(start, db):
    client = start(db.path)
    client.call("initialize", {"protocolVersion": LATEST, "capabilities": {"elicitation": {}}})
    call_id, _ = begin_edit(client, db)
    response = client.recv()  # the spec lets the server send no request before `initialized`
    assert response["id"] == call_id
    error = error_of(response["result"])
    assert error["code"] == "write_not_approved"
    assert "notifications/initialized" in error["message"]
    client.notify("notifications/initialized")
    begin_edit(client, db, key="k2")
    answer(client, expect_elicitation(client), "accept")
    assert structured(client.recv()["result"])["replayed"] is False


def test_every_edit_asks_again(start, db):
    client = start(db.path)
    client.initialize(capabilities={"elicitation": {}})
    asked = []
    for n in range(3):
        call_id, _ = begin_edit(client, db, content="Version %d." % n, key="key-%d" % n)
        question = expect_elicitation(client)
        asked.append(question["id"])
        answer(client, question, "accept")
        assert structured(client.recv()["result"])["replayed"] is False
    assert len(set(asked)) == 3
    assert store_read(db, db.password)["content"] == "Version 2."


def test_a_replay_returns_the_stored_result_without_asking(start, db):
    client = start(db.path)
    client.initialize(capabilities={"elicitation": {}})
    call_id, version = begin_edit(client, db, content="Once.", key="same-key")
    answer(client, expect_elicitation(client), "accept")
    first = structured(client.recv()["result"])
    head = store_head(db)

    replay = client.tool(EDIT, **edit_args(db, db.password, version, "Once.", "same-key"))
    replayed = structured(replay)  # the response itself: no second question came first
    assert replayed["replayed"] is True
    assert dict(replayed, replayed=False) == first
    assert store_head(db) == head

    # The same key with another payload is refused, also without asking.
    error = error_of(client.tool(EDIT, **edit_args(db, db.password, version, "Twice.",
                                                   "same-key")))
    assert error["code"] == "idempotency_key_reused"


def test_a_stale_edit_is_refused_without_asking(start, db):
    client = start(db.path)
    client.initialize(capabilities={"elicitation": {}})
    stale = store_read(db, db.password)["updated_at"]
    with kbcite.KBStore(str(db.path)) as store:
        store.save_article("support", db.password, content="A colleague's fix.")
    error = error_of(client.tool(EDIT, **edit_args(db, db.password, stale, "Mine.", "k")))
    assert error["code"] == "version_conflict"
    assert error["details"]["current_version"] == store_read(db, db.password)["updated_at"]
    error = error_of(client.tool(EDIT, **edit_args(db, db.draft, stale, "Mine.", "k2")))
    assert error["code"] == "not_found"
    error = error_of(client.tool(EDIT, **edit_args(db, db.password, stale, "", "k3")))
    assert error["code"] == "invalid_argument"


def test_the_server_keeps_answering_while_a_person_decides(start, db):
    client = start(db.path)
    client.initialize(capabilities={"elicitation": {}})
    call_id, _ = begin_edit(client, db, content="Approved text.")
    question = expect_elicitation(client)

    assert client.call("ping", request_id="while-waiting")["result"] == {}
    read = structured(client.tool("read_knowledge_article", knowledge_base_id="support",
                                  article_id=db.billing))
    assert read["title"] == "Billing and invoices"
    # A second edit waits for its own answer beside the first.
    other_id = client.start_tool(EDIT, **edit_args(db, db.billing, read["updated_at"],
                                                   "Billing v2.", "k2"))
    other_question = expect_elicitation(client)
    assert other_question["id"] != question["id"]
    assert "Billing and invoices" in other_question["params"]["message"]

    answer(client, other_question, "decline")
    response = client.recv()
    assert response["id"] == other_id
    assert error_of(response["result"])["code"] == "write_not_approved"
    answer(client, question, "accept")
    response = client.recv()
    assert response["id"] == call_id
    assert structured(response["result"])["replayed"] is False
    assert store_read(db, db.password)["content"] == "Approved text."
    assert store_read(db, db.billing)["content"] == read["content"]


def test_a_cancelled_call_gets_no_response_and_writes_nothing(start, db):
    client = start(db.path)
    client.initialize(capabilities={"elicitation": {}})
    before = store_read(db, db.password)
    call_id, _ = begin_edit(client, db, content="Never written.")
    question = expect_elicitation(client)
    client.notify("notifications/cancelled", {"requestId": call_id, "reason": "user hit stop"})
    withdrawn = client.recv()
    assert withdrawn["method"] == "notifications/cancelled" and "id" not in withdrawn
    assert withdrawn["params"]["requestId"] == question["id"]
    answer(client, question, "accept")  # too late: must be ignored
    # The next message is the ping's answer: nothing was sent for the cancelled call.
    assert client.call("ping", request_id="after-cancel")["result"] == {}
    assert store_read(db, db.password) == before


def test_writes_allow_never_asks(start, db):
    client = start(db.path, writes="allow")
    client.initialize(capabilities={"elicitation": {}})
    call_id, _ = begin_edit(client, db, content="Trusted automation.")
    response = client.recv()
    assert response["id"] == call_id
    assert structured(response["result"])["replayed"] is False
    assert store_read(db, db.password)["content"] == "Trusted automation."


# -- transport ------------------------------------------------------------------------------------

def patched(db, patch):
    """Server argv that first runs ``patch`` (Python source) with the server imported."""
    source = "\n".join([
        "import os, sqlite3, sys",
        "sys.path.insert(0, %r)" % str(ROOT),
        "import kbcite.store",
        "from kbcite.server import cli, protocol",
        patch,
        "sys.exit(cli.main(sys.argv[1:]))",
    ])
    return ["-c", source, "--db", str(db.path), "--grant", "support"]


NOISY_PING = """
def noisy_ping(params, ctx):
    print("stray print from a tool")
    sys.stdout.write("stray write\\n")
    os.write(1, b"stray bytes on fd 1\\n")
    return {}
protocol.Protocol._ping = staticmethod(noisy_ping)
"""

FAILING_STORE = """
real_search = kbcite.store.HANDLERS["search_knowledge_base"]
def failing_search(ctx, args, *rest):
    if args["query"] == "locked":
        raise sqlite3.OperationalError("database is locked")
    if args["query"] == "full":
        raise sqlite3.OperationalError("database or disk is full")
    if args["query"] == "bug!":
        raise RuntimeError("a bug")
    return real_search(ctx, args, *rest)
kbcite.store.HANDLERS["search_knowledge_base"] = failing_search
"""


def test_a_database_failure_and_a_bug_are_tool_errors_never_internal_rpc_errors(start, db):
    client = start(db.path, argv=patched(db, FAILING_STORE))
    client.initialize()
    for query, code in (("locked", "store_busy"), ("full", "store_failed"),
                        ("bug!", "internal_error")):
        response = client.call("tools/call", {"name": "search_knowledge_base", "arguments": {
            "knowledge_base_id": "support", "query": query}})
        assert "error" not in response, response
        assert error_of(response["result"])["code"] == code
    found = structured(client.tool("search_knowledge_base", knowledge_base_id="support",
                                   query="password"))
    assert found["results"]
    assert "RuntimeError: a bug" in client.stderr()


def test_stdout_carries_protocol_messages_only(start, db):
    client = start(db.path, argv=patched(db, NOISY_PING))
    client.initialize()
    assert client.call("ping", request_id="noisy")["result"] == {}
    client.tool("search_knowledge_base", knowledge_base_id="support", query="password")
    assert client.close() == 0
    client._reader.join(timeout=TIMEOUT)
    for line in client.lines:
        check_jsonrpc(json.loads(line.decode("utf-8")))
    stderr = client.stderr()
    for stray in ("stray print from a tool", "stray write", "stray bytes on fd 1"):
        assert stray in stderr


def test_the_transcript_in_the_docs_is_a_fresh_runs():
    spec = importlib.util.spec_from_file_location("transcript", ROOT / "examples" / "transcript.py")
    transcript = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(transcript)
    code, fresh = transcript.capture()
    assert code == 0
    for needle in ('"code\\":\\"version_conflict\\"', '"method":"elicitation/create"',
                   '"action":"accept"', '"replayed":false', '"type":"article.updated"',
                   '"status":"changed"', "# exit code 0"):
        assert needle in fresh, needle
    shown = transcript.docs_block((ROOT / "docs" / "server.md").read_text(encoding="utf-8"))
    assert transcript.normalize(shown).strip() == transcript.normalize(fresh).strip(), (
        "docs/server.md's transcript is not what the server says now: "
        "run python examples/transcript.py --write-docs")


def test_exit_on_eof(start, db):
    client = start(db.path)
    client.initialize()
    assert client.close() == 0


def test_exit_on_eof_while_a_person_decides(start, db):
    client = start(db.path)
    client.initialize(capabilities={"elicitation": {}})
    before = store_read(db, db.password)
    begin_edit(client, db)
    expect_elicitation(client)
    assert client.close() == 0
    assert store_read(db, db.password) == before


def test_exit_on_eof_before_anything(start, db):
    client = start(db.path)
    assert client.close() == 0
    assert client.lines == []


# -- several servers on one database --------------------------------------------------------------

def test_two_servers_edit_one_database(start, db):
    first, second = start(db.path, writes="allow"), start(db.path, writes="allow")
    for client in (first, second):
        client.initialize()
    head = store_head(db)

    # Both read the same version and edit at once: exactly one wins.
    version = store_read(db, db.password)["updated_at"]
    ids = [c.start_tool(EDIT, **edit_args(db, db.password, version, "From %s." % n, "race-%s" % n))
           for n, c in (("one", first), ("two", second))]
    results = [c.recv() for c in (first, second)]
    assert [r["id"] for r in results] == ids
    won = [r for r in results if not r["result"].get("isError")]
    lost = [r for r in results if r["result"].get("isError")]
    assert len(won) == 1 and len(lost) == 1
    assert error_of(lost[0]["result"])["code"] == "version_conflict"

    # The same key and payload through both servers at once: written once, replayed once.
    version = store_read(db, db.password)["updated_at"]
    for client in (first, second):
        client.start_tool(EDIT, **edit_args(db, db.password, version, "Shared.", "shared-key"))
    shared = [structured(c.recv()["result"]) for c in (first, second)]
    assert sorted(s["replayed"] for s in shared) == [False, True]
    assert shared[0]["updated_at"] == shared[1]["updated_at"]

    # Taking turns, each re-reading and retrying after a rejection: no edit is lost.
    written = 0
    for n in range(10):
        for name, client in (("one", first), ("two", second)):
            for attempt in range(5):
                read = structured(client.tool("read_knowledge_article",
                                              knowledge_base_id="support",
                                              article_id=db.password))
                result = client.tool(EDIT, **edit_args(
                    db, db.password, read["updated_at"],
                    read["content"] + "\n%s %d" % (name, n), "%s-%d-%d" % (name, n, attempt)))
                if not result.get("isError"):
                    written += 1
                    break
                assert error_of(result)["code"] == "version_conflict"
            else:
                pytest.fail("an edit never got through")
    content = store_read(db, db.password)["content"]
    lines = content.splitlines()
    assert lines[0] == "Shared."
    assert lines[1:] == ["%s %d" % (name, n) for n in range(10) for name in ("one", "two")]
    assert written == 20

    polled = structured(first.tool("poll_resource_events", resource_type="knowledge_base",
                                   resource_id="support", after_sequence=head))
    assert [e["sequence"] for e in polled["events"]] == list(range(head + 1, head + 23))
    assert polled["head_sequence"] == head + 22  # the race's winner, the shared key, 20 turns


# -- startup --------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["--db", "{db}"], "--grant"),
    (["--grant", "support"], "--db"),
    (["--db", "{missing}", "--grant", "support"], "--db"),
    (["--db", "{db}", "--grant", "support", "--grant", "nope"], "'nope'"),
    (["--db", "{db}", "--grant", ""], "--grant"),
    (["--db", "{db}", "--grant", "support", "--writes", "sometimes"], "--writes"),
    (["--db", "{garbage}", "--grant", "support"], "--db"),
    (["--db", "{tmp}", "--grant", "support"], "--db"),
])
def test_bad_startup_is_a_clear_error_not_a_half_started_server(db, tmp_path, args, needle):
    (tmp_path / "garbage.db").write_bytes(b"this is not a database, " * 100)
    paths = {"db": str(db.path), "missing": str(tmp_path / "missing.db"),
             "garbage": str(tmp_path / "garbage.db"), "tmp": str(tmp_path)}
    argv = [a.format(**paths) for a in args]
    done = subprocess.run([sys.executable] + SERVER + argv, input=b"", capture_output=True,
                          timeout=TIMEOUT, cwd=str(ROOT))
    assert done.returncode != 0
    assert done.stdout == b""
    stderr = done.stderr.decode("utf-8")
    assert needle in stderr, stderr
    assert not (tmp_path / "missing.db").exists()


def test_a_runtime_error_is_one_line_and_a_usage_error_shows_the_usage(db, tmp_path):
    def run(*argv):
        return subprocess.run([sys.executable] + SERVER + list(argv), input=b"",
                              capture_output=True, timeout=TIMEOUT, cwd=str(ROOT))

    usage = run("--db", str(db.path), "--grant", "support", "--writes", "sometimes")
    assert usage.returncode == 2 and usage.stderr.startswith(b"usage: kb-server")
    unreadable = run("--db", str(db.path), "--grant", "support",
                     "--signing-secret-file", str(tmp_path / "no-such-secret"))
    missing = run("--db", str(tmp_path / "missing.db"), "--grant", "support")
    for done, needle in ((unreadable, b"--signing-secret-file: cannot read"),
                         (missing, b"argument --db: no knowledge-base store")):
        lines = done.stderr.splitlines()
        assert done.returncode == 1 and b"usage:" not in done.stderr, done.stderr
        assert lines[-1].startswith(b"kb-server: error: ") and needle in lines[-1], lines
    assert not (tmp_path / "missing.db").exists()


@pytest.mark.skipif(importlib.util.find_spec("uvicorn") is None, reason="needs the [http] extra")
def test_a_port_already_taken_is_one_line(db):
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        address = "127.0.0.1:%d" % holder.getsockname()[1]
        done = subprocess.run([sys.executable] + SERVER + ["--db", str(db.path), "--http",
                                                           address],
                              input=b"", capture_output=True, timeout=TIMEOUT, cwd=str(ROOT))
    assert done.returncode == 1 and b"usage:" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        b"kb-server: error: argument --http: cannot listen on " + address.encode())


def test_the_version_of_the_server_and_the_simulation():
    for argv, name in ((SERVER, "kb-server"), (["sim.py"], "sim.py"),
                       (["-m", "kbcite.sim"], "python -m kbcite.sim")):
        done = subprocess.run([sys.executable] + argv + ["--version"], capture_output=True,
                              text=True, timeout=TIMEOUT, cwd=str(ROOT))
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("%s %s" % (name, kbcite.__version__)), done.stdout
