"""Writes mode ``review``: an agent's edit kept as a proposal, its events, and the people's
``kb review`` commands (both engines), with the official SDK client as the agent."""

import json
import os
import re
import subprocess
import sys
from datetime import datetime, timezone

import pytest

import kbcite
from kbcite.cli.main import main as kb_main
from kbcite.testing import FakeClock
from support.commands import ROOT

try:  # imported before any test captures stderr: the SDK keeps sys.stderr for its servers
    import anyio
    import mcp
    import mcp.types as types
    from mcp import Client, StdioServerParameters
except ImportError:  # Python 3.9 has no SDK
    mcp = None

KB = "kb"
PAGE = "".join("line %02d of the page\n" % n for n in range(20))


@pytest.fixture
def clock():
    """A clock at the real time, standing still until told (the command line, which runs on
    the real clock, must not find this store's proposals weeks old)."""
    return FakeClock(datetime.now(timezone.utc))


@pytest.fixture
def review(tmp_path, engine, request, clock):
    """``(address, store, article)``: a store on the test's engine with one 20-line page."""
    address = str(tmp_path / "kb.db") if engine == "sqlite" else \
        request.getfixturevalue("pg_url")
    store = kbcite.KBStore(address, create=True, clock=clock)
    store.create_knowledge_base(KB)
    store.create_knowledge_base("other")
    article = store.create_article(KB, "Page", PAGE, actor="alice")
    yield address, store, article
    store.close()


def propose(store, article, content, key, version=None, **extra):
    version = version or store.get_article(KB, article)["updated_at"]
    args = dict({"knowledge_base_id": KB, "article_id": article, "content": content,
                 "expected_version": version, "idempotency_key": key}, **extra)
    return store.propose_edit(args, granted=[KB], actor="agent-1")


def kb(address, capsys, *argv):
    """``kb --db ADDRESS ARGV...`` in this process: ``(status, stdout, stderr)``."""
    capsys.readouterr()
    status = kb_main(["--db", address] + [str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def poll(store, after=0):
    return store.call_tool("poll_resource_events", {
        "resource_type": "knowledge_base", "resource_id": KB, "after_sequence": after},
        granted=[KB])["events"]


def test_a_proposal_is_stored_with_its_event_and_nothing_is_written(review):
    _, store, article = review
    head = store.head_sequence(KB)
    proposed = propose(store, article, PAGE + "added\n", "k1", summary="one more line")
    assert proposed["status"] == "proposed" and proposed["replayed"] is False
    assert proposed["citation"]["updated_at"] == store.get_article(KB, article)["updated_at"]
    assert store.get_article(KB, article)["content"] == PAGE
    [event] = poll(store, head)
    assert event == dict(proposed["event"])
    assert (event["type"], event["proposal_id"]) == ("proposal.created",
                                                      proposed["proposal_id"])
    [row] = store.proposals.list(KB)
    assert (row["actor"], row["summary"], row["bytes_change"], row["stale"]) == (
        "agent-1", "one more line", len("added\n"), False)
    assert store.audit() == []


def test_the_same_key_gives_the_same_proposal_and_another_payload_is_refused(review):
    _, store, article = review
    first = propose(store, article, PAGE + "a\n", "same")
    again = propose(store, article, PAGE + "a\n", "same")
    assert dict(again, replayed=False) == first and again["replayed"] is True
    with pytest.raises(kbcite.IdempotencyKeyReused):
        propose(store, article, PAGE + "b\n", "same")
    assert len(store.proposals.list(KB)) == 1


def test_a_proposal_is_checked_as_an_edit_is(review):
    _, store, article = review
    with pytest.raises(kbcite.InvalidArgument):
        propose(store, article, "x" * (kbcite.limits.CONTENT_MAX_BYTES + 1), "big")
    with pytest.raises(kbcite.VersionConflict):
        propose(store, article, PAGE + "a\n", "stale", version="2020-01-01T00:00:00.000000Z")
    with pytest.raises(kbcite.NotFound):  # ungranted: invisible as its articles are
        store.propose_edit({"knowledge_base_id": "other", "article_id": article,
                            "content": "x", "expected_version": "2020-01-01T00:00:00Z",
                            "idempotency_key": "k"}, granted=[KB])
    assert store.proposals.list(KB) == []


def test_approve_writes_one_version_with_actor_and_approver(review, capsys):
    address, store, article = review
    proposed = propose(store, article, PAGE + "added\n", "k1")
    status, out, _ = kb(address, capsys, "--actor", "bob", "--json", "review", "approve", KB,
                        proposed["proposal_id"])
    done = json.loads(out)
    assert status == 0 and (done["actor"], done["approver"]) == ("agent-1", "bob")
    assert store.get_article(KB, article)["content"] == PAGE + "added\n"
    last = store.history(KB, article)[-1]
    assert (last["updated_at"], last["actor"], last["approver"]) == (done["version"],
                                                                    "agent-1", "bob")
    approved = poll(store)[-1]
    assert (approved["type"], approved["updated_at"], approved["decided_by"]) == (
        "proposal.approved", done["version"], "bob")
    events = store.events(KB)["events"]
    assert events[-2]["approver"] == "bob" and events[-2]["actor"] == "agent-1"
    # Decided once: a second approval is one clear line, exit 1, nothing written.
    head = store.head_sequence(KB)
    status, out, err = kb(address, capsys, "--actor", "bob", "review", "approve", KB,
                          proposed["proposal_id"])
    assert status == 1 and "already approved" in err and out == ""
    assert store.head_sequence(KB) == head
    assert store.audit() == []


def test_an_approval_the_person_edited_first_says_so_and_is_one_swap(review):
    address, store, article = review
    made = propose(store, article, PAGE + "agent line\n", "e1", summary="add a line")
    seen = store.get_article(KB, article)["updated_at"]
    edited = {"content": PAGE + "person's line\n", "title": "Page, edited",
              "expected_version": seen}
    done = store.proposals.approve(KB, made["proposal_id"], approver="carol", edited=edited)
    assert done["edited"] is True and done["actor"] == "agent-1"
    now = store.get_article(KB, article)
    assert now["content"].endswith("person's line\n") and now["title"] == "Page, edited"
    last = store.history(KB, article)[-1]
    assert (last["actor"], last["approver"], last["action"]) == ("agent-1", "carol", "edit")
    assert last["summary"] == "add a line (edited by carol before approval)"
    shown = store.proposals.show(KB, made["proposal_id"])
    assert shown["state"] == "approved" and shown["reason"] == "edited by carol before approval"
    assert shown["content"] == PAGE + "agent line\n"  # the agent's own text is kept as it was
    approved = poll(store)[-1]
    assert approved["type"] == "proposal.approved" and approved["reason"] == shown["reason"]
    # Against a version the page no longer shows: nothing is written, the proposal waits.
    other = propose(store, article, now["content"] + "more\n", "e2")
    store.save_article(KB, article, content=now["content"] + "meanwhile\n", actor="bob")
    with pytest.raises(kbcite.VersionConflict):
        store.proposals.approve(KB, other["proposal_id"], approver="carol", edited=dict(
            edited, expected_version=now["updated_at"]))
    assert store.proposals.show(KB, other["proposal_id"])["state"] == "pending"
    assert store.get_article(KB, article)["content"].endswith("meanwhile\n")
    for bad in ({"content": ""}, {"title": " "}, {"expected_version": "yesterday"}):
        with pytest.raises(kbcite.InvalidArgument):
            store.proposals.approve(KB, other["proposal_id"], approver="carol", edited=dict(
                dict(edited, expected_version=store.get_article(KB, article)["updated_at"]),
                **bad))
    assert store.proposals.show(KB, other["proposal_id"])["state"] == "pending"
    assert store.audit() == []


def test_reject_gives_the_agent_the_reason(review, capsys):
    address, store, article = review
    proposed = propose(store, article, PAGE + "rm -rf /\n", "k1")
    status, _, _ = kb(address, capsys, "--actor", "bob", "review", "reject", KB,
                      proposed["proposal_id"], "--reason", "dangerous command")
    assert status == 0
    rejected = poll(store)[-1]
    assert (rejected["type"], rejected["reason"], rejected["proposal_id"]) == (
        "proposal.rejected", "dangerous command", proposed["proposal_id"])
    assert store.get_article(KB, article)["content"] == PAGE
    status, _, err = kb(address, capsys, "--actor", "bob", "review", "approve", KB,
                        proposed["proposal_id"])
    assert status == 1 and "already rejected" in err


def test_a_stale_approval_is_refused_naming_the_current_version(review, capsys):
    address, store, article = review
    proposed = propose(store, article, PAGE + "added\n", "k1")
    current = store.save_article(KB, article, content=PAGE.replace("line 00", "LINE 00"))
    status, out, err = kb(address, capsys, "review", "approve", KB, proposed["proposal_id"])
    assert status == 3 and current in err and "--rebase" in err
    assert store.get_article(KB, article)["updated_at"] == current
    [row] = store.proposals.list(KB)
    assert row["stale"] is True and row["state"] == "pending"
    status, out, _ = kb(address, capsys, "review", "show", KB, proposed["proposal_id"])
    assert status == 0 and "+added" in out and "-LINE 00 of the page" in out


def test_rebase_reapplies_lines_that_do_not_overlap_and_refuses_those_that_do(review, capsys):
    address, store, article = review
    apart = propose(store, article, PAGE + "added\n", "k1")
    near = propose(store, article, PAGE.replace("line 01", "Line 01"), "k2")
    store.save_article(KB, article, content=PAGE.replace("line 00", "LINE 00"))
    status, _, _ = kb(address, capsys, "review", "approve", KB, apart["proposal_id"],
                      "--rebase")
    assert status == 0
    assert store.get_article(KB, article)["content"] == \
        PAGE.replace("line 00", "LINE 00") + "added\n"
    before = store.get_article(KB, article)
    status, _, err = kb(address, capsys, "review", "approve", KB, near["proposal_id"],
                        "--rebase")
    assert status == 3 and "overlaps" in err
    assert store.get_article(KB, article) == before
    assert store.audit() == []


@pytest.mark.parametrize("problem,argv,words", [
    ("missing", ["approve", KB, 99], "no proposal 99"),
    ("another knowledge base", ["approve", "other", 1], "of knowledge base kb, not other"),
    ("a bad expiry", ["list", KB, "--expire-days", "0"], "--expire-days"),
])
def test_bad_input_is_one_line_exit_1_and_nothing_written(review, capsys, problem, argv,
                                                          words):
    address, store, article = review
    propose(store, article, PAGE + "a\n", "k1")
    head = store.head_sequence(KB)
    status, out, err = kb(address, capsys, "review", *argv)
    assert status == 1 and out == "" and words in err and len(err.strip().split("\n")) == 1
    assert store.head_sequence(KB) == head


def test_an_old_proposal_expires_with_its_event(review, capsys, clock):
    address, store, article = review
    proposed = propose(store, article, PAGE + "a\n", "k1")
    clock.advance(days=13)
    assert len(store.proposals.list(KB)) == 1
    clock.advance(days=2)
    assert store.proposals.list(KB) == []
    assert poll(store)[-1]["type"] == "proposal.expired"
    assert poll(store)[-1]["proposal_id"] == proposed["proposal_id"]
    with pytest.raises(kbcite.InvalidArgument, match="expired"):
        store.proposals.approve(KB, proposed["proposal_id"], approver="bob")
    assert store.audit() == []


def test_approval_of_a_deleted_article_is_gone(review, capsys):
    address, store, article = review
    proposed = propose(store, article, PAGE + "a\n", "k1")
    store.delete_article(KB, article)
    status, _, err = kb(address, capsys, "review", "approve", KB, proposed["proposal_id"])
    assert status == 1 and "gone" in err
    assert store.proposals.list(KB)[0]["gone"] is True


def test_the_audit_finds_an_approved_proposal_without_its_version(review):
    _, store, article = review
    proposed = propose(store, article, PAGE + "a\n", "k1")
    store.proposals.approve(KB, proposed["proposal_id"], approver="bob")
    db = store._db
    with db.write():
        db.execute("UPDATE proposals SET version = ? WHERE pk = ?",
                   ("2020-01-01T00:00:00.000000Z", proposed["proposal_id"]))
    assert any("does not hold" in p for p in store.audit())


# -- many processes at once ----------------------------------------------------------------

WORKER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from kbcite import KBStore, ToolError
address, article, name = sys.argv[2], sys.argv[3], sys.argv[4]
with KBStore(address) as store:
    for n in range(5):
        attempt = 0
        while True:
            attempt += 1
            row = store.get_article("kb", article)
            try:
                done = store.propose_edit({"knowledge_base_id": "kb", "article_id": article,
                    "content": row["content"] + "%s %d\n" % (name, n),
                    "expected_version": row["updated_at"],
                    "idempotency_key": "%s-%d-%d" % (name, n, attempt)}, granted=["kb"], actor=name)
                approved = store.proposals.approve("kb", done["proposal_id"], approver="p-" + name)
                print(json.dumps(approved["version"]), flush=True)
                break
            except ToolError as exc:
                if exc.code not in ("version_conflict", "store_busy"):
                    raise
                # Stale, or decided by nobody yet: the next round proposes anew.
                if exc.code == "version_conflict" and "proposal_id" in exc.details:
                    store.proposals.reject("kb", exc.details["proposal_id"],
                                          approver="p-" + name, reason="stale")
"""


@pytest.mark.slow
def test_eight_processes_proposing_and_approving_leave_history_equal_to_the_approved(review):
    address, store, article = review
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(ROOT), address, article,
                               "w%d" % n], stdout=subprocess.PIPE, text=True)
             for n in range(8)]
    versions = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        versions += [json.loads(line) for line in out.split()]
    history = store.history(KB, article)[1:]
    approved = [p for p in store.proposals.list(KB, states=("approved",))]
    assert len(versions) == 40 == len(approved)
    # Every approved proposal is one version, in order, with its agent and its approver.
    by_version = {p["version"]: p for p in approved}
    assert [v["updated_at"] for v in history] == sorted(versions)
    assert [(v["actor"], v["approver"]) for v in history] == [
        (by_version[v["updated_at"]]["actor"], by_version[v["updated_at"]]["decided_by"])
        for v in history]
    content = store.get_article(KB, article)["content"]
    assert sorted(content.split("\n")[20:-1]) == sorted("w%d %d" % (w, n) for w in range(8)
                                                        for n in range(5))
    assert store.audit() == []


# -- the agent's side, through the official SDK, both eras ---------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_review_mode_end_to_end_through_the_sdk(review, capfd, mode):
    if mcp is None:
        pytest.skip("the official MCP SDK (pip install mcp, Python >= 3.10) is not installed")

    address, store, article = review
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "kbcite.server", "--db", address, "--grant", KB, "--writes", "review",
        "--actor", "agent-sdk"], cwd=str(ROOT))

    async def agent(step):
        async with Client(params, mode=mode) as client:
            return await step(client)

    async def propose_it(client):
        read = await client.call_tool("read_knowledge_article", {
            "knowledge_base_id": KB, "article_id": article})
        edited = await client.call_tool("edit_knowledge_article", {
            "knowledge_base_id": KB, "article_id": article, "content": PAGE + "added\n",
            "expected_version": read.structured_content["updated_at"],
            "idempotency_key": "sdk-1"})
        again = await client.call_tool("edit_knowledge_article", {
            "knowledge_base_id": KB, "article_id": article, "content": PAGE + "added\n",
            "expected_version": read.structured_content["updated_at"],
            "idempotency_key": "sdk-1"})
        return read.structured_content, edited, again

    read, edited, again = anyio.run(agent, propose_it)
    assert not edited.is_error and edited.structured_content["status"] == "proposed"
    assert again.structured_content["proposal_id"] == edited.structured_content["proposal_id"]
    number = edited.structured_content["proposal_id"]
    status, _, _ = kb(address, capfd, "--actor", "carol", "review", "approve", KB, number)
    assert status == 0

    async def poll_it(client):
        polled = await client.call_tool("poll_resource_events", {
            "resource_type": "knowledge_base", "resource_id": KB,
            "after_sequence": read["head_sequence"]})
        return polled.structured_content["events"]

    events = anyio.run(agent, poll_it)
    assert [e["type"] for e in events] == ["proposal.created", "article.updated",
                                           "proposal.approved"]
    assert events[-1]["proposal_id"] == number and events[-1]["decided_by"] == "carol"
    last = store.history(KB, article)[-1]
    assert (last["actor"], last["approver"], last["updated_at"]) == (
        "agent-sdk", "carol", events[-1]["updated_at"])


# -- the session in docs/cli.md ------------------------------------------------------------

DOCS = ROOT / "docs" / "cli.md"
START, END = "<!-- review transcript: start -->\n", "<!-- review transcript: end -->\n"
STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
TAR = ("Create an archive: tar -cvf a.tar dir\nList it: tar -tf a.tar\n"
       "Extract it: tar -xf a.tar\n")
SESSION = [
    ["review", "list", "support"],
    ["review", "show", "support", "1"],
    ["review", "approve", "support", "1"],
    ["review", "approve", "support", "1", "--rebase"],
    ["review", "approve", "support", "2", "--rebase"],
    ["review", "reject", "support", "2", "--reason", "a colleague fixed the first line already"],
    ["review", "approve", "support", "2"],
    ["history", "support", "art-000001"],
    ["events", "support"],
]


def transcript(tmp_path, capsys):
    """The session of docs/cli.md, run now, its version stamps numbered in time order."""
    address = str(tmp_path / "session.db")
    with kbcite.KBStore(address, create=True) as store:
        store.create_knowledge_base("support")
        article = store.create_article("support", "tar", TAR, actor="alice")
        version = store.get_article("support", article)["updated_at"]
        for key, content, summary in (
                ("warn", TAR + "Never run tar as root on /.\n", "a warning at the end"),
                ("first", TAR.replace("-cvf", "-cf"), "fix the first line")):
            store.propose_edit({"knowledge_base_id": "support", "article_id": article,
                                "content": content, "expected_version": version,
                                "idempotency_key": key, "summary": summary},
                               granted=["support"], actor="agent-1")
        store.save_article("support", article, content=TAR.replace("a.tar dir", "b.tar dir"),
                           actor="bob")
    lines = []
    for argv in SESSION:
        shown = " ".join('"%s"' % a if " " in a else a for a in argv)
        status, out, err = kb(address, capsys, "--actor", "alice", *argv)
        lines.append("$ kb %s\n%s%s%s" % (shown, out, err,
                                          "(exit %d)\n" % status if status else ""))
    text = "".join(lines)
    stamps = sorted(set(STAMP.findall(text)))
    # In a table's cell the short name keeps the stamp's width, so the columns still line up.
    text = re.sub(STAMP.pattern + "(?=  | \\*)", lambda m: (
        "V%d" % (stamps.index(m.group()) + 1)).ljust(len(m.group())), text)
    return STAMP.sub(lambda m: "V%d" % (stamps.index(m.group()) + 1), text)


def test_the_review_session_in_the_docs_is_what_the_commands_say(tmp_path, capsys):
    fresh = "```text\n" + transcript(tmp_path, capsys) + "```\n"
    docs = DOCS.read_text(encoding="utf-8")
    head, rest = docs.split(START)
    kept, tail = rest.split(END)
    if os.environ.get("KB_WRITE_DOCS"):
        DOCS.write_text(head + START + fresh + END + tail, encoding="utf-8")
    assert kept == fresh, "docs/cli.md's review session is stale: run KB_WRITE_DOCS=1 " \
                          "python -m pytest tests/test_review.py -k docs"


@pytest.mark.slow
def test_the_review_benchmark_runs_and_prints_its_three_tables():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "review.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr
    for heading in ("## The approval question's diff", "## Proposing against editing",
                    "## kb review list"):
        assert heading in done.stdout
    assert "propose / edit" in done.stdout and "every line rewritten" in done.stdout


# -- what a reviewer may read, and the limits every decision keeps --------------------------


def test_a_draft_written_after_a_proposal_never_shows_in_its_review(review, capsys, tmp_path):
    address, store, article = review
    proposed = propose(store, article, PAGE + "added\n", "k1")
    store.unpublish(KB, article, actor="alice")
    store.save_article(KB, article, content="DRAFT-ONLY salary table", title="DRAFT-TITLE",
                       actor="alice")
    shown = store.proposals.show(KB, proposed["proposal_id"])
    assert shown["gone"] is True and shown["current"] is None and shown["base"] is None
    assert "DRAFT" not in json.dumps(shown)
    status, out, _ = kb(address, capsys, "review", "show", KB, proposed["proposal_id"])
    assert status == 0 and "gone" in out and "added" in out and "DRAFT" not in out
    status, out, _ = kb(address, capsys, "--json", "review", "list", KB)
    assert status == 0 and "DRAFT" not in out


def test_the_review_pages_show_a_gone_articles_proposal_without_its_draft(review):
    pytest.importorskip("jinja2")
    from kbcite.server.http.app import McpApp
    from kbcite.server.http.settings import Settings
    from support.asgi import AsgiClient
    address, store, article = review
    proposed = propose(store, article, PAGE + "added\n", "k1")
    store.unpublish(KB, article, actor="alice")
    store.save_article(KB, article, content="DRAFT-ONLY salary table", title="DRAFT-TITLE",
                       actor="alice")
    reader = store.tokens.create("reader", [KB], "deny")
    app = McpApp(Settings(db=address, signing_secret=b"w" * 32))
    try:
        browser = AsgiClient(app)
        assert browser.sign_in(reader) == 303
        for path in ("/kb/%s/review" % KB, "/kb/%s/review/%d" % (KB, proposed["proposal_id"]),
                     "/kb/%s/events" % KB):
            status, _, page = browser.get(path)
            assert status == 200 and "DRAFT" not in page, path
        _, _, page = browser.get("/kb/%s/review/%d" % (KB, proposed["proposal_id"]))
        assert "The article is gone" in page and "added" in page
        assert browser.get("/kb/%s/articles/%s" % (KB, article))[0] == 404
    finally:
        app.close()


def test_a_rebase_past_the_content_limit_is_refused_and_writes_nothing(review, capsys,
                                                                      monkeypatch):
    address, store, article = review
    monkeypatch.setattr(kbcite.validation, "CONTENT_MAX_BYTES", len(PAGE) + 60)
    proposed = propose(store, article, PAGE + "x" * 40 + "\n", "k1")
    store.save_article(KB, article, content="y" * 40 + "\n" + PAGE)
    before = store.get_article(KB, article)
    status, _, err = kb(address, capsys, "review", "approve", KB, proposed["proposal_id"],
                        "--rebase")
    assert status == 1 and "at most %d bytes" % (len(PAGE) + 60) in err, err
    assert store.get_article(KB, article) == before
    assert store.proposals.list(KB)[0]["state"] == "pending"


def test_a_revert_to_a_version_past_todays_limit_is_refused(review, monkeypatch):
    _, store, article = review
    first = store.get_article(KB, article)["updated_at"]
    now = store.save_article(KB, article, content="short")
    monkeypatch.setattr(kbcite.validation, "CONTENT_MAX_BYTES", 100)
    with pytest.raises(kbcite.InvalidArgument, match="to_version's content"):
        store.revert(KB, article, first, expected_version=now)
    assert store.get_article(KB, article)["updated_at"] == now
    # And the audit says which kept version is past the limit, and what to do.
    [problem] = store.audit()
    assert first in problem and "past the limit of 100" in problem and "prune" in problem


def test_an_approval_failing_for_another_reason_is_not_called_pruned(review, monkeypatch):
    _, store, article = review
    proposed = propose(store, article, PAGE + "added\n", "k1")
    store.save_article(KB, article, content=PAGE.replace("line 00", "LINE 00"))

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(kbcite.history, "find", broken)
    # The fault itself, not a version conflict saying the base was pruned.
    with pytest.raises(RuntimeError, match="disk on fire"):
        store.proposals.approve(KB, proposed["proposal_id"], approver="bob", rebase=True)
    assert store.proposals.list(KB)[0]["state"] == "pending"
