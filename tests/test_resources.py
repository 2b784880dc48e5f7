"""Articles as MCP resources over stdio, in raw JSON-RPC lines, both eras: the templates, the
paged list, reads of the current and of a cited version, the one not-found, resource links
beside tool results, completions, subscriptions fed by the event log, and logging.

Each test names the specification section its behaviour comes from
(docs/specification/2025-11-25/server/resources.mdx unless said otherwise).
"""

import importlib.util
import json
import time
from urllib.parse import quote

import pytest

import kbcite
from kbcite.server.resources import (PAGE_SIZE, TEMPLATE_CURRENT, TEMPLATE_VERSION,
                                     decode_cursor, encode_cursor, format_uri, parse_uri)
from support.commands import ROOT
from support.stdio_client import link_citation, structured

MODERN = "2026-07-28"
KB = "support"


def meta():
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}


def modern(client, method, params=None, request_id=None):
    return client.call(method, dict(params or {}, _meta=meta()), request_id)


def uri(article_id, version=None, kb_id=KB):
    return format_uri(kb_id, article_id, version)


def version_of(db, article_id):
    with kbcite.KBStore(str(db.path)) as store:
        return store.get_article(KB, article_id)["updated_at"]


def save(db, article_id, content, kb_id=KB):
    """Another client's change (a person's save through the store): returns its version."""
    with kbcite.KBStore(str(db.path)) as store:
        return store.save_article(kb_id, article_id, content=content)


def recv_until(client, method, timeout=5.0):
    """The next message with ``method`` (others skipped), and how long it took."""
    started = time.monotonic()
    while True:
        left = timeout - (time.monotonic() - started)
        assert left > 0, "no %s within %s s" % (method, timeout)
        message = client.recv(left)
        if message.get("method") == method:
            return message, time.monotonic() - started


# -- URIs and cursors (no server) ----------------------------------------------------------------


def test_uris_round_trip_with_either_spelling_of_a_versions_colons():
    """Templates expand by RFC 6570 (SDKs send %3A); the raw colon is taken too."""
    version = "2026-11-29T23:21:32.166875Z"
    assert format_uri("support", "art-1", version) == \
        "kb://support/articles/art-1@2026-11-29T23%3A21%3A32.166875Z"
    assert parse_uri(format_uri("support", "art-1", version)) == ("support", "art-1", version)
    assert parse_uri("kb://support/articles/art-1@" + version) == ("support", "art-1", version)
    odd = "my kb/é@x"
    assert parse_uri(format_uri(odd, "a@b/c")) == (odd, "a@b/c", None)
    assert format_uri(odd, "a@b/c", "x y") == \
        "kb://my%20kb%2F%C3%A9%40x/articles/a%40b%2Fc@x%20y"
    assert format_uri("k.b_~1", "A-z.0~_") == "kb://k.b_~1/articles/A-z.0~_"
    for bad in ("test://static-text", "kb://support/articles/", "kb://support/other/art-1",
                "kb://support/articles/a/b", "kb://support/articles/a@b@c",
                "kb://support/articles/a%zz", "kb://support/articles/art-1?x=1",
                "kb:///articles/art-1", "kb://support/articles/a%00", 7, None):
        assert parse_uri(bad) is None, bad


def test_a_cursor_is_opaque_and_a_foreign_one_is_invalid_params():
    """utilities/pagination.mdx: invalid cursors SHOULD be -32602."""
    assert decode_cursor(encode_cursor(("support", "art-000500"))) == ("support", "art-000500")
    for bad in ("garbage", "", "e30", encode_cursor(("a", "b"))[:-2]):
        with pytest.raises(kbcite.server.jsonrpc.RpcError) as caught:
            decode_cursor(bad)
        assert caught.value.code == -32602


# -- list, templates, read ---------------------------------------------------------------------


def test_the_list_pages_through_the_granted_published_articles_only(start, db):
    with kbcite.KBStore(str(db.path)) as store:
        many = store.create_articles(KB, [("Note %d" % i, "Text %d." % i)
                                          for i in range(PAGE_SIZE + 5)])
        store.create_article("internal", "Secret", "Not for support's token.")
    client = start(db.path)
    client.initialize()
    seen, cursor, pages = [], None, 0
    while True:
        result = client.call("resources/list", {"cursor": cursor} if cursor else {})["result"]
        pages += 1
        seen += result["resources"]
        cursor = result.get("nextCursor")
        if cursor is None:
            break
        assert cursor != ""  # 2026-07-28 pagination: "" is a cursor, never the end
    assert pages == 2
    names = [entry["name"] for entry in seen]
    assert names == sorted([db.password, db.billing] + many)  # no draft, nothing of internal
    first = seen[0]
    assert first["uri"] == uri(db.password) and first["mimeType"] == "text/markdown"
    assert first["annotations"]["lastModified"] == version_of(db, db.password)
    assert first["_meta"]["kbcite/citation"]["updated_at"] == version_of(db, db.password)
    bad = client.call("resources/list", {"cursor": "garbage"})
    assert bad["error"]["code"] == -32602


def test_templates_are_listed_in_both_eras(start, db):
    client = start(db.path)
    result = modern(client, "resources/templates/list")["result"]
    assert [t["uriTemplate"] for t in result["resourceTemplates"]] == [TEMPLATE_CURRENT,
                                                                       TEMPLATE_VERSION]
    assert result["cacheScope"] == "public" and result["ttlMs"] >= 0
    client.initialize()
    legacy = client.call("resources/templates/list")["result"]
    assert legacy["resourceTemplates"] == result["resourceTemplates"]
    assert "ttlMs" not in legacy


def test_a_read_gives_the_markdown_and_a_pinned_uri_the_cited_version(start, db):
    client = start(db.path)
    client.initialize()
    old = version_of(db, db.password)
    old_text = client.call("resources/read", {"uri": uri(db.password)})["result"]
    [item] = old_text["contents"]
    assert item["uri"] == uri(db.password) and item["mimeType"] == "text/markdown"
    assert item["_meta"]["kbcite/citation"] == {"knowledge_base_id": KB,
                                                "article_id": db.password, "updated_at": old}
    assert item["_meta"]["kbcite/title"] == "Resetting your password"
    new = save(db, db.password, "Changed since it was cited.")
    current = client.call("resources/read", {"uri": uri(db.password)})["result"]["contents"][0]
    assert current["text"] == "Changed since it was cited."
    for spelled in (uri(db.password, old), "kb://support/articles/%s@%s" % (db.password, old)):
        pinned = client.call("resources/read", {"uri": spelled})["result"]["contents"][0]
        assert pinned["uri"] == spelled and pinned["text"] == item["text"]
        assert pinned["_meta"]["kbcite/citation"]["updated_at"] == old
        assert pinned["_meta"]["kbcite/current"]["updated_at"] == new


def test_the_2026_read_carries_caching_hints_and_its_own_not_found(start, db):
    """2026-07-28 server/utilities/caching.mdx (ttlMs, cacheScope required) and
    server/resources.mdx "Error Handling" (-32602 with data.uri, never -32002)."""
    client = start(db.path)
    version = version_of(db, db.password)
    current = modern(client, "resources/read", {"uri": uri(db.password)})["result"]
    assert current["resultType"] == "complete" and current["cacheScope"] == "private"
    pinned = modern(client, "resources/read", {"uri": uri(db.password, version)})["result"]
    assert pinned["ttlMs"] > current["ttlMs"] >= 0 and pinned["cacheScope"] == "private"
    listed = modern(client, "resources/list")["result"]
    assert listed["cacheScope"] == "private" and listed["ttlMs"] >= 0
    missing = modern(client, "resources/read", {"uri": "test://nonexistent"})
    assert missing["error"] == {"code": -32602, "message": "Resource not found",
                                "data": {"uri": "test://nonexistent"}}
    assert modern(client, "resources/read", {"uri": 5})["error"]["code"] == -32602


def test_ungranted_draft_unpublished_and_missing_are_the_same_bytes(start, db):
    """resources.mdx "Security": access controls; nothing tells ungranted from missing."""
    with kbcite.KBStore(str(db.path)) as store:
        secret = store.create_article("internal", "Secret", "Not for this client.")
        gone = store.create_article(KB, "Soon gone", "Text.")
        gone_version = store.unpublish(KB, gone)
    old = version_of(db, db.password)
    cases = [uri(secret, kb_id="internal"), uri("art-999999", kb_id="internal"),
             uri(db.password, kb_id="nowhere"), uri("art-999999"), uri(db.draft), uri(gone),
             uri(gone, gone_version), uri(db.password, "2001-01-01T00:00:00Z"),
             uri(db.password, "not-a-version"), uri(secret, old, kb_id="internal"),
             "kb://support/articles/" + "x" * 300, "test://static-text"]
    client = start(db.path)
    client.initialize()
    for era in ("legacy", "modern"):
        shapes = set()
        for i, case in enumerate(cases):
            request_id = "same"
            if era == "modern":
                modern(client, "resources/read", {"uri": case}, request_id)
            else:
                client.call("resources/read", {"uri": case}, request_id)
            line = client.lines[-1].decode("utf-8")
            shapes.add(line.replace(json.dumps(case)[1:-1], "URI"))
        assert len(shapes) == 1, shapes
        code = -32602 if era == "modern" else -32002
        assert json.loads(shapes.pop())["error"] == {"code": code,
                                                     "message": "Resource not found",
                                                     "data": {"uri": "URI"}}


# -- resource links ----------------------------------------------------------------------------


@pytest.mark.parametrize("version,links", [("2025-03-26", False), ("2025-06-18", True),
                                           ("2025-11-25", True), (MODERN, True)])
def test_every_hit_and_every_read_comes_with_a_resource_link(start, db, version, links):
    """server/tools.mdx "Resource Links" (from 2025-06-18): beside the structured result,
    which stays as it is."""
    client = start(db.path)
    args = {"knowledge_base_id": KB, "query": "password OR billing"}
    if version == MODERN:
        found = modern(client, "tools/call", {"name": "search_knowledge_base",
                                              "arguments": args})["result"]
    else:
        client.initialize(version)
        found = client.tool("search_knowledge_base", **args)
    hits = structured(found)["results"]
    assert len(hits) == 2
    assert len(found["content"]) == (1 + len(hits) if links else 1)
    read = client.tool("read_knowledge_article", knowledge_base_id=KB,
                       article_id=db.password) if version != MODERN else modern(
        client, "tools/call", {"name": "read_knowledge_article",
                               "arguments": {"knowledge_base_id": KB,
                                             "article_id": db.password}})["result"]
    structured(read)
    if not links:
        assert len(read["content"]) == 1
        return
    [link] = read["content"][1:]
    assert link_citation(link) == read["structuredContent"]["citation"]
    assert link["title"] == "Resetting your password"
    # A link reads back as the very version it names.
    got = client.call("resources/read", {"uri": link["uri"]}) if version != MODERN else modern(
        client, "resources/read", {"uri": link["uri"]})
    assert got["result"]["contents"][0]["text"] == read["structuredContent"]["content"]


# -- completions -------------------------------------------------------------------------------


def complete(client, name, value, context=None, template=TEMPLATE_CURRENT):
    params = {"ref": {"type": "ref/resource", "uri": template},
              "argument": {"name": name, "value": value}}
    if context is not None:
        params["context"] = {"arguments": context}
    return client.call("completion/complete", params)


def test_completions_offer_granted_knowledge_bases_and_article_ids(start, db):
    """server/utilities/completion.mdx: at most 100 values; errors -32602."""
    with kbcite.KBStore(str(db.path)) as store:
        store.create_knowledge_base("supplies")
        many = store.create_articles(KB, [("Printer toner %d" % i, "Refills.")
                                          for i in range(120)])
    client = start(db.path, grants=("support", "supplies"))
    client.initialize()
    kbs = complete(client, "knowledge_base_id", "sup")["result"]["completion"]
    assert kbs == {"values": ["supplies", "support"], "total": 2, "hasMore": False}
    assert complete(client, "knowledge_base_id", "int")["result"]["completion"]["values"] == []
    assert complete(client, "knowledge_base_id", "now")["result"]["completion"]["values"] == []
    ids = complete(client, "article_id", "art-", {"knowledge_base_id": KB})
    ids = ids["result"]["completion"]
    assert len(ids["values"]) == 100 and ids["hasMore"] is True
    assert ids["values"] == sorted([db.password, db.billing] + many)[:100]  # no draft
    words = complete(client, "article_id", "password", {"knowledge_base_id": KB})
    assert words["result"]["completion"]["values"] == [db.password]
    typing = complete(client, "article_id", "reset pass", {"knowledge_base_id": KB})
    assert typing["result"]["completion"]["values"][0] == db.password  # the word being typed
    toner = complete(client, "article_id", "Toner", {"knowledge_base_id": KB})
    assert toner["result"]["completion"]["hasMore"] is True  # 120 titles hold the word
    # Ungranted and missing complete alike: to nothing.
    for kb_id in ("internal", "missing"):
        got = complete(client, "article_id", "art-", {"knowledge_base_id": kb_id})
        assert got["result"]["completion"] == {"values": [], "total": 0, "hasMore": False}
    version = complete(client, "updated_at", "", {"knowledge_base_id": KB,
                                                  "article_id": db.password},
                       template=TEMPLATE_VERSION)["result"]["completion"]
    assert version["values"] == [version_of(db, db.password)]
    for params in ({"ref": {"type": "ref/prompt", "name": "p"},
                    "argument": {"name": "a", "value": ""}},
                   {"ref": {"type": "ref/resource", "uri": "test://{x}"},
                    "argument": {"name": "x", "value": ""}},
                   {"ref": {"type": "ref/resource", "uri": TEMPLATE_CURRENT},
                    "argument": {"name": "updated_at", "value": ""}},
                   {"ref": {"type": "ref/resource", "uri": TEMPLATE_CURRENT}}):
        assert client.call("completion/complete", params)["error"]["code"] == -32602
    modern_kbs = modern(client, "completion/complete", {
        "ref": {"type": "ref/resource", "uri": TEMPLATE_CURRENT},
        "argument": {"name": "knowledge_base_id", "value": "supp"}})["result"]
    assert modern_kbs["completion"]["values"] == ["supplies", "support"]
    assert modern_kbs["resultType"] == "complete"


# -- subscriptions -------------------------------------------------------------------------------



@pytest.mark.parametrize("bad", ["x\ud800", "\udfff", "a\x00b"])
def test_a_completion_value_the_tools_refuse_is_invalid_params(start, db, bad):
    """server/utilities/completion.mdx: invalid arguments are -32602 (or an empty
    completion), as the tools refuse the string; never -32603 with a traceback."""
    client = start(db.path)
    client.initialize()
    asked = [("knowledge_base_id", bad, None, TEMPLATE_CURRENT),
             ("article_id", bad, {"knowledge_base_id": "support"}, TEMPLATE_CURRENT),
             ("article_id", "art", {"knowledge_base_id": bad}, TEMPLATE_CURRENT),
             ("updated_at", "", {"knowledge_base_id": "support", "article_id": bad},
              TEMPLATE_VERSION)]
    codes = []
    for name, value, context, template in asked:
        answer = complete(client, name, value, context, template)
        if "result" in answer:  # an empty completion is allowed too
            assert answer["result"]["completion"]["values"] == [], (name, answer)
        else:
            codes.append(answer["error"]["code"])
    assert codes.count(-32602) >= 3 and set(codes) == {-32602}
    # The same server still completes good values, and logged no fault.
    good = complete(client, "knowledge_base_id", "sup")["result"]["completion"]
    assert good["values"] == ["support"]
    client.close()
    assert "Traceback" not in client.stderr() and "internal" not in client.stderr().lower()


def test_a_subscription_hears_of_another_clients_edit_within_a_second(start, db):
    """resources.mdx "Subscriptions"; only what the caller may read ever notifies."""
    with kbcite.KBStore(str(db.path)) as store:
        secret = store.create_article("internal", "Secret", "Not for this client.")
    client = start(db.path)
    client.initialize()
    for target in (uri(db.password), uri(secret, kb_id="internal"), uri("art-999999")):
        assert client.call("resources/subscribe", {"uri": target})["result"] == {}
    save(db, secret, "Changed where this client cannot see.", kb_id="internal")
    save(db, db.billing, "Not subscribed to.")
    save(db, db.password, "Changed by someone else.")
    message, elapsed = recv_until(client, "notifications/resources/updated")  # from the commit
    assert message["params"] == {"uri": uri(db.password)}
    assert elapsed < 1.0, elapsed
    # Unsubscribed: the next change says nothing (a ping's answer comes first and alone).
    assert client.call("resources/unsubscribe", {"uri": uri(db.password)})["result"] == {}
    save(db, db.password, "Changed again.")
    time.sleep(0.6)
    assert client.call("ping")["result"] == {}
    with kbcite.KBStore(str(db.path)) as store:
        store.unpublish(KB, db.billing)
    message, _ = recv_until(client, "notifications/resources/list_changed")
    assert "params" not in message


def test_a_handshake_client_hears_the_list_change_without_subscribing(start, db):
    """The listChanged capability promises list_changed to every client, subscribed or not."""
    client = start(db.path)
    client.initialize()
    # The server reads its input in order: once the ping is answered, the initialized
    # notification before it has made the client's subscriber and the watcher knows the heads.
    assert client.call("ping")["result"] == {}
    save(db, db.password, "A save changes no list.")
    with kbcite.KBStore(str(db.path)) as store:
        store.unpublish(KB, db.billing)
    message = client.recv(5.0)  # the first message of all: no updated, nothing subscribed
    assert message == {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}


def test_a_listen_stream_is_acknowledged_first_tagged_and_ends_on_cancel(start, db):
    """2026-07-28 basic/patterns/subscriptions.mdx: the acknowledgement first; only what the
    filter asked for; every notification tagged with the listen request's ID."""
    client = start(db.path)
    pinned = uri(db.password, version_of(db, db.password))
    client.request("subscriptions/listen", {"_meta": meta(), "notifications": {
        "toolsListChanged": True, "promptsListChanged": True,
        "resourceSubscriptions": [uri(db.password), pinned]}}, "listen-1")
    ack = client.recv()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"] == {"_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"},
                             "notifications": {"resourceSubscriptions": [uri(db.password),
                                                                         pinned]}}
    save(db, db.password, "Edited while listening.")
    message, elapsed = recv_until(client, "notifications/resources/updated")
    assert message["params"] == {"uri": uri(db.password),
                                 "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}}
    assert elapsed < 1.0
    with kbcite.KBStore(str(db.path)) as store:
        store.unpublish(KB, db.password)  # the pinned version can no longer be read
    message, _ = recv_until(client, "notifications/resources/updated")
    got = {message["params"]["uri"]}
    got.add(client.recv()["params"]["uri"])
    assert got == {uri(db.password), pinned}  # no list_changed: it was not asked for
    client.notify("notifications/cancelled", {"requestId": "listen-1"})
    assert client.call("ping", {"_meta": {}})["result"] == {}
    with kbcite.KBStore(str(db.path)) as store:
        store.publish(KB, db.password)
    time.sleep(0.6)
    assert modern(client, "tools/list")["result"]["tools"]  # the next line is its answer


def test_the_eras_keep_their_own_methods(start, db):
    """2026-07-28 changelog: resources/subscribe and logging/setLevel are gone there."""
    client = start(db.path)
    for method in ("resources/subscribe", "resources/unsubscribe", "logging/setLevel"):
        got = modern(client, method, {"uri": uri(db.password), "level": "info"})
        assert got["error"]["code"] == -32601, got
    client.initialize()
    assert client.call("subscriptions/listen", {"notifications": {}})["error"]["code"] == -32601
    assert client.call("resources/subscribe", {"uri": 3})["error"]["code"] == -32602


def test_logging_sends_what_was_asked_for_and_no_more(start, db):
    """server/utilities/logging.mdx: setLevel, invalid level -32602, notifications/message."""
    client = start(db.path)
    client.initialize()
    assert client.call("logging/setLevel", {"level": "loud"})["error"]["code"] == -32602
    client.tool("read_knowledge_article", knowledge_base_id=KB, article_id="art-999999")
    assert client.call("logging/setLevel", {"level": "warning"})["result"] == {}
    client.request("tools/call", {"name": "read_knowledge_article", "arguments": {
        "knowledge_base_id": KB, "article_id": "art-999999"}})
    first, second = client.recv(), client.recv()
    [message] = [m for m in (first, second) if m.get("method") == "notifications/message"]
    assert message["params"]["level"] == "warning"
    assert message["params"]["data"]["error"] == "not_found"
    assert quote("art-999999") in json.dumps(message)


def test_the_resource_session_in_the_docs_is_a_fresh_runs():
    spec = importlib.util.spec_from_file_location("transcript", ROOT / "examples" / "transcript.py")
    transcript = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(transcript)
    code, fresh = transcript.capture(resources=True)
    assert code == 0
    for needle in ('"method":"notifications/resources/updated"', '"type":"resource_link"',
                   '"kbcite/current"', '"code":-32002', '"values":["art-000001"]'):
        assert needle in fresh, needle
    shown = transcript.docs_block((ROOT / "docs" / "server.md").read_text(encoding="utf-8"),
                                  transcript.RESOURCES)
    assert transcript.normalize(shown).strip() == transcript.normalize(fresh).strip(), (
        "docs/server.md's resource session is not what the server says now: "
        "run python examples/transcript.py --resources --write-docs")


def test_the_catalogue_pages_and_completes_alike_on_both_engines(store):
    """kbcite.catalog on SQLite and PostgreSQL: the same pages in the same order, the same
    completions; drafts and ungranted knowledge bases never appear."""
    store.create_knowledge_base("alpha")
    store.create_knowledge_base("beta")
    store.create_knowledge_base("hidden")
    ids = store.create_articles("alpha", [("Password reset %d" % i, "Text.") for i in range(7)])
    store.create_article("alpha", "Password draft", "Draft.", published=False)
    beta = store.create_article("beta", "Passkeys", "Text.")
    store.create_article("hidden", "Password secret", "Text.")
    granted = {"alpha", "beta", "missing"}
    seen, after = [], None
    while True:
        page, after = store.list_published(granted=granted, after=after, limit=3)
        seen += [(e["knowledge_base_id"], e["article_id"]) for e in page]
        if after is None:
            break
    assert seen == [("alpha", i) for i in ids] + [("beta", beta)]
    assert store.complete_knowledge_bases("", granted=granted) == (["alpha", "beta"], 2)
    assert store.complete_articles("alpha", "pass", granted=granted) == (ids, False)
    assert store.complete_articles("beta", "pass", granted=granted) == ([beta], False)
    assert store.complete_articles("hidden", "pass", granted=granted) == ([], False)


def test_which_events_notify_which_uris():
    """A current-version URI hears every event of its article; a version's URI only what
    changes whether it can be read; the list only what adds or takes an article away."""
    from kbcite.server.subscriptions import changes
    current, pinned = uri("art-1"), uri("art-1", "2026-01-01T00:00:00Z")
    other = uri("art-2")
    uris = {u: parse_uri(u) for u in (current, pinned, other)}

    def event(kind, article="art-1"):
        return {"type": "article." + kind, "article_id": article}
    assert changes([event("updated")], uris, True) == ([current], False)
    assert changes([event("updated")] * 3, uris, True) == ([current], False)  # coalesced
    for kind in ("published", "unpublished", "deleted"):
        assert changes([event(kind)], uris, True) == ([current, pinned], True)
        assert changes([event(kind)], uris, False) == ([current, pinned], False)
    assert changes([event("updated", "art-3")], uris, True) == ([], False)
    # A proposal's events (writes mode review) reach the pinned URI of the version it was made
    # from, whose subscriber proposed, never the current one nor the list.
    for kind in ("created", "approved", "rejected", "expired"):
        proposal = {"type": "proposal." + kind, "article_id": "art-1"}
        assert changes([proposal], uris, True) == ([pinned], False)


def test_a_pinned_subscriber_hears_its_proposal_decided(start, db):
    """Under --writes review the agent subscribes to the version it proposed from, and is told
    when a person decides."""
    client = start(db.path, writes="review")
    client.initialize()
    read = structured(client.tool("read_knowledge_article", knowledge_base_id=KB,
                                  article_id=db.password))
    pinned = uri(db.password, read["updated_at"])
    assert client.call("resources/subscribe", {"uri": pinned})["result"] == {}
    proposed = structured(client.tool("edit_knowledge_article", knowledge_base_id=KB,
                                      article_id=db.password, content="Proposed.",
                                      expected_version=read["updated_at"],
                                      idempotency_key="p1"))
    assert proposed["status"] == "proposed"
    message, _ = recv_until(client, "notifications/resources/updated")  # proposal.created
    assert message["params"] == {"uri": pinned}
    with kbcite.KBStore(str(db.path)) as store:
        store.proposals.reject(KB, proposed["proposal_id"], approver="bob", reason="no")
    message, elapsed = recv_until(client, "notifications/resources/updated")
    assert message["params"] == {"uri": pinned} and elapsed < 1.0, elapsed


def test_a_subscriber_holds_at_most_its_limit_of_uris():
    from kbcite.server.subscriptions import Subscriber, TooMany
    subscriber = Subscriber(None, lambda message: True, limit=2)
    subscriber.add(uri("a"))
    subscriber.add(uri("b"))
    subscriber.add(uri("a"))  # again: still two
    with pytest.raises(TooMany, match="unsubscribe some first"):
        subscriber.add(uri("c"))
    subscriber.remove(uri("a"))
    subscriber.add(uri("c"))
    assert sorted(subscriber.uris(None)) == [uri("b"), uri("c")]
