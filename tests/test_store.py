"""kbcite.KBStore and its four tools: schema, behaviour, bad inputs, grants, versions, events."""

import json
import re
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import kbcite
from kbcite import TOOLS, KBStore, ToolError
from kbcite import edits, limits, tools
from kbcite.engines import sqlite as sqlite_engine
from kbcite.search.text import query_terms
from kbcite.search.tiers import TIERED_TERMS_MAX
from kbcite.tools import EDIT_UNCHANGED, SEARCH_LEXICAL

KB = "kb-main"
GRANTED = frozenset({KB})
TOOL_NAMES = [tool["name"] for tool in TOOLS]
OURS = {tool["name"]: tool for tool in TOOLS}
LIVE = json.loads(
    (Path(__file__).parent / "data" / "tools-list.json").read_text(encoding="utf-8")
)
VERSION_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z\Z", re.ASCII)
MIB = 1024 * 1024


# -- helpers ------------------------------------------------------------------------------------


def call(store, name, granted=GRANTED, **arguments):
    return store.call_tool(name, arguments, granted=granted)


def search(store, query, kb=KB, granted=GRANTED, **extra):
    return call(store, "search_knowledge_base", granted, knowledge_base_id=kb, query=query,
                **extra)


def read(store, article_id, kb=KB, granted=GRANTED):
    return call(store, "read_knowledge_article", granted, knowledge_base_id=kb,
                article_id=article_id)


def edit(store, article_id, content, version, key, kb=KB, granted=GRANTED, **extra):
    return call(store, "edit_knowledge_article", granted, knowledge_base_id=kb,
                article_id=article_id, content=content, expected_version=version,
                idempotency_key=key, **extra)


def poll(store, kb=KB, granted=GRANTED, **extra):
    return call(store, "poll_resource_events", granted, resource_type="knowledge_base",
                resource_id=kb, **extra)


def all_events(store, kb=KB):
    """The whole event log of ``kb``, paged through the tool."""
    events, after = [], 0
    while True:
        page = poll(store, kb, frozenset({kb}), after_sequence=after)
        assert page["events"] or not page["has_more"], "has_more with an empty page"
        events.extend(page["events"])
        after = page["next_after_sequence"]
        if not page["has_more"]:
            return events


def error_of(store, name, arguments, granted=GRANTED):
    with pytest.raises(ToolError) as info:
        store.call_tool(name, arguments, granted=granted)
    return info.value


def dump(path):
    """Every table of the database file, as SQL text, read through a separate connection."""
    conn = sqlite3.connect(path)
    try:
        return sqlite_engine.dump(conn)
    finally:
        conn.close()


def as_datetime(version):
    """Parse a canonical version independently of the store."""
    assert VERSION_RE.match(version), version
    return datetime.strptime(version, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def conforms(schema, value, where="$"):
    """Assert ``value`` fits one of our output schemas (the keywords those schemas use)."""
    kind = schema.get("type")
    if isinstance(kind, list):  # ["object", "null"]: null, or the other type
        if value is None:
            assert "null" in kind, where
            return
        kind = [k for k in kind if k != "null"][0]
    if kind == "object":
        assert isinstance(value, dict), where
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            assert name in value, "%s.%s missing" % (where, name)
        if schema.get("additionalProperties") is False:
            assert set(value) <= set(properties), "%s has extra %s" % (
                where, set(value) - set(properties))
        for name, item in value.items():
            if name in properties:
                conforms(properties[name], item, "%s.%s" % (where, name))
    elif kind == "array":
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            conforms(schema["items"], item, "%s[%d]" % (where, i))
    elif kind == "string":
        assert isinstance(value, str), where
        if schema.get("format") == "date-time":
            assert VERSION_RE.match(value), "%s: %r" % (where, value)
    elif kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), where
        assert value >= schema.get("minimum", value), where
    elif kind == "boolean":
        assert isinstance(value, bool), where
    if "enum" in schema:
        assert value in schema["enum"], where



# -- the tool list ------------------------------------------------------------------------------


# Our tools beyond the live list's four, which come first and in its order.
OUR_TOOLS = ["check_citations"]


def test_tool_names_and_order_match_the_live_list():
    assert TOOL_NAMES == [tool["name"] for tool in LIVE] + OUR_TOOLS


@pytest.mark.parametrize("live", LIVE, ids=[tool["name"] for tool in LIVE])
def test_tool_matches_the_live_list(live):
    ours = OURS[live["name"]]
    if live["name"] == "search_knowledge_base":
        # The live description, then the sentence that says which ranking is on.
        assert ours["description"] == live["description"] + " " + SEARCH_LEXICAL
    elif live["name"] == "edit_knowledge_article":
        # The live description, then the sentence that says an unchanged edit writes nothing.
        assert ours["description"] == live["description"] + " " + EDIT_UNCHANGED
    else:
        assert ours["description"] == live["description"]
    assert ours["inputSchema"]["required"] == live["inputSchema"]["required"]
    for prop, rule in live["inputSchema"].get("properties", {}).items():
        for key, value in rule.items():
            got = ours["inputSchema"]["properties"][prop][key]
            assert (type(got), got) == (type(value), value), (prop, key)
    assert ours["annotations"] == live["annotations"]
    assert ours["inputSchema"]["type"] == "object"
    assert ours["inputSchema"]["additionalProperties"] is False


# The types SPEC.md gives the properties the trimmed live list leaves out.
SPEC_TYPES = {
    "search_knowledge_base": {"knowledge_base_id": "string", "query": "string",
                              "limit": "integer"},
    "read_knowledge_article": {"knowledge_base_id": "string", "article_id": "string",
                               "version": "string"},
    "edit_knowledge_article": {"knowledge_base_id": "string", "article_id": "string",
                               "content": "string", "title": "string",
                               "expected_version": "string", "idempotency_key": "string",
                               "summary": "string"},
    "poll_resource_events": {"resource_type": "string", "resource_id": "string",
                             "after_sequence": "integer", "limit": "integer"},
    "check_citations": {"knowledge_base_id": "string", "citations": "array"},
}


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_properties_are_typed_as_the_spec_says(name):
    properties = OURS[name]["inputSchema"]["properties"]
    assert {prop: rule["type"] for prop, rule in properties.items()} == SPEC_TYPES[name]
    assert set(OURS[name]["inputSchema"]["required"]) <= set(properties)


def test_version_and_resource_type_schemas():
    edit_props = OURS["edit_knowledge_article"]["inputSchema"]["properties"]
    assert edit_props["expected_version"]["format"] == "date-time"
    assert edit_props["idempotency_key"]["maxLength"] == 255
    assert edit_props["title"]["maxLength"] == 200
    poll_props = OURS["poll_resource_events"]["inputSchema"]["properties"]
    assert poll_props["resource_type"]["enum"] == [
        "channel", "note", "knowledge_base", "record", "session"]


def test_tool_list_is_plain_json():
    assert json.loads(json.dumps(TOOLS)) == TOOLS
    for tool in TOOLS:
        assert set(tool) <= {"name", "description", "inputSchema", "outputSchema", "annotations"}


def test_unknown_tool_and_bad_granted(kb):
    err = error_of(kb, "delete_knowledge_base", {"knowledge_base_id": KB})
    assert err.code == "invalid_argument" and "delete_knowledge_base" in err.message
    with pytest.raises(TypeError):
        kb.call_tool("search_knowledge_base", {"knowledge_base_id": KB, "query": "ab"},
                     granted=KB)


# -- search -------------------------------------------------------------------------------------


def test_search_hit_has_snippet_version_and_citation(kb):
    target = kb.create_article(KB, "Resetting your password",
                               "Open the settings page and choose reset password.")
    kb.create_article(KB, "Billing", "Invoices are sent every month.")
    result = search(kb, "password")
    conforms(OURS["search_knowledge_base"]["outputSchema"], result)
    assert result["knowledge_base_id"] == KB
    assert result["query"] == "password"
    assert result["head_sequence"] == 2
    [hit] = result["results"]
    current = read(kb, target)
    assert hit["article_id"] == target
    assert hit["title"] == "Resetting your password"
    assert "**password**" in hit["snippet"]
    assert hit["updated_at"] == current["updated_at"]
    assert hit["citation"] == current["citation"] == {
        "knowledge_base_id": KB, "article_id": target, "updated_at": current["updated_at"]}


def test_search_follows_saves_unpublish_and_publish(kb, clock):
    aid = kb.create_article(KB, "Shipping", "We ship with parcel carriers.")
    assert [h["article_id"] for h in search(kb, "parcel")["results"]] == [aid]
    clock.advance(seconds=1)
    version = kb.save_article(KB, aid, content="We ship by freight.")
    assert search(kb, "parcel")["results"] == []
    [hit] = search(kb, "freight")["results"]
    assert hit["updated_at"] == version
    kb.unpublish(KB, aid)
    assert search(kb, "freight")["results"] == []
    assert search(kb, "shipping")["results"] == []
    version = kb.publish(KB, aid)
    assert [h["updated_at"] for h in search(kb, "freight")["results"]] == [version]
    assert kb.audit() == []


@pytest.fixture
def searchable(kb):
    """A knowledge base of varied articles for the robustness table; returns titles by ID."""
    titles = [
        ("Resetting your password", "Open settings and choose reset password. Do not share it."),
        ("Billing and invoices", "Invoices are monthly; refunds take five days."),
        ("हिंदी में खोज", "यह लेख ज्ञान आधार के बारे में है"),
        ("知识库 搜索", "这是 知识库 的文章"),
        ("Emoji 🎉 party", "celebrate 🎉 with cake"),
    ]
    ids = {kb.create_article(KB, title, body): title for title, body in titles}
    kb.create_article(KB, "Hidden draft", "password near and not or", published=False)
    return ids


ANY = "any list of published hits"

# (query, titles that must be among the hits, None for "must be empty", or ANY)
ROBUST_QUERIES = [
    ('"password', ["Resetting your password"]),
    ('password"', ["Resetting your password"]),
    ('"reset password"', ["Resetting your password"]),
    ("password AND invoices", ["Resetting your password", "Billing and invoices"]),
    ("password OR", ["Resetting your password"]),
    ("NOT", ["Resetting your password"]),  # the word "not", searched as text
    ("AND OR NEAR", ANY),  # whether "and" counts as a word is the ranking's business
    ("AND OR NOT NEAR", ANY),
    ("NEAR/2 AND NOT", ANY),
    ("NEAR(password invoices)", ["Billing and invoices"]),  # "near password" is no phrase here
    ("NEAR(password invoices, 2)", ["Billing and invoices"]),
    ("pass* ^reset :invoices (refunds) -monthly", ["Resetting your password",
                                                     "Billing and invoices"]),
    ("title:password", ["Resetting your password"]),  # the words, never a column filter
    ("{title}: password", ["Resetting your password"]),
    ("* ^ : ( ) -", None),
    ('""', None),
    ('" "', None),
    ("''", None),
    ("--", None),
    ("**", None),
    ("\t\n", None),
    ("...!!!", None),
    ("'; DROP TABLE articles; --", None),
    ("zzyzx unheard", None),
    ("खोज", ["हिंदी में खोज"]),
    ("ज्ञान आधार", ["हिंदी में खोज"]),
    ("知识库", ["知识库 搜索"]),
    ("中文", None),
    ("🎉🎉", None),
    ("🎉 party", ["Emoji 🎉 party"]),
    ("x" * 200, None),
    ("password " + "(" * 190, ["Resetting your password"]),
]


@pytest.mark.parametrize("query,expected", ROBUST_QUERIES,
                         ids=["q%02d" % i for i in range(len(ROBUST_QUERIES))])
def test_search_never_fails_on_odd_queries(kb, searchable, query, expected):
    result = search(kb, query)
    conforms(OURS["search_knowledge_base"]["outputSchema"], result)
    titles = [hit["title"] for hit in result["results"]]
    assert set(titles) <= set(searchable.values())  # never the draft
    if expected is None:
        assert titles == []
    elif expected is not ANY:
        assert set(expected) <= set(titles)
    # the tables survived whatever the query held
    assert [h["title"] for h in search(kb, "password")["results"]] == ["Resetting your password"]


def test_title_match_ranks_above_body_match(kb):
    # The body match is the shorter article and the older ID: only the title's weight
    # can put the title match first.
    body_only = kb.create_article(KB, "Account", "Refunds explained briefly.")
    in_title = kb.create_article(KB, "Refunds", (
        "General notes about accounts, invoices, payments, statements, balances, credits, "
        "taxes and the usual paperwork that comes with them every single month."))
    hits = [h["article_id"] for h in search(kb, "refunds")["results"]]
    assert hits == [in_title, body_only]


def test_ties_are_broken_by_article_id(kb, clock):
    ids = [kb.create_article(KB, "Same title", "identical body text") for _ in range(12)]
    # Re-save in reverse so the index no longer holds them in creation order.
    for aid in reversed(ids):
        clock.advance(seconds=1)
        kb.save_article(KB, aid, content="identical body text")
    hits = [h["article_id"] for h in search(kb, "identical", limit=20)["results"]]
    assert hits == sorted(ids)


def test_limit_defaults_to_ten_and_tops_out_at_twenty(kb):
    ids = [kb.create_article(KB, "Widget %d" % i, "widget manual") for i in range(25)]
    assert len(search(kb, "widget")["results"]) == 10
    assert len(search(kb, "widget", limit=1)["results"]) == 1
    twenty = search(kb, "widget", limit=20)["results"]
    assert len(twenty) == 20 and set(h["article_id"] for h in twenty) <= set(ids)
    assert error_of(kb, "search_knowledge_base",
                    {"knowledge_base_id": KB, "query": "widget", "limit": 21}).code == (
        "invalid_argument")
    assert len(search(kb, "widget", limit=20.0)["results"]) == 20  # JSON's 20.0 is 20


def _ranking_kb(store, kb_id, drafts, leaky):
    """Published: two "alpha" docs, one "beta" doc, seven fillers; plus "beta"-heavy extras.

    With only the published docs, "beta" is rarer than "alpha", so its article ranks first.
    If the three beta-heavy extras were indexed, "beta" would become the commoner word and
    the order would flip: ``leaky`` publishes them to prove that.
    """
    store.create_knowledge_base(kb_id)
    beta_heavy = " ".join(["beta"] * 40)
    if drafts:
        store.create_article(kb_id, "Extra beta one", beta_heavy, published=leaky)
        # Once published then withdrawn: the index must forget it completely.
        withdrawn = store.create_article(kb_id, "Extra beta two", beta_heavy)
        if not leaky:
            store.unpublish(kb_id, withdrawn)
    store.create_article(kb_id, "Guide one", "alpha filler filler")
    store.create_article(kb_id, "Guide two", "beta filler filler")
    store.create_article(kb_id, "Guide three", "alpha filler filler")
    for i in range(7):
        store.create_article(kb_id, "Filler %d" % i, "gamma filler filler")
    if drafts:
        store.create_article(kb_id, "Extra beta three", beta_heavy, published=leaky)
        draft = store.create_article(kb_id, "Extra beta four", "short", published=False)
        store.save_article(kb_id, draft, content=beta_heavy)  # a draft save: still hidden


def _guide_order(store, kb_id):
    hits = search(store, "alpha beta", kb_id, frozenset({kb_id}), limit=20)["results"]
    return [h["title"] for h in hits if h["title"].startswith("Guide")], hits


def test_drafts_do_not_change_ranking(store):
    _ranking_kb(store, "plain", drafts=False, leaky=False)
    _ranking_kb(store, "with-drafts", drafts=True, leaky=False)
    _ranking_kb(store, "leaky", drafts=True, leaky=True)
    plain, plain_hits = _guide_order(store, "plain")
    with_drafts, draft_hits = _guide_order(store, "with-drafts")
    leaky, _ = _guide_order(store, "leaky")
    assert plain == ["Guide two", "Guide one", "Guide three"]
    assert with_drafts == plain
    assert [h["title"] for h in draft_hits] == [h["title"] for h in plain_hits]
    assert [h["snippet"] for h in draft_hits] == [h["snippet"] for h in plain_hits]
    # The control: had the drafts been indexed, the order would differ.
    assert leaky != plain
    assert store.audit() == []


# -- read ---------------------------------------------------------------------------------------


def test_read_returns_article_and_citation(kb):
    content = "Line one\nLine two with हिंदी, 中文 and 🎉\n"
    aid = kb.create_article(KB, "Unicode guide", content)
    result = read(kb, aid)
    conforms(OURS["read_knowledge_article"]["outputSchema"], result)
    assert result["knowledge_base_id"] == KB
    assert result["article_id"] == aid
    assert result["title"] == "Unicode guide"
    assert result["content"] == content
    assert result["updated_at"] == kb.get_article(KB, aid)["updated_at"]
    assert result["citation"] == {"knowledge_base_id": KB, "article_id": aid,
                                  "updated_at": result["updated_at"]}
    assert result["head_sequence"] == 1


def _twin_stores(clock):
    """Store X holds a draft (art-000002) and an unpublished article (art-000003); Y never did."""
    x = KBStore(":memory:", clock=clock)
    y = KBStore(":memory:", clock=clock)
    for s in (x, y):
        s.create_knowledge_base(KB)
        s.create_article(KB, "Public", "public words")
    x.create_article(KB, "Draft", "draft words", published=False)
    gone = x.create_article(KB, "Withdrawn", "withdrawn words")
    x.unpublish(KB, gone)
    return x, y


@pytest.mark.parametrize("article_id", ["art-000002", "art-000003", "art-000004"])
def test_read_hides_drafts_and_unpublished_like_missing(clock, article_id):
    x, y = _twin_stores(clock)
    with x, y:
        hidden = error_of(x, "read_knowledge_article",
                          {"knowledge_base_id": KB, "article_id": article_id})
        missing = error_of(y, "read_knowledge_article",
                           {"knowledge_base_id": KB, "article_id": article_id})
        assert hidden.code == "not_found"
        assert (type(hidden), hidden.to_dict(), str(hidden)) == (
            type(missing), missing.to_dict(), str(missing))


@pytest.mark.parametrize("article_id", ["art-000002", "art-000003"])
def test_edit_hides_drafts_and_unpublished_like_missing(clock, article_id):
    x, y = _twin_stores(clock)
    with x, y:
        true_version = x.get_article(KB, article_id)["updated_at"]
        for version in (true_version, "2020-01-01T00:00:00.000000Z"):
            arguments = {"knowledge_base_id": KB, "article_id": article_id,
                         "content": "agent text", "expected_version": version,
                         "idempotency_key": "k-" + version}
            before = x._db.dump()
            hidden = error_of(x, "edit_knowledge_article", arguments)
            missing = error_of(y, "edit_knowledge_article", arguments)
            assert hidden.code == "not_found"
            assert (hidden.to_dict(), str(hidden)) == (missing.to_dict(), str(missing))
            assert true_version not in str(hidden.to_dict())
            assert x._db.dump() == before


def test_drafts_leave_no_trace_in_search_or_events(kb, clock):
    kb.create_article(KB, "Public", "public words")
    draft = kb.create_article(KB, "Confidential merger", "confidential merger words",
                              published=False)
    clock.advance(seconds=1)
    kb.save_article(KB, draft, content="more confidential merger words", title="Merger v2")
    for query in ("confidential", "merger", "Merger v2", "words"):
        for hit in search(kb, query)["results"]:
            assert hit["article_id"] != draft
            assert "onfidential" not in hit["snippet"] and "erger" not in hit["title"]
    assert [e["article_id"] for e in all_events(kb)] == ["art-000001"]
    assert poll(kb)["head_sequence"] == 1


# -- edit ---------------------------------------------------------------------------------------


def test_edit_replaces_content_and_logs_one_event(kb, clock):
    aid = kb.create_article(KB, "Returns", "Returns within 30 days.")
    kb.create_article(KB, "Other", "other")
    before = read(kb, aid)
    clock.advance(seconds=5)
    result = edit(kb, aid, "Returns within 60 days.", before["updated_at"], "key-1")
    conforms(OURS["edit_knowledge_article"]["outputSchema"], result)
    assert result["replayed"] is False
    assert result["previous_version"] == before["updated_at"]
    assert as_datetime(result["updated_at"]) == clock.now
    assert result["title"] == "Returns"
    assert result["citation"] == {"knowledge_base_id": KB, "article_id": aid,
                                  "updated_at": result["updated_at"]}
    assert result["event"] == {"sequence": 3, "type": "article.updated", "article_id": aid,
                               "updated_at": result["updated_at"]}
    after = read(kb, aid)
    assert (after["content"], after["title"], after["updated_at"]) == (
        "Returns within 60 days.", "Returns", result["updated_at"])
    assert all_events(kb)[-1] == result["event"]
    assert poll(kb)["head_sequence"] == 3


def test_edit_with_title_retitles(kb, clock):
    aid = kb.create_article(KB, "Old name", "body")
    version = read(kb, aid)["updated_at"]
    result = edit(kb, aid, "new body", version, "key-t", title="Fresh name")
    assert result["title"] == "Fresh name" == read(kb, aid)["title"]
    assert [h["article_id"] for h in search(kb, "fresh")["results"]] == [aid]
    assert search(kb, "old")["results"] == []


def test_edit_accepts_content_up_to_one_mebibyte(kb):
    aid = kb.create_article(KB, "Big", "small")
    version = read(kb, aid)["updated_at"]
    content = "😀" * (MIB // 4)  # 262,144 characters, exactly 1 MiB of UTF-8
    result = edit(kb, aid, content, version, "big")
    assert read(kb, aid)["content"] == content
    err = error_of(kb, "edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": aid, "content": content + "a",
        "expected_version": result["updated_at"], "idempotency_key": "bigger"})
    assert err.code == "invalid_argument" and "content" in err.message


def test_stale_version_is_a_conflict_that_says_how_to_recover(kb, clock):
    aid = kb.create_article(KB, "Policy", "v1")
    stale = read(kb, aid)["updated_at"]
    clock.advance(minutes=1)
    current = kb.save_article(KB, aid, content="v2 by a person")
    head = poll(kb)["head_sequence"]
    err = error_of(kb, "edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": aid, "content": "v1 plus agent",
        "expected_version": stale, "idempotency_key": "k1"})
    assert err.code == "version_conflict"
    assert err.details["current_version"] == current
    message = err.message.lower()
    assert "re-read" in message and "re-apply" in message and "retry" in message
    assert current in err.message
    assert read(kb, aid)["content"] == "v2 by a person"
    assert poll(kb)["head_sequence"] == head
    # Following the advice works.
    fresh = read(kb, aid)
    result = edit(kb, aid, fresh["content"] + " plus agent", fresh["updated_at"], "k2")
    assert read(kb, aid)["content"] == "v2 by a person plus agent"
    assert result["previous_version"] == current


def test_the_write_itself_is_guarded_by_the_version(kb, monkeypatch):
    """The compare-and-swap is the UPDATE's WHERE clause and row count, not only the check."""
    aid = kb.create_article(KB, "Guarded", "v1")
    version = read(kb, aid)["updated_at"]
    head = poll(kb)["head_sequence"]
    checks = edits.checks

    def checked_then_overtaken(*args, **kwargs):
        result = checks(*args, **kwargs)
        # Another writer's change lands between the check and the write.
        kb._db.execute("UPDATE articles SET version_us = version_us + 7 WHERE article_id = ?",
                         (aid,))
        return result

    monkeypatch.setattr(edits, "checks", checked_then_overtaken)
    err = error_of(kb, "edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": aid, "content": "v2", "expected_version": version,
        "idempotency_key": "guarded"})
    assert err.code == "version_conflict"
    monkeypatch.undo()
    assert read(kb, aid)["content"] == "v1"
    assert poll(kb)["head_sequence"] == head
    assert kb._db.value("SELECT count(*) FROM idempotency") == 0


# -- versions -----------------------------------------------------------------------------------


def test_versions_strictly_increase_with_a_frozen_clock(kb, clock):
    aid = kb.create_article(KB, "Frozen", "c0")
    versions = [read(kb, aid)["updated_at"]]
    for i in range(3):
        versions.append(kb.save_article(KB, aid, content="c%d" % (i + 1)))
    for i in range(2):
        versions.append(edit(kb, aid, "e%d" % i, versions[-1], "fk%d" % i)["updated_at"])
    versions.append(kb.unpublish(KB, aid))
    versions.append(kb.save_article(KB, aid, content="draft save"))
    versions.append(kb.publish(KB, aid))
    stamps = [as_datetime(v) for v in versions]
    assert stamps[0] == clock.now
    step = timedelta(microseconds=1)
    assert stamps == [clock.now + i * step for i in range(len(stamps))]
    # Another article created in the same tick takes the clock's time: versions are per article.
    other = kb.create_article(KB, "Other", "x")
    assert as_datetime(read(kb, other)["updated_at"]) == clock.now


def test_versions_strictly_increase_when_the_clock_steps_back(kb, clock):
    aid = kb.create_article(KB, "Backwards", "c0")
    first = as_datetime(read(kb, aid)["updated_at"])
    clock.advance(hours=-1)
    second = as_datetime(kb.save_article(KB, aid, content="c1"))
    clock.advance(days=-3)
    third = as_datetime(edit(kb, aid, "c2", read(kb, aid)["updated_at"], "bk")["updated_at"])
    clock.advance(seconds=-30)
    fourth = as_datetime(kb.unpublish(KB, aid))
    step = timedelta(microseconds=1)
    assert [second, third, fourth] == [first + step, first + 2 * step, first + 3 * step]
    clock.set(first + timedelta(hours=2))
    assert as_datetime(kb.publish(KB, aid)) == clock.now  # a clock ahead again is used as is
    events = all_events(kb)
    assert [e["updated_at"] for e in events] == sorted(e["updated_at"] for e in events)


def test_a_save_in_the_same_tick_still_rejects_the_stale_edit(kb, clock):
    # With a weak (plain timestamp) validator, this stale edit would be let through.
    aid = kb.create_article(KB, "Same tick", "v1")
    cited = read(kb, aid)["updated_at"]
    kb.save_article(KB, aid, content="v2")  # the clock has not moved
    err = error_of(kb, "edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": aid, "content": "v1 + agent",
        "expected_version": cited, "idempotency_key": "tick"})
    assert err.code == "version_conflict"
    assert read(kb, aid)["content"] == "v2"


def test_versions_are_utc_with_microseconds_and_z():
    ist = timezone(timedelta(hours=5, minutes=30))
    with KBStore(":memory:", clock=lambda: datetime(2026, 11, 8, 14, 30, 0, 7, tzinfo=ist)) as s:
        s.create_knowledge_base(KB)
        aid = s.create_article(KB, "Zoned", "x")
        assert read(s, aid)["updated_at"] == "2026-11-08T09:00:00.000007Z"
    with KBStore(":memory:", clock=lambda: datetime(2026, 11, 8, 9, 0)) as s:
        s.create_knowledge_base(KB)
        with pytest.raises(ValueError):
            s.create_article(KB, "Naive clock", "x")


@pytest.fixture
def versioned(kb, clock):
    """An article whose version is 2026-11-08T09:00:00.120000Z; returns (store, ID)."""
    clock.advance(milliseconds=120)
    aid = kb.create_article(KB, "Versioned", "text")
    assert read(kb, aid)["updated_at"] == "2026-11-08T09:00:00.120000Z"
    return kb, aid


RESPELLINGS = [
    "2026-11-08T09:00:00.12Z",
    "2026-11-08T09:00:00.120Z",
    "2026-11-08T09:00:00.120000000000Z",
    "2026-11-08T09:00:00.120000+00:00",
    "2026-11-08T09:00:00.120000-00:00",
    "2026-11-08T14:30:00.12+05:30",
    "2026-11-08T04:00:00.12-05:00",
    "2026-11-09T00:00:00.12+15:00",
    "2026-11-08t09:00:00.120000z",
]


@pytest.mark.parametrize("spelling", RESPELLINGS)
def test_any_spelling_of_the_same_instant_matches(versioned, spelling):
    store, aid = versioned
    result = edit(store, aid, "edited", spelling, "respelled")
    assert result["previous_version"] == "2026-11-08T09:00:00.120000Z"
    assert read(store, aid)["content"] == "edited"


@pytest.mark.parametrize("spelling", ["2026-11-08T09:00:00Z", "2026-11-08T09:00:00+00:00",
                                      "2026-11-08T10:00:00+01:00", "2026-11-08t09:00:00z"])
def test_a_version_without_fraction_matches_a_whole_second(kb, spelling):
    aid = kb.create_article(KB, "Whole second", "text")
    assert read(kb, aid)["updated_at"] == "2026-11-08T09:00:00.000000Z"
    assert edit(kb, aid, "edited", spelling, "whole")["replayed"] is False


@pytest.mark.parametrize("spelling", [
    "2026-11-08T09:00:00.1200001Z",  # nonzero past the microsecond: no version can equal it
    "2026-11-08T09:00:00.120000000001Z",
    "2026-11-08T09:00:00.120001Z",
    "2026-11-08T09:00:00.119999Z",
    "2026-11-08T09:00:00.12+00:01",
    "2026-11-08T09:00:00Z",
])
def test_a_different_instant_is_a_conflict(versioned, spelling):
    store, aid = versioned
    err = error_of(store, "edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": aid, "content": "edited",
        "expected_version": spelling, "idempotency_key": "other-instant"})
    assert err.code == "version_conflict"
    assert err.details["current_version"] == "2026-11-08T09:00:00.120000Z"
    assert read(store, aid)["content"] == "text"


MALFORMED_VERSIONS = [
    "yesterday",
    "2026-11-08",
    "2026-11-08T09:00:00",
    "2026-11-08T09:00Z",
    "20261108T090000Z",
    "2026-11-08T09:00:00.Z",
    "2026-11-08T09:00:00,12Z",
    "2026-11-08T09:00:00+0530",
    "2026-11-08T09:00:00+5:30",
    "2026-11-08T09:00:00 Z",
    " 2026-11-08T09:00:00Z",
    "2026-11-08T09:00:00Z ",
    "2026-11-08T09:00:00Z\n",
    "٢٠٢٦-١١-٠٨T09:00:00Z",
    "2026-11-08T09:00:00.１２Z",
    "2026-13-01T00:00:00Z",
    "2026-02-30T00:00:00Z",
    "2026-11-08T24:00:00Z",
    "2026-11-08T09:60:00Z",
    "2026-11-08T09:00:00+24:00",
    "2026-11-08T09:00:00+05:60",
    "0000-01-01T00:00:00Z",
    "+2026-11-08T09:00:00Z",
    "9999-12-31T23:59:59-01:00",  # past year 9999 in UTC
    "0001-01-01T00:00:00+01:00",  # before year 1 in UTC
    "2026-11-08T09:00:00." + "0" * 44 + "Z",  # 65 characters, one past the limit
]


# -- bad inputs: every argument of every tool ---------------------------------------------------

MISSING = object()
STRING_BAD = [None, 42, True, 1.5, ["ab"], {"a": "b"}, "ab\x00cd", "ab\ud800cd"]
ID_BAD = STRING_BAD + ["", "x" * 256]
INT_BAD = [True, False, None, "5", 1.5, float("nan"), float("inf"), [1], {"n": 1}]


def _cases():
    cases = []

    def add(tool, argument, values):
        for value in values:
            if value is MISSING:
                label = "missing"
            elif isinstance(value, str) and len(value) > 20:
                label = "%s*%d" % (value[:1], len(value))
            else:
                label = repr(value)
            cases.append(pytest.param(tool, argument, value,
                                      id="%s-%s-%s" % (tool.split("_")[0], argument, label)))

    add("search_knowledge_base", "knowledge_base_id", ID_BAD + [MISSING])
    add("search_knowledge_base", "query", STRING_BAD + ["", "a", "x" * 201, MISSING])
    add("search_knowledge_base", "limit", INT_BAD + [0, -1, 21, 10 ** 30, 0.0])
    add("search_knowledge_base", "bogus", [1, "x"])
    add("search_knowledge_base", "Query", ["password"])
    add("read_knowledge_article", "knowledge_base_id", ID_BAD + [MISSING])
    add("read_knowledge_article", "article_id", ID_BAD + [MISSING])
    add("read_knowledge_article", "version", STRING_BAD + [""] + MALFORMED_VERSIONS)
    add("read_knowledge_article", "versions", ["2026-11-08T09:00:00Z"])
    add("edit_knowledge_article", "knowledge_base_id", ID_BAD + [MISSING])
    add("edit_knowledge_article", "article_id", ID_BAD + [MISSING])
    add("edit_knowledge_article", "content", STRING_BAD + [
        "", MISSING,
        "é" * (MIB // 2 + 1),  # 524,289 characters, 1,048,578 bytes
        "😀" * (MIB // 4) + "a",  # 262,145 characters, 1 MiB + 1 byte
        "中" * (MIB // 3 + 1),
    ])
    add("edit_knowledge_article", "title", STRING_BAD + ["", " ", "\t\n ", "t" * 201])
    add("edit_knowledge_article", "expected_version", STRING_BAD + [""] + MALFORMED_VERSIONS
        + [MISSING])
    add("edit_knowledge_article", "idempotency_key", ID_BAD + [MISSING])
    add("edit_knowledge_article", "published", [True])
    add("edit_knowledge_article", "replayed", [False])
    add("poll_resource_events", "resource_type", STRING_BAD + [
        "", "bogus", "Knowledge_Base", "knowledge-base", "article", MISSING,
        "channel", "note", "record", "session",  # valid types this store keeps no log for
    ])
    add("poll_resource_events", "resource_id", ID_BAD + [MISSING])
    add("poll_resource_events", "after_sequence", INT_BAD + [-1, 2, 10 ** 30])  # head is 1
    add("poll_resource_events", "limit", INT_BAD + [0, -5, 101])
    add("poll_resource_events", "cursor", [0])
    good = {"knowledge_base_id": KB, "article_id": "art-000001",
            "updated_at": "2026-11-08T09:00:00.000000Z"}
    add("check_citations", "knowledge_base_id", ID_BAD + [MISSING])
    add("check_citations", "citations", [
        None, "x", {}, [], [good] * 101, MISSING, ["x"], [{}], [dict(good, extra=1)],
        [dict(good, updated_at="yesterday")], [good, dict(good, article_id=7)],
        [dict(good, knowledge_base_id="")], [{k: v for k, v in good.items() if k != "article_id"}],
    ] + [[dict(good, updated_at=v)] for v in MALFORMED_VERSIONS])
    return cases


@pytest.fixture
def bad_input_store(file_store, db_path):
    """A file store with one published article; returns (store, path, valid arguments by tool)."""
    file_store.create_knowledge_base(KB)
    aid = file_store.create_article(KB, "Password reset", "Choose reset password.")
    version = read(file_store, aid)["updated_at"]
    valid = {
        "search_knowledge_base": {"knowledge_base_id": KB, "query": "password"},
        "read_knowledge_article": {"knowledge_base_id": KB, "article_id": aid},
        "edit_knowledge_article": {"knowledge_base_id": KB, "article_id": aid,
                                   "content": "new content", "expected_version": version,
                                   "idempotency_key": "key-1"},
        "poll_resource_events": {"resource_type": "knowledge_base", "resource_id": KB},
        "check_citations": {"knowledge_base_id": KB, "citations": [
            {"knowledge_base_id": KB, "article_id": aid, "updated_at": version}]},
    }
    return file_store, db_path, valid


def test_the_valid_arguments_of_the_bad_input_table_work(bad_input_store):
    store, _, valid = bad_input_store
    for name, arguments in valid.items():
        conforms(OURS[name]["outputSchema"], store.call_tool(name, arguments, granted=GRANTED))
    assert read(store, "art-000001")["content"] == "new content"


@pytest.mark.parametrize("tool,argument,value", _cases())
def test_bad_input_is_refused_naming_the_argument(bad_input_store, tool, argument, value):
    store, path, valid = bad_input_store
    arguments = dict(valid[tool])
    if value is MISSING:
        del arguments[argument]
    else:
        arguments[argument] = value
    before = dump(path)
    err = error_of(store, tool, arguments)
    assert err.code == "invalid_argument", err.to_dict()
    assert argument in err.message
    # A citation's own field is named by its path: citations[1].article_id.
    named = err.details.get("argument")
    assert named == argument or (tool == "check_citations" and named.startswith(argument + "["))
    json.dumps(err.to_dict())  # the error itself must be JSON-ready
    assert dump(path) == before
    # No transaction was left open: the valid call still goes through.
    store.call_tool(tool, valid[tool], granted=GRANTED)


@pytest.mark.parametrize("tool", TOOL_NAMES)
@pytest.mark.parametrize("arguments", [None, [], "knowledge_base_id", 5])
def test_arguments_must_be_an_object(bad_input_store, tool, arguments):
    store, path, _ = bad_input_store
    before = dump(path)
    err = error_of(store, tool, arguments)
    assert err.code == "invalid_argument" and "arguments" in err.message
    assert dump(path) == before


def test_cursor_beyond_the_head_names_the_head(kb):
    for i in range(3):
        kb.create_article(KB, "A%d" % i, "x")
    err = error_of(kb, "poll_resource_events", {
        "resource_type": "knowledge_base", "resource_id": KB, "after_sequence": 7})
    assert err.code == "invalid_argument"
    assert "after_sequence" in err.message and "3" in err.message
    assert err.details["head_sequence"] == 3


@pytest.mark.parametrize("resource_type", ["channel", "note", "record", "session"])
def test_other_resource_types_say_only_knowledge_bases_have_logs(kb, resource_type):
    err = error_of(kb, "poll_resource_events",
                   {"resource_type": resource_type, "resource_id": KB})
    assert err.code == "invalid_argument"
    assert resource_type in err.message and "knowledge_base" in err.message


# -- grants -------------------------------------------------------------------------------------


def _grant_store(clock, with_secret):
    store = KBStore(":memory:", clock=clock)
    store.create_knowledge_base(KB)
    store.create_article(KB, "Public", "public words")
    if with_secret:
        store.create_knowledge_base("secret")
        aid = store.create_article("secret", "Secret plans", "secret words")
        store.create_article("secret", "Secret draft", "secret draft", published=False)
        v1 = read(store, aid, "secret", {"secret"})["updated_at"]
        edit(store, aid, "secret words v2", v1, "used-key", "secret", {"secret"})
    return store


def _secret_calls(v1, v2):
    return [
        ("search_knowledge_base", {"knowledge_base_id": "secret", "query": "secret"}),
        ("search_knowledge_base", {"knowledge_base_id": "secret", "query": "* ^"}),
        ("read_knowledge_article", {"knowledge_base_id": "secret", "article_id": "art-000001"}),
        ("read_knowledge_article", {"knowledge_base_id": "secret", "article_id": "art-000002"}),
        # the exact call already made under this key: must not come back as a replay
        ("edit_knowledge_article", {"knowledge_base_id": "secret", "article_id": "art-000001",
                                    "content": "secret words v2", "expected_version": v1,
                                    "idempotency_key": "used-key"}),
        ("edit_knowledge_article", {"knowledge_base_id": "secret", "article_id": "art-000001",
                                    "content": "leak", "expected_version": v2,
                                    "idempotency_key": "fresh"}),
        ("edit_knowledge_article", {"knowledge_base_id": "secret", "article_id": "art-000001",
                                    "content": "leak", "expected_version": v1,
                                    "idempotency_key": "stale"}),
        ("poll_resource_events", {"resource_type": "knowledge_base", "resource_id": "secret"}),
        ("poll_resource_events", {"resource_type": "knowledge_base", "resource_id": "secret",
                                  "after_sequence": 1000, "limit": 1}),
    ]


def _secret_versions(store):
    """(first, current) versions of the secret knowledge base's article art-000001."""
    return (all_events(store, "secret")[0]["updated_at"],
            store.get_article("secret", "art-000001")["updated_at"])


@pytest.mark.parametrize("index", range(9))
def test_ungranted_errors_equal_nonexistent_byte_for_byte(clock, index):
    with _grant_store(clock, True) as x, _grant_store(clock, False) as y:
        name, arguments = _secret_calls(*_secret_versions(x))[index]
        expected = error_of(y, name, arguments)
        assert expected.code == "not_found"
        for granted in (GRANTED, frozenset(), frozenset({"other", "secret-2"})):
            hidden = error_of(x, name, arguments, granted)
            assert (type(hidden), hidden.to_dict(), str(hidden), repr(hidden)) == (
                type(expected), expected.to_dict(), str(expected), repr(expected))
        # granted but nonexistent looks the same too
        ghost = error_of(y, name, arguments, GRANTED | {"secret"})
        assert (ghost.to_dict(), str(ghost)) == (expected.to_dict(), str(expected))
        # and granted for real, the call is answered on its own merits, never that error
        try:
            answer = x.call_tool(name, arguments, granted={"secret"})
        except ToolError as exc:
            answer = exc.to_dict()
        assert answer != expected.to_dict()


def test_ungranted_calls_write_nothing(clock):
    with _grant_store(clock, True) as x:
        calls = _secret_calls(*_secret_versions(x))
        before = x._db.dump()
        for name, arguments in calls:
            error_of(x, name, arguments)
        assert x._db.dump() == before
        # granted, the replay really is a replay (so the ungranted refusal above meant something)
        replay = x.call_tool("edit_knowledge_article", calls[4][1], granted={"secret"})
        assert replay["replayed"] is True


# -- idempotency --------------------------------------------------------------------------------


@pytest.fixture
def article(kb, clock):
    """A published article; returns its ID."""
    aid = kb.create_article(KB, "Idempotent", "base")
    clock.advance(seconds=1)
    return aid


def test_replay_returns_the_first_result_and_writes_nothing(kb, clock, article):
    version = read(kb, article)["updated_at"]
    first = edit(kb, article, "base + agent", version, "once")
    clock.advance(minutes=5)
    kb.save_article(KB, article, content="a person rewrote it")  # changed since
    head = poll(kb)["head_sequence"]
    snapshot = kb._db.dump()
    for spelling in (version, as_datetime(version).isoformat()):  # "+00:00" form
        replay = edit(kb, article, "base + agent", spelling, "once")
        assert replay == dict(first, replayed=True)
        assert kb._db.dump() == snapshot
    assert poll(kb)["head_sequence"] == head
    assert read(kb, article)["content"] == "a person rewrote it"


def test_key_reuse_with_another_payload_is_refused(kb, article):
    version = read(kb, article)["updated_at"]
    first = edit(kb, article, "base + agent", version, "once")
    snapshot = kb._db.dump()
    variants = [
        {"content": "something else", "expected_version": first["updated_at"]},
        {"content": "base + agent", "expected_version": first["updated_at"]},
        {"content": "base + agent", "expected_version": version, "title": "Retitled"},
        {"content": "base + agent ", "expected_version": version},
    ]
    for variant in variants:
        arguments = dict({"knowledge_base_id": KB, "article_id": article,
                          "idempotency_key": "once"}, **variant)
        err = error_of(kb, "edit_knowledge_article", arguments)
        assert err.code == "idempotency_key_reused"
        assert "once" in err.message
        assert kb._db.dump() == snapshot
    other = kb.create_article(KB, "Other", "other")
    err = error_of(kb, "edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": other, "content": "base + agent",
        "expected_version": read(kb, other)["updated_at"], "idempotency_key": "once"})
    assert err.code == "idempotency_key_reused"


def test_keys_are_scoped_to_the_knowledge_base(kb, article):
    kb.create_knowledge_base("kb-two")
    both = GRANTED | {"kb-two"}
    other = kb.create_article("kb-two", "Idempotent", "base")
    first = edit(kb, article, "one", read(kb, article)["updated_at"], "shared", granted=both)
    second = edit(kb, other, "two", read(kb, other, "kb-two", both)["updated_at"], "shared",
                  kb="kb-two", granted=both)
    assert first["replayed"] is False and second["replayed"] is False
    assert read(kb, other, "kb-two", both)["content"] == "two"
    assert [e["sequence"] for e in all_events(kb, "kb-two")] == [1, 2]


def test_failed_edits_do_not_consume_the_key(kb, clock, article):
    version = read(kb, article)["updated_at"]
    err = error_of(kb, "edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": "art-000099", "content": "x",
        "expected_version": version, "idempotency_key": "k"})
    assert err.code == "not_found"
    err = error_of(kb, "edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": article, "content": "stale",
        "expected_version": "2020-01-01T00:00:00Z", "idempotency_key": "k"})
    assert err.code == "version_conflict"
    # the same failing call again still fails the same way; it is not "replayed"
    again = error_of(kb, "edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": article, "content": "stale",
        "expected_version": "2020-01-01T00:00:00Z", "idempotency_key": "k"})
    assert again.code == "version_conflict"
    result = edit(kb, article, "finally", version, "k")
    assert result["replayed"] is False
    assert read(kb, article)["content"] == "finally"


def test_keys_live_at_least_a_day_of_store_time(kb, clock, article):
    version = read(kb, article)["updated_at"]
    first = edit(kb, article, "day one", version, "daily")
    edit(kb, article, "day one, again", first["updated_at"], "purge-me")
    clock.advance(hours=23, minutes=59)
    assert edit(kb, article, "day one", version, "daily") == dict(first, replayed=True)
    assert error_of(kb, "edit_knowledge_article", {
        "knowledge_base_id": KB, "article_id": article, "content": "other",
        "expected_version": first["updated_at"], "idempotency_key": "daily"}).code == (
        "idempotency_key_reused")
    clock.advance(minutes=2)  # 24 h 1 min after the edit
    current = read(kb, article)["updated_at"]
    result = edit(kb, article, "day two", current, "daily")
    assert result["replayed"] is False
    assert read(kb, article)["content"] == "day two"
    keys = [r["key"] for r in kb._db.rows("SELECT key FROM idempotency")]
    assert keys == ["daily"]  # "purge-me" expired with it and was deleted, not kept forever


# -- events -------------------------------------------------------------------------------------


def test_event_log_records_every_visible_change_and_nothing_else(kb, clock):
    timeline = []

    def tick():
        clock.advance(seconds=1)

    a = kb.create_article(KB, "A", "a0")
    timeline.append(("article.published", a, read(kb, a)["updated_at"]))
    tick()
    d = kb.create_article(KB, "D", "draft", published=False)
    tick()
    timeline.append(("article.updated", a, kb.save_article(KB, a, content="a1")))
    tick()
    kb.save_article(KB, d, content="draft 2")
    tick()
    timeline.append(("article.published", d, kb.publish(KB, d)))
    tick()
    assert kb.publish(KB, d) == timeline[-1][2]  # already published: no change, no event
    timeline.append(("article.unpublished", a, kb.unpublish(KB, a)))
    tick()
    hidden_version = kb.unpublish(KB, a)  # already hidden: no change, no event
    assert hidden_version == timeline[-1][2]
    kb.save_article(KB, a, title="A while hidden")
    tick()
    timeline.append(("article.published", a, kb.publish(KB, a)))
    tick()
    result = edit(kb, d, "agent", read(kb, d)["updated_at"], "ev")
    timeline.append(("article.updated", d, result["updated_at"]))
    events = all_events(kb)
    assert [(e["type"], e["article_id"], e["updated_at"]) for e in events] == timeline
    assert [e["sequence"] for e in events] == list(range(1, len(timeline) + 1))
    for e in events:
        conforms(tools._EVENT, e)
    assert kb.audit() == []


def test_sequences_are_per_knowledge_base(kb):
    kb.create_knowledge_base("kb-two")
    for i in range(3):
        kb.create_article(KB, "A%d" % i, "x")
        kb.create_article("kb-two", "B%d" % i, "y")
    kb.create_article("kb-two", "B3", "y")
    assert [e["sequence"] for e in all_events(kb)] == [1, 2, 3]
    assert [e["sequence"] for e in all_events(kb, "kb-two")] == [1, 2, 3, 4]
    assert poll(kb)["head_sequence"] == 3
    assert kb.head_sequence("kb-two") == 4


def test_poll_pages_with_limit_and_cursor(kb):
    ids = [kb.create_article(KB, "A%d" % i, "x") for i in range(7)]
    result = poll(kb, limit=3)
    conforms(OURS["poll_resource_events"]["outputSchema"], result)
    assert [e["sequence"] for e in result["events"]] == [1, 2, 3]
    assert (result["next_after_sequence"], result["has_more"], result["head_sequence"]) == (
        3, True, 7)
    assert result["resource_type"] == "knowledge_base" and result["resource_id"] == KB
    result = poll(kb, after_sequence=3, limit=3)
    assert [e["sequence"] for e in result["events"]] == [4, 5, 6]
    assert (result["next_after_sequence"], result["has_more"]) == (6, True)
    result = poll(kb, after_sequence=6, limit=3)
    assert [e["article_id"] for e in result["events"]] == [ids[6]]
    assert (result["next_after_sequence"], result["has_more"]) == (7, False)
    result = poll(kb, after_sequence=7)
    assert (result["events"], result["next_after_sequence"], result["has_more"]) == (
        [], 7, False)
    result = poll(kb, after_sequence=0)
    assert [e["sequence"] for e in result["events"]] == list(range(1, 8))


def test_poll_limit_defaults_to_one_hundred(kb, clock):
    aid = kb.create_article(KB, "Busy", "0")
    for i in range(104):
        kb.save_article(KB, aid, content=str(i + 1))
    result = poll(kb)
    assert len(result["events"]) == 100
    assert (result["next_after_sequence"], result["has_more"], result["head_sequence"]) == (
        100, True, 105)
    assert len(poll(kb, after_sequence=100)["events"]) == 5
    assert len(poll(kb, limit=100)["events"]) == 100


def test_empty_knowledge_base_polls_empty(kb):
    result = poll(kb)
    assert (result["events"], result["next_after_sequence"], result["has_more"],
            result["head_sequence"]) == ([], 0, False, 0)


# -- files --------------------------------------------------------------------------------------


def test_opening_an_existing_file_reuses_it(db_path, clock):
    with KBStore(db_path, clock=clock, create=True) as first:
        first.create_knowledge_base(KB)
        aid = first.create_article(KB, "Kept", "kept content")
        version = read(first, aid)["updated_at"]
    with KBStore(db_path, clock=clock) as second:
        assert read(second, aid)["content"] == "kept content"
        assert all_events(second)[0]["updated_at"] == version
        assert [h["article_id"] for h in search(second, "kept")["results"]] == [aid]
        assert second.create_article(KB, "Next", "x") == "art-000002"
        assert poll(second)["head_sequence"] == 2
        assert second.audit() == []
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_a_mapped_file_read_while_another_connection_grows_it(db_path, clock):
    """A file store's reads map the file (``MMAP_BYTES``); what another connection writes
    meanwhile, the file grown past what was mapped and checkpointed into it, is read and
    searched, and an old version stays readable."""
    with KBStore(db_path, clock=clock, create=True) as writer:
        writer.create_knowledge_base(KB)
        first = writer.create_article(KB, "First", "before the growth")
        reader = KBStore(db_path, clock=clock)
        try:
            mapped = reader._db._conn.execute("PRAGMA mmap_size").fetchone()[0]
            # The build's ceiling may be lower (SQLITE_MAX_MMAP_SIZE); 0 only where it has none.
            assert 0 < mapped <= sqlite_engine.MMAP_BYTES
            assert read(reader, first)["content"] == "before the growth"
            size = Path(db_path).stat().st_size
            made = writer.create_articles(KB, [("Grown %d" % n, "zebra %d " % n + "text " * 400)
                                               for n in range(300)])
            writer._db._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            assert Path(db_path).stat().st_size > 4 * size
            assert read(reader, made[-1])["content"].startswith("zebra 299 ")
            assert [h["article_id"] for h in search(reader, "zebra 299")["results"]][0] == made[-1]
            assert read(reader, first)["content"] == "before the growth"
            assert reader.audit() == []
        finally:
            reader.close()


def test_a_file_with_a_foreign_schema_is_refused(db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('Ada')")
    conn.commit()
    conn.close()
    with pytest.raises(kbcite.NotAStore, match="not a knowledge-base store"):
        KBStore(db_path)
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
        assert tables == ["customers"]
        assert conn.execute("SELECT name FROM customers").fetchall() == [("Ada",)]
    finally:
        conn.close()


def test_a_file_of_another_schema_version_is_refused(db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA application_id = %d" % limits.APPLICATION_ID)
    conn.execute("PRAGMA user_version = %d" % (kbcite.SCHEMA_VERSION + 1))
    conn.close()
    with pytest.raises(kbcite.NotAStore, match="schema %d" % (kbcite.SCHEMA_VERSION + 1)):
        KBStore(db_path)


def test_a_file_that_is_no_database_is_refused(db_path):
    with open(db_path, "wb") as fh:
        fh.write(b"not a database " * 100)
    with pytest.raises(kbcite.NotAStore, match="file is not a database"):
        KBStore(db_path)


def test_the_context_manager_closes(db_path):
    with KBStore(db_path, create=True) as store:
        store.create_knowledge_base(KB)
    with pytest.raises(sqlite3.ProgrammingError):
        store.list_articles(KB)


# -- people's side ------------------------------------------------------------------------------


def test_peoples_side_validates_its_inputs(kb):
    aid = kb.create_article(KB, "Valid", "x")
    with pytest.raises(ToolError) as info:
        kb.create_knowledge_base(KB)
    assert info.value.code == "invalid_argument"
    for bad in ({"title": ""}, {"title": "   "}, {"title": "t" * 201}, {"content": ""},
                {"content": "a\x00b"}, {"content": "é" * (MIB // 2 + 1)}, {}):
        with pytest.raises(ToolError) as info:
            kb.save_article(KB, aid, **bad)
        assert info.value.code == "invalid_argument"
    with pytest.raises(ToolError) as info:
        kb.save_article(KB, "art-000099", content="x")
    assert info.value.code == "not_found"
    assert read(kb, aid)["content"] == "x"
    assert poll(kb)["head_sequence"] == 1


def test_list_and_get_show_drafts_to_people(kb):
    pub = kb.create_article(KB, "Pub", "p")
    draft = kb.create_article(KB, "Draft", "dd", published=False)
    listed = kb.list_articles(KB)
    assert [(a["article_id"], a["published"], a["chars"]) for a in listed] == [
        (pub, 1, 1), (draft, 0, 2)]
    assert kb.get_article(KB, draft)["content"] == "dd"


# -- bulk load ----------------------------------------------------------------------------------


def test_create_articles_adds_all_in_order_with_events(kb):
    ids = kb.create_articles(KB, [("Bulk one", "first body"), ("Bulk two", "second body")])
    assert ids == ["art-000001", "art-000002"]
    events = poll(kb)["events"]
    assert [(e["sequence"], e["type"], e["article_id"]) for e in events] == [
        (1, "article.published", "art-000001"), (2, "article.published", "art-000002")]
    hits = search(kb, "second")["results"]
    assert [h["article_id"] for h in hits] == ["art-000002"]
    assert kb.audit() == []


def test_create_articles_as_drafts_writes_no_event(kb):
    ids = kb.create_articles(KB, [("Draft one", "x"), ("Draft two", "y")], published=False)
    assert poll(kb)["head_sequence"] == 0
    assert search(kb, "draft")["results"] == []
    assert [a["published"] for a in kb.list_articles(KB)] == [0, 0] and len(ids) == 2


@pytest.mark.parametrize("articles, needle", [
    ([("Good", "body"), ("", "body")], "articles[1] title"),
    ([("Good", "body"), ("Title", "x\x00y")], "articles[1] content"),
    ([("Good", "body"), ("Only a title",)], "articles[1] must be a (title, content) pair"),
    ([("T" * 201, "body")], "articles[0] title must be at most 200"),
])
def test_create_articles_checks_every_item_before_writing_any(kb, articles, needle):
    before = kb._db.dump()
    with pytest.raises(kbcite.InvalidArgument) as exc:
        kb.create_articles(KB, articles)
    assert needle in exc.value.message
    assert kb._db.dump() == before


# -- search tiers on a corpus of the simulation's make ------------------------------------------


@pytest.fixture(scope="module")
def corpus_store():
    """300 believable articles (the simulation's generator) with some saved and unpublished."""
    import random

    from kbcite.sim.plan import make_body, make_titles

    rng = random.Random(11)
    titles, subjects = make_titles(rng, 300)
    bodies = [make_body(rng, a, s) for a, s in subjects]
    with KBStore() as store:
        store.create_knowledge_base(KB)
        ids = store.create_articles(KB, list(zip(titles, bodies)))
        for i in range(0, 300, 7):
            store.save_article(KB, ids[i], content=bodies[(i * 13) % 300])
        for i in range(3, 300, 29):
            store.unpublish(KB, ids[i])
        yield store, titles


def _queries(titles):
    import random

    rng = random.Random(3)
    words = sorted({w for t in titles for w in t.lower().split()})
    queries = [t.lower() for t in titles[:40]]
    for _ in range(80):
        n = 1 + int(rng.random() * 6)
        queries.append(" ".join(words[int(rng.random() * len(words))] for _ in range(n)))
    return queries + ["reset reset passwords", "Passwords passwords", "zzz unknownword",
                      "two-factor codes", "read-only members admins"]


def test_search_puts_articles_with_every_word_first(corpus_store):
    store, titles = corpus_store
    spanning = 0
    for query in _queries(titles):
        words = [w for w in query_terms(query) if re.fullmatch(r"[a-z]+", w)]
        # Tiers rank the short queries; a longer one is a question, ranked by score.
        if len(words) != len(query_terms(query)) or not 3 <= len(words) <= TIERED_TERMS_MAX:
            continue
        results = search(store, query, limit=20)["results"]
        texts = [store.get_article(KB, r["article_id"]) for r in results]

        def missing(article):
            text = (article["title"] + " " + article["content"]).lower()
            return sum(1 for w in words if not re.search(r"\b%s\b" % w, text))

        tiers = [min(missing(a), 2) for a in texts]
        assert tiers == sorted(tiers), (query, tiers)
        spanning += len(set(tiers)) > 1
    assert spanning > 5  # queries whose hits span more than one tier were checked


@pytest.mark.parametrize("name, arguments", [
    ("poll_resource_events", {"resource_type": "x" * 100000, "resource_id": KB}),
    ("search_knowledge_base", {"knowledge_base_id": KB, "query": "ab", "k" * 100000: 1}),
    ("t" * 100000, {}),
])
def test_errors_quote_a_huge_input_only_in_part(kb, name, arguments):
    with pytest.raises(kbcite.InvalidArgument) as exc:
        kb.call_tool(name, arguments, granted=GRANTED)
    assert len(exc.value.message) < 400
    assert len(json.dumps(exc.value.to_dict())) < 800
