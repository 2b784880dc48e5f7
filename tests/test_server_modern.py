"""kb-server in the stateless revision 2026-07-28, spoken to in raw JSON-RPC lines over stdio,
and what the server must do whatever the era: answer while a request waits, refuse a reused
request ID, show the person what an edit writes without letting its text rewrite the question.

Each test names the specification section its behaviour comes from (docs/specification/
2026-07-28/...).
"""

import os
import time

import pytest

from kbcite.server.approval import ApprovalSigner
from kbcite.server.protocol import SUPPORTED_VERSIONS
from kbcite.tools import TOOLS
from support.stdio_client import (
    EDIT, check_schema, edit_args, error_of, make_db, store_head, store_read, structured,
)

MODERN = "2026-07-28"
ASKING = {"elicitation": {"form": {}}}
OUTPUT = {tool["name"]: tool["outputSchema"] for tool in TOOLS}


def meta(capabilities=None, version=MODERN):
    return {"io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {} if capabilities is None
            else capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "modern-test", "version": "1"}}


def call(client, method, params=None, capabilities=None, version=MODERN, request_id=None):
    params = dict(params or {}, _meta=meta(capabilities, version))
    return client.call(method, params, request_id)


def tool(client, name, arguments, capabilities=None, **extra):
    response = call(client, "tools/call", dict({"name": name, "arguments": arguments}, **extra),
                    capabilities)
    assert "result" in response, response
    return response["result"]


def read_version(client, db, article_id):
    result = tool(client, "read_knowledge_article", {"knowledge_base_id": "support",
                                                     "article_id": article_id})
    return structured(result)["updated_at"]


def ask_for_edit(client, db, content="New text.", key="k1", capabilities=ASKING):
    """An edit of the password article: its arguments and the input_required result."""
    arguments = edit_args(db, db.password, read_version(client, db, db.password), content, key)
    return arguments, tool(client, EDIT, arguments, capabilities)


def approve(client, arguments, state, action="accept", capabilities=ASKING):
    return tool(client, EDIT, arguments, capabilities, requestState=state,
                inputResponses={"approve": {"action": action}})


# -- the stateless revision ----------------------------------------------------------------------


def test_discover_and_list_need_no_handshake(start, db):
    """server/discover.mdx ("Response"); server/tools.mdx ("Listing Tools");
    server/utilities/caching.mdx ("Cacheable Results")."""
    client = start(db.path)
    found = call(client, "server/discover")["result"]
    assert found["resultType"] == "complete"
    assert found["supportedVersions"][0] == MODERN and "2025-11-25" in found["supportedVersions"]
    assert found["capabilities"]["tools"] == {"listChanged": False}
    assert found["ttlMs"] >= 0 and found["cacheScope"] in ("public", "private")
    assert found["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "kb-server"
    listed = call(client, "tools/list")["result"]
    assert listed["resultType"] == "complete" and listed["ttlMs"] >= 0
    assert [t["name"] for t in listed["tools"]] == [t["name"] for t in TOOLS]


def test_each_request_is_judged_by_its_own_meta(start, db):
    """basic/index.mdx ("Statelessness", "Per-request protocol fields"): nothing is inferred
    from earlier requests; a missing field is -32602, an unserved version -32022."""
    client = start(db.path)
    assert call(client, "tools/list")["result"]["resultType"] == "complete"
    bare = client.call("tools/list", {})  # the same connection does not make it modern
    assert bare["error"]["code"] == -32602
    no_caps = client.call("tools/list", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN}})
    assert no_caps["error"]["code"] == -32602
    assert "clientCapabilities" in no_caps["error"]["message"]
    old = call(client, "tools/list", version="1999-01-01")["error"]
    assert old["code"] == -32022
    assert old["data"] == {"supported": list(SUPPORTED_VERSIONS),
                           "requested": "1999-01-01"}
    assert call(client, "ping")["error"]["code"] == -32601  # removed in 2026-07-28
    # ...while a handshake on the same process serves the other era beside it.
    client.initialize()
    assert "resultType" not in client.call("tools/list")["result"]
    assert call(client, "tools/list")["result"]["resultType"] == "complete"


def test_an_initialize_carrying_modern_meta_is_served_statelessly(start, db):
    """versioning.mdx ("Backward Compatibility with Initialization-Based Versions"): "a
    request carrying modern per-request _meta is served statelessly", and 2026-07-28 has no
    initialize: -32601, as for ping. No handshake is made by it."""
    client = start(db.path)
    refused = call(client, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "t", "version": "1"}})
    assert refused["error"]["code"] == -32601, refused
    assert client.call("tools/list", {})["error"]["code"] == -32602  # still no session
    client.initialize()
    assert "tools" in client.call("tools/list")["result"]


def test_tool_results_carry_result_type_and_match_their_output_schemas(start, db):
    """basic/index.mdx ("ResultType"); server/tools.mdx ("Calling Tools")."""
    client = start(db.path, writes="allow")
    for name, arguments in (
            ("search_knowledge_base", {"knowledge_base_id": "support", "query": "password"}),
            ("read_knowledge_article", {"knowledge_base_id": "support",
                                        "article_id": db.password}),
            ("poll_resource_events", {"resource_type": "knowledge_base",
                                      "resource_id": "support"})):
        result = tool(client, name, arguments)
        assert result["resultType"] == "complete"
        check_schema(structured(result), OUTPUT[name])
    version = read_version(client, db, db.password)
    edited = tool(client, EDIT, edit_args(db, db.password, version, "Allowed.", "k"))
    check_schema(structured(edited), OUTPUT[EDIT])
    failed = tool(client, "read_knowledge_article", {"knowledge_base_id": "internal",
                                                     "article_id": "art-000001"})
    assert failed["resultType"] == "complete" and error_of(failed)["code"] == "not_found"


# -- approval without server state ---------------------------------------------------------------


def test_an_edit_asks_by_input_required_and_writes_on_accept(start, db):
    """basic/patterns/mrtr.mdx ("Server Requirements"): the question travels in
    inputRequests, the state in a requestState the client echoes."""
    client = start(db.path)
    head = store_head(db)
    arguments, first = ask_for_edit(client, db, content="Approved text.")
    assert first["resultType"] == "input_required"
    question = first["inputRequests"]["approve"]
    assert question["method"] == "elicitation/create"
    assert question["params"]["mode"] == "form" and "Approved text." in question[
        "params"]["message"]
    assert store_head(db) == head  # nothing written on the first round
    done = approve(client, arguments, first["requestState"])
    assert done["resultType"] == "complete"
    assert structured(done)["replayed"] is False
    assert store_read(db, db.password)["content"] == "Approved text."
    assert store_head(db) == head + 1


@pytest.mark.parametrize("action", ["decline", "cancel", "maybe"])
def test_a_declined_or_dismissed_approval_writes_nothing(start, db, action):
    client = start(db.path)
    before = store_read(db, db.password)
    arguments, first = ask_for_edit(client, db)
    error = error_of(approve(client, arguments, first["requestState"], action))
    assert error["code"] == "write_not_approved"
    assert {"decline": "declined", "cancel": "dismissed", "maybe": "not accept"}[action] in \
        error["message"]
    assert store_read(db, db.password) == before
    # The log says so, as it does for a session's answer.
    assert "not approved: %r (signed handle)" % action in client.stderr()


def test_a_forged_altered_expired_or_misused_handle_is_refused(start, db, tmp_path):
    """mrtr.mdx, "Server Requirements" 4-5: integrity (HMAC), principal, expiry, and the
    originating request are all checked."""
    secret = tmp_path / "secret"
    secret.write_bytes(b"s" * 32)
    client = start(db.path, argv=["-m", "kbcite.server", "--db", str(db.path), "--grant",
                                  "support", "--signing-secret-file", str(secret)])
    before = store_read(db, db.password)
    arguments, first = ask_for_edit(client, db)
    state = first["requestState"]
    payload, mac = state.split(".")
    other_secret = ApprovalSigner(b"t" * 32).issue("stdio", EDIT, arguments)
    other_caller = ApprovalSigner(b"s" * 32).issue("someone", EDIT, arguments)
    # Signed with the server's own secret, but issued long enough ago to have expired: no
    # sleeping, so a slow machine cannot expire the genuine handle before its checks run.
    expired = ApprovalSigner(b"s" * 32, clock=lambda: time.time() - 3600).issue(
        "stdio", EDIT, arguments)
    for bad in (payload + "." + mac[:-2] + ("AA" if mac[-2:] != "AA" else "BB"),
                payload[:-1] + ("A" if payload[-1] != "A" else "B") + "." + mac,
                "not a handle", other_secret, other_caller, expired):
        response = call(client, "tools/call", {"name": EDIT, "arguments": arguments,
                                               "requestState": bad, "inputResponses": {
                                                   "approve": {"action": "accept"}}}, ASKING)
        assert response["error"]["code"] == -32602, (bad, response)
        assert "requestState" in response["error"]["message"]
    other_args = dict(arguments, content="Something else.")
    response = call(client, "tools/call", {"name": EDIT, "arguments": other_args,
                                           "requestState": state, "inputResponses": {
                                               "approve": {"action": "accept"}}}, ASKING)
    assert "other arguments" in response["error"]["message"]
    response = call(client, "tools/call", {"name": EDIT, "arguments": arguments,
                                           "requestState": expired, "inputResponses": {
                                               "approve": {"action": "accept"}}}, ASKING)
    assert "expired" in response["error"]["message"]
    assert store_read(db, db.password) == before


def test_a_handle_outlives_no_approval_ttl(start, db):
    """--approval-ttl bounds a handle's life: one second, then the answer is refused."""
    client = start(db.path, argv=["-m", "kbcite.server", "--db", str(db.path), "--grant",
                                  "support", "--approval-ttl", "1"])
    before = store_read(db, db.password)
    arguments, first = ask_for_edit(client, db)
    time.sleep(2.1)  # only ever later than the expiry, however slow the machine
    response = call(client, "tools/call", {"name": EDIT, "arguments": arguments,
                                           "requestState": first["requestState"],
                                           "inputResponses": {"approve": {"action": "accept"}}},
                    ASKING)
    assert response["error"]["code"] == -32602
    assert "expired" in response["error"]["message"]
    assert store_read(db, db.password) == before


def test_an_approved_call_sent_again_is_a_replay_never_asked_again(start, db):
    """The idempotency key makes the handle's reuse harmless (server-layers: "the handle does
    not need to be single-use")."""
    client = start(db.path)
    arguments, first = ask_for_edit(client, db, content="Once.")
    head = store_head(db)
    done = structured(approve(client, arguments, first["requestState"]))
    again = structured(approve(client, arguments, first["requestState"]))
    assert again["replayed"] is True and dict(again, replayed=False) == done
    fresh = tool(client, EDIT, arguments, ASKING)  # the same call, no handle: not asked
    assert fresh["resultType"] == "complete" and structured(fresh)["replayed"] is True
    assert store_head(db) == head + 1


def test_a_client_that_cannot_be_asked_gets_a_proposal(start, db):
    """mrtr.mdx rule 7: no elicitation request to a client that did not declare it; the edit
    is kept for a person to review instead (kb review), and the answer says so."""
    client = start(db.path)
    before = store_read(db, db.password)
    for n, capabilities in enumerate(({}, {"elicitation": {"url": {}}})):
        arguments = edit_args(db, db.password, before["updated_at"], "x%d" % n, "k%d" % n)
        response = call(client, "tools/call", {"name": EDIT, "arguments": arguments},
                        capabilities)
        proposed = structured(response["result"])
        assert proposed["status"] == "proposed" and proposed["proposal_id"] == n + 1
        assert proposed["citation"]["updated_at"] == before["updated_at"]
        assert "kb review show support %d" % (n + 1) in proposed["review"]
        after = store_read(db, db.password)
        assert (after["content"], after["updated_at"]) == (before["content"],
                                                           before["updated_at"])
    # A doomed edit is a tool error, whatever the capabilities: nobody is asked about it.
    stale = tool(client, EDIT, edit_args(db, db.password, "2020-01-01T00:00:00Z", "x", "k2"))
    assert error_of(stale)["code"] == "version_conflict"
    assert store_read(db, db.password)["content"] == before["content"]


def test_two_servers_share_an_approval_through_the_secret(start, db, tmp_path):
    """An approval started on one server and finished on another (same database, same
    signing secret): nothing of it lives in a server's memory."""
    secret = tmp_path / "secret"
    secret.write_bytes(os.urandom(32))

    def server():
        return start(db.path, argv=["-m", "kbcite.server", "--db", str(db.path), "--grant",
                                    "support", "--signing-secret-file", str(secret)])
    one, two = server(), server()
    arguments, first = ask_for_edit(one, db, content="Finished elsewhere.")
    done = approve(two, arguments, first["requestState"])
    assert structured(done)["replayed"] is False
    assert store_read(db, db.password)["content"] == "Finished elsewhere."
    # And back: the other way round, alternating.
    arguments, first = ask_for_edit(two, db, content="And back.", key="k2")
    assert structured(approve(one, arguments, first["requestState"]))["replayed"] is False
    assert store_read(db, db.password)["content"] == "And back."


# -- whatever the era ----------------------------------------------------------------------------


def test_the_question_cannot_be_rewritten_by_the_agents_text(start, db):
    """The title and content an agent chooses are shown escaped: a right-to-left override or a
    line separator cannot reorder or fake what the person reads."""
    client = start(db.path)
    # A title may hold no control character at all (it is refused as invalid), so the bell
    # rides in the content.
    sneaky = "Fine.\u202eesab atad eht eteled\u2028Accept to write this change.\u0007"
    arguments = edit_args(db, db.password, read_version(client, db, db.password), sneaky, "k",
                          title="Safe\u202e title")
    first = tool(client, EDIT, arguments, ASKING)
    message = first["inputRequests"]["approve"]["params"]["message"]
    for raw in ("\u202e", "\u2028", "\u0007"):
        assert raw not in message
    assert "\\u202e" in message and "\\u2028" in message and "\\u0007" in message
    assert "Fine." in message  # the content itself, not only its size
    assert message.count("Accept to write this change") == 2  # the agent's, escaped, and ours
    assert message.rstrip().endswith("Every edit is asked about.")


def test_pings_and_other_requests_are_answered_while_a_call_waits_on_the_database(
        start, db, hold_write_lock):
    """A tool call blocked on a write lock does not hold up the others."""
    with hold_write_lock(db.path) as release:
        client = start(db.path, writes="allow")
        client.initialize()
        version = store_read(db, db.password)["updated_at"]
        waiting = client.request("tools/call", {"name": EDIT, "arguments": edit_args(
            db, db.password, version, "Waits.", "k")})
        started = time.monotonic()
        assert client.call("ping", request_id="p")["result"] == {}
        found = client.call("tools/call", {"name": "search_knowledge_base", "arguments": {
            "knowledge_base_id": "support", "query": "invoices"}})
        assert structured(found["result"])["results"]
        assert time.monotonic() - started < 5
        release()
        done = client.recv(timeout=60)
        assert done["id"] == waiting and structured(done["result"])["replayed"] is False


def answers_to(client, ids, timeout=60):
    """The responses to the requests ``ids``, by ID, however they come."""
    found = {}
    while len(found) < len(ids):
        message = client.recv(timeout=timeout)
        found[message["id"]] = message
    return found


def test_reads_are_answered_while_more_edits_wait_than_the_server_has_threads(
        start, db, hold_write_lock):
    """Edits waiting for a lock hold edit connections and edit threads, never a read's: twelve
    of them (more than the eight threads calls had), and a read is still answered at once."""
    with hold_write_lock(db.path) as release:
        client = start(db.path, grants=("support", "internal"), writes="allow")
        client.initialize()
        version = store_read(db, db.password)["updated_at"]
        waiting = [client.request("tools/call", {"name": EDIT, "arguments": edit_args(
            db, db.password, version, "Waits %d." % i, "w%d" % i)}) for i in range(12)]
        time.sleep(0.5)
        for kb_id, article_id in (("support", db.billing), ("internal", "art-000001")):
            started = time.monotonic()
            read = client.call("tools/call", {"name": "read_knowledge_article", "arguments": {
                "knowledge_base_id": kb_id, "article_id": article_id}})
            assert structured(read["result"])["article_id"] == article_id
            assert time.monotonic() - started < 2
        release()
        done = answers_to(client, waiting)
    written = [i for i in waiting if not done[i]["result"].get("isError")]
    assert len(written) == 1  # one version, one winner; the rest are conflicts
    assert {error_of(done[i]["result"])["code"] for i in waiting if i not in written} == {
        "version_conflict"}


def test_edits_beyond_a_knowledge_bases_queue_are_busy_at_once(start, db, hold_write_lock):
    """--queued-edits 2: one edit has the knowledge base's turn, two wait, and the next hears
    store_busy (retryable) at once instead of after the store's thirty-second wait."""
    with hold_write_lock(db.path) as release:
        client = start(db.path, writes="allow", extra=["--queued-edits", "2"])
        client.initialize()
        version = store_read(db, db.password)["updated_at"]
        waiting = [client.request("tools/call", {"name": EDIT, "arguments": edit_args(
            db, db.password, version, "Queued %d." % i, "q%d" % i)}) for i in range(3)]
        time.sleep(0.5)
        started = time.monotonic()
        busy = client.call("tools/call", {"name": EDIT, "arguments": edit_args(
            db, db.password, version, "One too many.", "q-extra")})
        assert time.monotonic() - started < 2
        error = error_of(busy["result"])
        assert error["code"] == "store_busy" and error["details"]["retryable"] is True
        assert "Nothing was written" in error["message"]
        release()
        answers_to(client, waiting)
    assert "One too many." not in store_read(db, db.password)["content"]


@pytest.mark.slow
def test_on_postgresql_a_locked_knowledge_base_delays_no_other(start, pg_url):
    """Row locks are per knowledge base on PostgreSQL: while another session holds support's,
    edits to support wait (at most one of them on a connection), and edits and reads of
    internal are answered at once."""
    import psycopg

    db = make_db(pg_url)
    client = start(db.path, grants=("support", "internal"), writes="allow")
    client.initialize()
    version = store_read(db, db.password)["updated_at"]
    with psycopg.connect(pg_url) as holder:
        holder.execute("SELECT pk FROM knowledge_bases WHERE kb_id = 'support' FOR UPDATE")
        waiting = [client.request("tools/call", {"name": EDIT, "arguments": edit_args(
            db, db.password, version, "Waits %d." % i, "p%d" % i)}) for i in range(12)]
        time.sleep(0.5)
        started = time.monotonic()
        read = client.call("tools/call", {"name": "read_knowledge_article", "arguments": {
            "knowledge_base_id": "internal", "article_id": "art-000001"}})
        other = structured(read["result"])
        edited = client.call("tools/call", {"name": EDIT, "arguments": {
            "knowledge_base_id": "internal", "article_id": "art-000001",
            "content": "Moved to the vault.", "expected_version": other["updated_at"],
            "idempotency_key": "other"}})
        assert structured(edited["result"])["replayed"] is False
        assert time.monotonic() - started < 3
        holder.rollback()
    answers_to(client, waiting)


def test_a_request_id_in_flight_is_not_reused(start, db):
    client = start(db.path)
    client.initialize(capabilities={"elicitation": {}})
    version = store_read(db, db.password)["updated_at"]
    client.request("tools/call", {"name": EDIT, "arguments": edit_args(
        db, db.password, version, "x", "k")}, request_id=7)
    question = client.recv()
    assert question["method"] == "elicitation/create"
    reused = client.call("tools/call", {"name": "search_knowledge_base", "arguments": {
        "knowledge_base_id": "support", "query": "invoices"}}, request_id=7)
    assert reused["error"]["code"] == -32600 and "already in use" in reused["error"]["message"]
    client.send({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}})
    answered = client.recv()
    assert answered["id"] == 7 and error_of(answered["result"])["code"] == "write_not_approved"
    # Once answered, the ID is free again.
    assert "result" in client.call("ping", request_id=7)


def test_each_answer_to_the_question_is_reported_in_plain_words(start, db):
    client = start(db.path)
    client.initialize(capabilities={"elicitation": {}})
    for action, words in (("decline", "The person declined the edit."),
                          ("cancel", "The person dismissed the question, so the edit was not "
                                     "made."),
                          ("ACCEPT", "with 'ACCEPT', which is not accept, decline or cancel")):
        version = store_read(db, db.password)["updated_at"]
        client.request("tools/call", {"name": EDIT, "arguments": edit_args(
            db, db.password, version, "x", action)})
        question = client.recv()
        client.send({"jsonrpc": "2.0", "id": question["id"], "result": {"action": action}})
        message = error_of(client.recv()["result"])["message"]
        assert words in message, message
        assert "question the edit" not in message and "understands" not in message


def test_a_cancelled_call_waiting_on_the_database_writes_nothing(start, db, hold_write_lock):
    """basic/patterns/cancellation.mdx, "Behavior Requirements": stop processing, send no
    response. A call waiting for another writer's lock is stopped where it waits."""
    with hold_write_lock(db.path) as release:
        client = start(db.path, writes="allow")
        client.initialize()
        before = store_read(db, db.password)
        waiting = client.request("tools/call", {"name": EDIT, "arguments": edit_args(
            db, db.password, before["updated_at"], "Cancelled.", "k")})
        time.sleep(0.5)
        client.notify("notifications/cancelled", {"requestId": waiting, "reason": "changed"})
        time.sleep(0.5)
        release()
        # The next answer is the ping's: the cancelled call sends none.
        assert client.call("ping", request_id="after")["result"] == {}
        time.sleep(0.5)
        assert store_read(db, db.password) == before
        assert "cancelled by the client" in client.stderr()
