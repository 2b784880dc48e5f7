"""The versions the store keeps, on each engine: the history of every kind of change, reading
a cited version, check_citations, conflicts that carry the change, revert, prune and upgrade.
Grants and drafts are compared byte for byte with what a missing object answers."""

import json
import random

import pytest

import kbcite
from kbcite import ToolError, changes
from kbcite.testing import FakeClock
from support.old_schemas import as_schema_3

KB = "kb-hist"
GRANTED = frozenset({KB})


def call(store, name, granted=GRANTED, actor=None, **arguments):
    return store.call_tool(name, arguments, granted=granted, actor=actor)


def error_of(store, name, granted=GRANTED, **arguments):
    with pytest.raises(ToolError) as info:
        call(store, name, granted, **arguments)
    return info.value


def read(store, article_id, **extra):
    return call(store, "read_knowledge_article", knowledge_base_id=KB, article_id=article_id,
                **extra)


def edit(store, article_id, content, version, key, actor=None, **extra):
    return call(store, "edit_knowledge_article", actor=actor, knowledge_base_id=KB,
                article_id=article_id, content=content, expected_version=version,
                idempotency_key=key, **extra)


def check(store, *cited, kb=KB, granted=GRANTED):
    return call(store, "check_citations", granted, knowledge_base_id=kb,
                citations=list(cited))["results"]


def cite(article_id, version, kb=KB):
    return {"knowledge_base_id": kb, "article_id": article_id, "updated_at": version}


# -- every change is a version ---------------------------------------------------------------


def test_every_kind_of_change_appends_a_version_with_its_event_and_actor(kb, clock, tmp_path):
    aid = kb.create_article(KB, "Refunds", "Five days.", actor="alice")
    clock.advance(minutes=1)
    v1 = read(kb, aid)["updated_at"]
    v2 = edit(kb, aid, "Five days.\n\nTen in December.", v1, "e1", actor="bot",
              summary="December")["updated_at"]
    clock.advance(minutes=1)
    v3 = kb.save_article(KB, aid, title="Refund policy", actor="bob", summary="retitled")
    v4 = kb.unpublish(KB, aid, actor="carol")
    v5 = kb.save_article(KB, aid, content="Draft text.", actor="carol")
    v6 = kb.publish(KB, aid, actor="dave")
    reverted = kb.revert(KB, aid, v2, expected_version=v6, actor="erin", summary="undo")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# Imported\n\nFrom a file.\n", encoding="utf-8")
    kb.folders.import_directory(KB, str(folder))
    rows = kb.history(KB, aid)
    assert [(r["action"], r["actor"], r["event"], r["published"]) for r in rows] == [
        ("create", "alice", "article.published", True),
        ("edit", "bot", "article.updated", True),
        ("save", "bob", "article.updated", True),
        ("unpublish", "carol", "article.unpublished", False),
        ("save", "carol", None, False),  # a draft's save: agents saw nothing
        ("publish", "dave", "article.published", True),
        ("revert", "erin", "article.updated", True)]
    assert [r["updated_at"] for r in rows] == [v1, v2, v3, v4, v5, v6, reverted["updated_at"]]
    assert [r["summary"] for r in rows] == [None, "December", "retitled", None, None, None,
                                            "undo"]
    assert [r["current"] for r in rows] == [False] * 6 + [True]
    assert [r["bytes_change"] for r in rows][:3] == [10, 18, 0]
    [imported] = [a["article_id"] for a in kb.list_articles(KB) if a["source"] == "a.md"]
    assert [(r["action"], r["actor"]) for r in kb.history(KB, imported)] == [
        ("import", "import")]
    # The events agents saw are the history's events, one for one, with their actors.
    events, after = [], 0
    while True:
        page = kb.events(KB, after)
        events += page["events"]
        after = page["next_after_sequence"]
        if not page["has_more"]:
            break
    mine = [e for e in events if e["article_id"] == aid]
    assert [(e["sequence"], e["type"], e["actor"]) for e in mine] == [
        (r["sequence"], r["event"], r["actor"]) for r in rows if r["event"]]
    assert kb.audit() == []


def test_the_audit_finds_an_event_whose_version_is_missing(kb):
    aid = kb.create_article(KB, "Audited", "v1")
    kb.save_article(KB, aid, content="v2")
    kb.save_article(KB, aid, content="v3")
    assert kb.audit() == []
    middle = kb.history(KB, aid)[1]
    with kb._db.write():
        kb._db.execute("DELETE FROM versions WHERE sequence = ? AND kb_pk = (SELECT pk FROM "
                       "knowledge_bases WHERE kb_id = ?)", (middle["sequence"], KB))
    assert kb.audit() == ["knowledge base %r: event %d (article.updated of %r) has no version "
                          "in the history" % (KB, middle["sequence"], aid)]


def test_a_version_that_keeps_its_text_shares_it(kb):
    aid = kb.create_article(KB, "Same", "A text of some length.")
    kb.unpublish(KB, aid)
    kb.publish(KB, aid)
    kb.save_article(KB, aid, title="Renamed")
    kb.save_article(KB, aid, content="A text of some length.")  # saved again: no version
    assert kb._db.value("SELECT count(*) FROM texts") == 1
    assert len(kb.history(KB, aid)) == 4


def test_a_refused_write_leaves_no_version(kb):
    aid = kb.create_article(KB, "Guarded", "v1")
    version = read(kb, aid)["updated_at"]
    edit(kb, aid, "v2", version, "k1")
    before = kb._db.dump() if kb.engine == "sqlite" else kb._db.dump()
    for bad in ({"content": "v3", "expected_version": version, "idempotency_key": "k2"},
                {"content": "", "expected_version": version, "idempotency_key": "k3"},
                {"content": "x", "expected_version": "soon", "idempotency_key": "k4"}):
        with pytest.raises(ToolError):
            call(kb, "edit_knowledge_article", knowledge_base_id=KB, article_id=aid, **bad)
    with pytest.raises(ToolError):
        kb.save_article(KB, aid, content="x", actor="")
    assert kb._db.dump() == before
    assert len(kb.history(KB, aid)) == 2


# -- reading what a citation cited ----------------------------------------------------------


def test_a_read_of_a_cited_version_returns_it_and_the_citation_of_now(kb, clock):
    aid = kb.create_article(KB, "Old title", "First paragraph.\n\nSecond.")
    first = read(kb, aid)
    clock.advance(minutes=5)
    kb.save_article(KB, aid, title="New title", content="First paragraph.\n\nSecond, changed.")
    now = read(kb, aid)
    old = read(kb, aid, version=first["updated_at"])
    assert (old["title"], old["content"], old["updated_at"]) == (
        "Old title", "First paragraph.\n\nSecond.", first["updated_at"])
    assert old["citation"] == first["citation"] and old["current"] == now["citation"]
    # Any spelling of the same instant names the same version.
    respelled = first["updated_at"].replace("Z", "+00:00")
    assert read(kb, aid, version=respelled)["content"] == old["content"]
    assert read(kb, aid, version=now["updated_at"])["current"] == now["citation"]
    assert "current" not in now


def test_versions_agents_never_saw_read_like_missing_ones(kb, clock):
    aid = kb.create_article(KB, "Withdrawn once", "Public text.")
    public = read(kb, aid)["updated_at"]
    clock.advance(minutes=1)
    hidden = kb.unpublish(KB, aid)
    clock.advance(minutes=1)
    draft = kb.save_article(KB, aid, content="A secret draft.")
    clock.advance(minutes=1)
    kb.publish(KB, aid)
    assert read(kb, aid, version=public)["content"] == "Public text."
    unknown = "2026-11-08T10:00:00.123456Z"
    errors = {v: error_of(kb, "read_knowledge_article", knowledge_base_id=KB, article_id=aid,
                          version=v) for v in (hidden, draft, unknown)}
    for version, err in errors.items():
        assert err.code == "version_not_found"
        assert aid in err.message and "kb history" in err.message
        # The same words whatever the reason: a draft's version tells nothing more.
        assert err.message == errors[unknown].message.replace(unknown, version)
    assert error_of(kb, "read_knowledge_article", knowledge_base_id=KB, article_id=aid,
                    version="yesterday").code == "invalid_argument"


def test_drafts_unpublished_and_ungranted_history_is_not_found_byte_for_byte(kb, store):
    draft = kb.create_article(KB, "Draft", "Never published.", published=False)
    gone = kb.create_article(KB, "Gone", "Published once.")
    version = read(kb, gone)["updated_at"]
    kb.unpublish(KB, gone)
    store.create_knowledge_base("other")
    other = store.create_article("other", "Other", "Not granted.")
    missing = error_of(kb, "read_knowledge_article", knowledge_base_id=KB,
                       article_id="art-999999").to_dict()
    for article_id in (draft, gone):
        for extra in ({}, {"version": version}):
            got = error_of(kb, "read_knowledge_article", knowledge_base_id=KB,
                           article_id=article_id, **extra).to_dict()
            assert json.dumps(got) == json.dumps(missing).replace("art-999999", article_id)
    no_kb = error_of(kb, "read_knowledge_article", knowledge_base_id="nope",
                     article_id=other).to_dict()
    ungranted = error_of(kb, "read_knowledge_article", knowledge_base_id="other",
                         article_id=other, version=version).to_dict()
    assert json.dumps(ungranted) == json.dumps(no_kb).replace("nope", "other")
    assert error_of(kb, "check_citations", knowledge_base_id="other",
                    citations=[cite(other, version, "other")]).to_dict() == \
        json.loads(json.dumps(error_of(kb, "check_citations", knowledge_base_id="nope",
                                       citations=[cite(other, version, "nope")]).to_dict())
                   .replace("nope", "other"))


# -- check_citations -------------------------------------------------------------------------


def test_check_citations_says_current_changed_or_gone(kb, clock, store):
    a = kb.create_article(KB, "Alpha", "One.\n\nTwo.\n\nThree.")
    b = kb.create_article(KB, "Beta", "Beta text.")
    c = kb.create_article(KB, "Gamma", "Gamma text.")
    cited = [read(kb, x)["citation"] for x in (a, b, c)]
    clock.advance(minutes=1)
    kb.save_article(KB, a, title="Alpha 2", content="One.\n\nTwo, rewritten.\n\nThree.")
    kb.unpublish(KB, c)
    store.create_knowledge_base("elsewhere")
    foreign = cite(b, cited[1]["updated_at"], "elsewhere")
    results = check(kb, *cited, foreign, cite("art-999999", cited[0]["updated_at"]))
    assert [r["status"] for r in results] == ["changed", "current", "gone", "not_found", "gone"]
    changed = results[0]
    assert changed["current"] == read(kb, a)["citation"]
    assert changed["changes"] == {"title": {"from": "Alpha", "to": "Alpha 2"}, "hunks": [
        {"at": 1, "removed": ["Two."], "added": ["Two, rewritten."]}], "truncated": False}
    assert changes.apply("One.\n\nTwo.\n\nThree.", changed["changes"]) == \
        read(kb, a)["content"]
    assert results[1]["changes"] is None and results[1]["current"] == cited[1]
    assert results[2]["current"] is None and results[3]["current"] is None
    assert [r["citation"] for r in results] == cited + [foreign, cite("art-999999",
                                                                       cited[0]["updated_at"])]


def test_check_citations_reads_once_whatever_the_number(kb, clock):
    ids = kb.create_articles(KB, [("T%d" % i, "P %d.\n\nQ." % i) for i in range(100)])
    cited = [read(kb, x)["citation"] for x in ids]
    clock.advance(minutes=1)
    for x in ids[::3]:
        kb.save_article(KB, x, content="Changed.\n\nQ.")
    transactions, real_read = [], kb._db.read

    def counted():
        transactions.append(1)
        return real_read()
    kb._db.read = counted
    try:
        results = check(kb, *cited)
    finally:
        del kb._db.read
    assert len(transactions) == 1
    assert sum(r["status"] == "changed" for r in results) == len(ids[::3])
    err = error_of(kb, "check_citations", knowledge_base_id=KB, citations=cited + cited[:1])
    assert err.code == "invalid_argument" and "at most 100" in err.message


def test_a_changed_citation_of_an_unknown_or_pruned_version_says_why(kb, clock):
    aid = kb.create_article(KB, "Pruned", "v1")
    first = read(kb, aid)["updated_at"]
    clock.advance(days=40)
    kb.save_article(KB, aid, content="v2")
    fake = cite(aid, "2026-11-08T09:00:00.000007Z")
    [unknown] = check(kb, fake)
    assert (unknown["status"], unknown["changes"], unknown["reason"]) == (
        "changed", None, "version_not_found")
    assert kb.prune_history(KB, 30)["pruned"] == 1
    [pruned] = check(kb, cite(aid, first))
    assert (pruned["status"], pruned["changes"], pruned["reason"]) == (
        "changed", None, "version_pruned")
    err = error_of(kb, "read_knowledge_article", knowledge_base_id=KB, article_id=aid,
                   version=first)
    assert err.code == "version_pruned" and "pruned" in err.message


def test_the_changes_are_bounded_and_flagged(kb, clock):
    aid = kb.create_article(KB, "Big", "\n\n".join("old %d " % i + "x" * 500 for i in range(40)))
    version = read(kb, aid)["updated_at"]
    clock.advance(minutes=1)
    kb.save_article(KB, aid, content="\n\n".join("new %d " % i + "y" * 500 for i in range(40)))
    [result] = check(kb, cite(aid, version))
    change = result["changes"]
    assert change["truncated"] is True
    assert sum(len(p) for h in change["hunks"] for p in h["removed"] + h["added"]) == \
        kbcite.limits.CHANGES_MAX_CHARS
    with pytest.raises(ValueError):
        changes.apply("", change)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_check_citations_equals_the_truth_replayed_from_the_writes(kb, clock, seed):
    """Random saves, retitles and withdrawals; random citations of every version seen. The
    answer for each must be what this test's own record of the writes says."""
    rng = random.Random(seed)
    ids = kb.create_articles(KB, [("Article %d" % i, "\n\n".join(
        "para %d.%d" % (i, p) for p in range(4))) for i in range(12)])
    truth = {aid: [(read(kb, aid)["updated_at"], read(kb, aid)["title"],
                    read(kb, aid)["content"], True)] for aid in ids}
    for step in range(120):
        clock.advance(seconds=rng.random() * 60)
        aid = ids[int(rng.random() * len(ids))]
        _, title, content, published = truth[aid][-1]
        roll = rng.random()
        if roll < 0.1:
            version = (kb.publish if not published else kb.unpublish)(KB, aid)
            published = not published
        else:
            paragraphs = content.split("\n\n")
            paragraphs[int(rng.random() * len(paragraphs))] = "step %d" % step
            if roll < 0.2:
                paragraphs.append("appended %d" % step)
            content = "\n\n".join(paragraphs)
            if roll > 0.9:
                title = "Retitled %d" % step
            version = kb.save_article(KB, aid, content=content, title=title)
        truth[aid].append((version, title, content, published))
    cited = []
    for aid, versions in truth.items():
        cited += [cite(aid, v[0]) for v in versions]
    rng_order = sorted(cited, key=lambda c: rng.random())
    for start in range(0, len(rng_order), 100):
        batch = rng_order[start:start + 100]
        for citation, result in zip(batch, check(kb, *batch)):
            versions = truth[citation["article_id"]]
            now = versions[-1]
            then = [v for v in versions if v[0] == citation["updated_at"]][0]
            if not now[3]:
                assert result["status"] == "gone"
            elif then is now:
                assert result["status"] == "current"
            elif not then[3]:  # a version agents never saw: no change is given
                assert (result["status"], result["reason"]) == ("changed", "version_not_found")
            else:
                assert result["status"] == "changed"
                change = result["changes"]
                assert change["title"] == (None if then[1] == now[1] else
                                           {"from": then[1], "to": now[1]})
                assert changes.apply(then[2], change) == now[2]


# -- conflicts carry the change --------------------------------------------------------------


def test_a_conflict_carries_the_current_citation_and_the_change(kb, clock):
    aid = kb.create_article(KB, "Shared", "Intro.\n\nBody.\n\nOutro.")
    mine = read(kb, aid)
    clock.advance(minutes=1)
    kb.save_article(KB, aid, content="Intro.\n\nBody, by a colleague.\n\nOutro.")
    err = error_of(kb, "edit_knowledge_article", knowledge_base_id=KB, article_id=aid,
                   content=mine["content"] + "\n\nMy note.",
                   expected_version=mine["updated_at"], idempotency_key="mine")
    assert err.code == "version_conflict" and "details.changes" in err.message
    current = read(kb, aid)
    assert err.details["current"] == current["citation"] and err.details["gone"] is False
    rebuilt = changes.apply(mine["content"], err.details["changes"])
    assert rebuilt == current["content"]
    # The retry, made from the conflict alone, goes through.
    done = edit(kb, aid, rebuilt + "\n\nMy note.", err.details["current"]["updated_at"],
                "mine-2")
    assert read(kb, aid)["content"].endswith("Body, by a colleague.\n\nOutro.\n\nMy note.")
    assert done["previous_version"] == current["updated_at"]


def test_revert_is_a_compare_and_swap_with_one_event(kb, clock):
    aid = kb.create_article(KB, "Policy", "Good text.")
    good = read(kb, aid)["updated_at"]
    clock.advance(minutes=1)
    bad = edit(kb, aid, "Wrong text.", good, "bad")["updated_at"]
    head = kb.head_sequence(KB)
    with pytest.raises(kbcite.VersionConflict):
        kb.revert(KB, aid, good, expected_version=good)
    assert kb.head_sequence(KB) == head
    done = kb.revert(KB, aid, good, expected_version=bad, actor="alice")
    assert kb.head_sequence(KB) == head + 1 and done["event"]["type"] == "article.updated"
    now = read(kb, aid)
    assert (now["content"], now["updated_at"]) == ("Good text.", done["updated_at"])
    with pytest.raises(kbcite.VersionNotFound):
        kb.revert(KB, aid, "2026-11-08T09:00:00.000009Z", expected_version=done["updated_at"])
    assert kb.audit() == []


def test_a_revert_with_an_idempotency_key_is_written_once(kb, clock):
    aid = kb.create_article(KB, "Policy", "Good text.")
    good = read(kb, aid)["updated_at"]
    clock.advance(minutes=1)
    bad = edit(kb, aid, "Wrong text.", good, "bad")["updated_at"]
    first = kb.revert(KB, aid, good, expected_version=bad, actor="alice",
                      summary="revert to %s" % good, idempotency_key="web-1")
    clock.advance(minutes=1)
    again = kb.revert(KB, aid, good, expected_version=bad, actor="alice",
                      summary="revert to %s" % good, idempotency_key="web-1")
    assert (first["replayed"], again["replayed"]) == (False, True)
    assert again["updated_at"] == first["updated_at"] and again["event"] == first["event"]
    rows = kb.history(KB, aid)
    assert len(rows) == 3 and (rows[-1]["action"], rows[-1]["actor"], rows[-1]["summary"]) == (
        "revert", "alice", "revert to %s" % good)
    with pytest.raises(kbcite.IdempotencyKeyReused):  # the key of another request
        kb.revert(KB, aid, bad, expected_version=first["updated_at"], idempotency_key="web-1")
    with pytest.raises(kbcite.IdempotencyKeyReused):  # an edit's key is not a revert's
        kb.revert(KB, aid, good, expected_version=first["updated_at"], idempotency_key="bad")
    assert len(kb.history(KB, aid)) == 3 and kb.audit() == []


# -- retention --------------------------------------------------------------------------------


def test_prune_keeps_recent_and_current_versions_and_frees_their_texts(kb, clock):
    aid = kb.create_article(KB, "Old", "text 0")
    keep = kb.create_article(KB, "Untouched", "only version")
    for i in range(1, 4):
        clock.advance(days=10)
        kb.save_article(KB, aid, content="text %d" % i)
    texts = kb._db.value("SELECT count(*) FROM texts")
    plan = kb.prune_history(KB, 15, dry_run=True)
    assert plan["pruned"] == 2 and kb._db.value("SELECT count(*) FROM texts") == texts
    assert kb.prune_history(KB, 15)["pruned"] == 2
    assert kb._db.value("SELECT count(*) FROM texts") == texts - 2
    rows = kb.history(KB, aid)
    assert [r["pruned"] for r in rows] == [True, True, False, False]
    assert kb.history(KB, keep)[0]["pruned"] is False  # 30 days old, but current
    assert kb.prune_history(KB, 0)["pruned"] == 1
    assert [r["pruned"] for r in kb.history(KB, aid)] == [True, True, True, False]
    assert kb.audit() == []
    for bad in (-1, 36501, "7", True):
        with pytest.raises(kbcite.InvalidArgument, match="keep_days"):
            kb.prune_history(KB, bad)


# -- an older store -------------------------------------------------------------------------


def test_an_upgrade_starts_each_history_at_the_current_version(engine, tmp_path, request):
    address = (str(tmp_path / "old.db") if engine == "sqlite"
               else request.getfixturevalue("pg_url"))
    clock = FakeClock()
    with kbcite.KBStore(address, create=True, clock=clock) as store:
        store.create_knowledge_base(KB)
        a = store.create_article(KB, "Kept", "Published text.")
        b = store.create_article(KB, "Draft", "Draft text.", published=False)
        c = store.create_article(KB, "Withdrawn", "Withdrawn text.")
        clock.advance(minutes=1)
        store.save_article(KB, a, content="Saved text.")
        store.unpublish(KB, c)
        before = {x: store.get_article(KB, x) for x in (a, b, c)}
        found = [r["results"] for r in [store.call_tool(
            "search_knowledge_base", {"knowledge_base_id": KB, "query": "saved text"},
            granted=GRANTED)]]
    as_schema_3(address, engine)
    with pytest.raises(kbcite.NotAStore, match="kb upgrade"):
        kbcite.KBStore(address)
    assert kbcite.KBStore.upgrade(address) == (3, kbcite.SCHEMA_VERSION)
    with kbcite.KBStore(address, clock=clock) as store:
        assert store.audit() == []
        for x, was in before.items():
            assert store.get_article(KB, x) == was
            [row] = store.history(KB, x)
            assert (row["action"], row["updated_at"], row["current"]) == (
                "upgrade", was["updated_at"], True)
        assert [row["event"] for x in (a, b, c) for row in store.history(KB, x)] == [
            "article.updated", None, "article.unpublished"]
        assert [r["results"] for r in [store.call_tool(
            "search_knowledge_base", {"knowledge_base_id": KB, "query": "saved text"},
            granted=GRANTED)]] == found
        clock.advance(minutes=1)
        store.save_article(KB, a, content="After the upgrade.")
        assert len(store.history(KB, a)) == 2 and store.audit() == []
