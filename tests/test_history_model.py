"""The history checker: random sequences of everything that can change an article, through the
entry points people and agents use, with the store's promise checked after every step.

A hypothesis state machine drives one store per example through:

- the five tools in both protocol eras, through the protocol layer (``Dispatch``) as a
  transport hands them in, under every writes mode: allow, ask (the person accepts or
  declines, by elicitation in a handshake session or by an input-required round trip in
  2026-07-28), review (a proposal); replays of an edit already made; calls cancelled before,
  inside and at the end of their transaction;
- the command line (``kb`` in this process): save, edit, revert, unpublish, publish, delete,
  import (with and without --force), export --edited (over the imported folder and elsewhere),
  merge, review approve (plain and --rebase) and reject; and a dump restored as a copy;
- the files of the imported folder edited, retitled and renamed as a person does in git;
- the web pages through the ASGI app in this process: Edit and Revert, edit-then-approve of a
  proposal, and every page a token's holder reads (an article, its history and diff, the
  review queue, a proposal, the events);
- a token's grant changed (revoked, another made), proposals expired by time.

After every step it checks the invariants (``check_store``): every version differs from the
one before it (title, text and visibility: a write that changes nothing makes no version);
each article's history grew by exactly the writes the steps reported, and the event log is
gapless and matches the history one for one; every decided proposal has its event and every
approved one its version; no text the store removed comes back except through a step that
adds it (a file's own new lines, an edit's, a revert's); every version is within the limits;
and each step's own promise: a refused or cancelled call changed nothing, and no answer to a
token holds text that token may not read (a draft's, an ungranted knowledge base's).

Every line of every text carries a token of its own (``qz00042q``), so that a line is told
apart from every other and found in any answer. The content limit is made small, so that
texts past it cost nothing to make.
"""

import functools
import json
import os
import random
import re
import shutil
import tempfile
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from html import unescape

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (  # noqa: E402
    RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test,
)

import kbcite  # noqa: E402
from kbcite import articles, edits, validation  # noqa: E402
from kbcite.limits import TITLE_MAX  # noqa: E402
from kbcite.server import inbound  # noqa: E402
from kbcite.server.dispatch import Dispatch  # noqa: E402
from kbcite.server.http.app import McpApp  # noqa: E402
from kbcite.server.http.settings import Settings  # noqa: E402
from kbcite.server.pool import StorePool  # noqa: E402
from kbcite.server.calls import Principal, Session  # noqa: E402
from conftest import postgres_schema_url  # noqa: E402
from support.asgi import AsgiClient, hidden_fields  # noqa: E402
from support.cli import run_kb  # noqa: E402

KB, SECRET = "kb", "secret"
FILES = ("a.md", "b.md", "c.md")
MODERN, LEGACY = "2026-07-28", "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}

# The content limit the model writes under: a few dozen lines, so that one growth of an
# article fits and two (a proposal's and a person's save, re-applied together) do not.
CONTENT_LIMIT = 900

# What the checker runs in CI: a bounded budget on each engine, the same examples every run; a
# long run with fresh random examples: KB_HISTORY_EXAMPLES and KB_HISTORY_STEPS, as
# bench/history_model.py sets them, with KB_HISTORY_REPORT naming a file for its counts.
EXAMPLES = int(os.environ.get("KB_HISTORY_EXAMPLES", "0")) or None
STEPS = int(os.environ.get("KB_HISTORY_STEPS", "0")) or None
REPORT = os.environ.get("KB_HISTORY_REPORT")

# While working on a fault: KB_HISTORY_SHRINK=0 reports each one as found, unshrunk.
PHASES = tuple(Phase) if os.environ.get("KB_HISTORY_SHRINK", "1") != "0" else \
    (Phase.explicit, Phase.reuse, Phase.generate)

TOKEN = re.compile(r"qz\d{5}q")
WORDS = ("refund", "invoice", "shipping", "password", "reset", "account", "webhook", "export",
         "billing", "days", "team", "policy")

# Where a cancellation reaches an edit: before it is served, once its transaction holds the
# knowledge base's lock, or once everything is written and only the commit is left.
CANCEL_POINTS = ("before", "locked", "written")


def tokens(text):
    """The line tokens a text holds."""
    return set(TOKEN.findall(text))


def lines_of(content):
    return content.split("\n")


class Texts:
    """Fresh lines and titles, each with a token no other line has."""

    def __init__(self):
        self.count = 0

    def token(self):
        self.count += 1
        return "qz%05dq" % self.count

    def line(self, rng):
        return "%s %s %s" % (self.token(), rng.choice(WORDS), rng.choice(WORDS))

    def title(self, rng):
        return "%s %s" % (rng.choice(WORDS).capitalize(), self.token())

    def body(self, rng, n):
        return "\n".join(self.line(rng) for _ in range(n))

    def changed(self, content, kind, rng):
        """``content`` changed as ``kind`` says: a line replaced, inserted or deleted, many
        lines added, or nothing (``same``), or nothing but its line breaks (``crlf``)."""
        lines = lines_of(content)
        at = rng.randrange(len(lines) + 1)
        if kind == "same":
            return content
        if kind == "crlf":
            return content.replace("\n", "\r\n") + ("\r\n" if rng.random() < 0.5 else "")
        if kind == "replace":
            lines[min(at, len(lines) - 1)] = self.line(rng)
        elif kind == "insert":
            lines.insert(at, self.line(rng))
        elif kind == "delete" and len(lines) > 1:
            del lines[min(at, len(lines) - 1)]
        elif kind == "grow":
            lines[at:at] = [self.line(rng) for _ in range(rng.randrange(10, 22))]
        else:
            lines.append(self.line(rng))
        return "\n".join(lines)


# -- the store under test and its entry points ----------------------------------------------


class World:
    """One store and every way in: the command line, the protocol layer, the pages."""

    def __init__(self, address, root):
        self.address, self.root = address, root
        self.folder = os.path.join(root, "notes")
        self.elsewhere = os.path.join(root, "elsewhere")
        os.makedirs(self.folder)
        self.store = kbcite.KBStore(address, create=True)
        self.store.create_knowledge_base(KB)
        self.store.create_knowledge_base(SECRET)
        self.pool = StorePool(address, readers=2, writers=2)
        self.dispatch = Dispatch(self.pool, b"s" * 32, 600)
        self.app = McpApp(Settings(db=address, signing_secret=b"w" * 32))
        self.sessions = {}
        self.request_id = 0

    def close(self):
        self.app.close()
        self.pool.close()
        self.store.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def kb(self, *argv):
        """``(status, stdout, stderr)`` of ``kb --db ADDRESS ARGV``, run in this process."""
        return run_kb(["--db", self.address, "--actor", "person"] + list(argv))

    def kb_json(self, *argv):
        status, out, err = self.kb("--json", *argv) if argv[0] != "review" else \
            self.kb(argv[0], "--json", *argv[1:])
        return status, (json.loads(out) if out.strip() else None), err

    # -- the protocol layer ---------------------------------------------------------------------

    def session(self, principal):
        """A handshake session of this principal whose client can be asked (form elicitation)."""
        session = self.sessions.get(principal)
        if session is None:
            session = self.sessions[principal] = Session(principal)
            session.protocol_version = LEGACY
            session.client_capabilities = {"elicitation": {"form": {}}}
            session.initialized = True
        return session

    def message(self, method, params, era):
        self.request_id += 1
        params = dict(params)
        if era == "modern":
            params["_meta"] = META
        return {"jsonrpc": "2.0", "id": self.request_id, "method": method, "params": params}

    def call(self, method, params, principal, era, answer="accept", cancel=None):
        """The JSON-RPC response to one request (None where it was cancelled), a person's
        approval question answered ``answer``; ``cancel(call, session)`` is given the call."""
        session = None if era == "modern" else self.session(principal)
        message = self.message(method, params, era)
        asked = []

        def ask(call, question):
            asked.append(question)
            return {"jsonrpc": "2.0", "id": "q", "result": {"action": answer}}
        call, refused = self.dispatch.begin(message, session)
        assert refused is None
        if cancel is not None:
            cancel(call, session)
        outcome = self.dispatch.serve(call, message, inbound.route(message), principal,
                                      session, ask=ask)
        response = outcome.response
        result = (response or {}).get("result") or {}
        if result.get("resultType") == "input_required":
            asked.append(result["inputRequests"])
            again = dict(params, inputResponses={"approve": {"action": answer}},
                         requestState=result["requestState"])
            message = self.message(method, again, era)
            call, refused = self.dispatch.begin(message, session)
            outcome = self.dispatch.serve(call, message, inbound.route(message), principal,
                                          session, ask=ask)
            response = outcome.response
        return response, asked

    def tool(self, name, arguments, principal, era="modern", answer="accept", cancel=None):
        """``(the tool's result, whether it is an error, the questions asked, the raw
        response)``; ``(None, ...)`` where the call was cancelled."""
        response, asked = self.call("tools/call", {"name": name, "arguments": arguments},
                                    principal, era, answer, cancel)
        if response is None:
            return None, None, asked, None
        assert "result" in response, response
        result = response["result"]
        if result.get("isError"):
            return json.loads(result["content"][0]["text"])["error"], True, asked, response
        return result["structuredContent"], False, asked, response


AGENT = {mode: Principal("agent", frozenset({KB}), mode)
         for mode in ("allow", "ask", "review", "deny")}


@contextmanager
def small_content_limit():
    saved = validation.CONTENT_MAX_BYTES
    validation.CONTENT_MAX_BYTES = CONTENT_LIMIT
    try:
        yield
    finally:
        validation.CONTENT_MAX_BYTES = saved


# What the cancellation hooks reach: the step sets ``HOOK.at`` and ``HOOK.cancel``; the
# wrapped functions (installed for the whole test) call it where the step asked.
class Hook:
    at = None
    cancel = None

    @classmethod
    def reach(cls, point):
        if cls.at == point and cls.cancel is not None:
            cancel, cls.cancel = cls.cancel, None
            cancel()


@pytest.fixture
def quick_cli(monkeypatch):
    """The command line's parser made once for the run, not at every ``kb`` command: the model
    runs hundreds of them, and building the parser is most of a small command's time."""
    from kbcite.cli import parser
    monkeypatch.setattr(parser, "build_parser", functools.lru_cache(None)(parser.build_parser))


@pytest.fixture
def hooks(monkeypatch):
    """Wrap the edit's checks (run once the knowledge base is locked) and its write (all
    written, the commit next), so that a step can cancel an edit at either point."""
    checks, write = edits.checks, articles.write

    def locked(*args, **kwargs):
        found = checks(*args, **kwargs)
        Hook.reach("locked")
        return found

    def written(*args, **kwargs):
        done = write(*args, **kwargs)
        Hook.reach("written")
        return done
    monkeypatch.setattr(edits, "checks", locked)
    monkeypatch.setattr(articles, "write", written)
    yield Hook
    Hook.at = Hook.cancel = None


# -- the model --------------------------------------------------------------------------------


class HistoryMachine(RuleBasedStateMachine):
    """A store and the model of what it must hold; ``make_address(root)`` gives each example a
    fresh store."""

    make_address = None

    # Examples run and steps of each rule, over the whole run (KB_HISTORY_REPORT).
    counts = None

    def __init__(self):
        super().__init__()
        if self.counts is not None:
            self.counts["examples"] += 1
        self.root = tempfile.mkdtemp(prefix="kb-history-")
        self.world = World(type(self).make_address(self.root), self.root)
        self.texts = Texts()
        self.rng = random.Random(0)
        self.ids = []            # the articles of KB, in the order the import made them
        self.deleted = set()
        self.files = {}          # file name: its text now
        self.file_base = {}      # file name: the text the file and the store last agreed on
        self.file_of = {}        # article ID: its file's name
        self.versions = {}       # article ID: [(version, title, content, published)] checked
        self.seen = {}           # article ID: every token its versions ever held
        self.made = {}           # article ID: versions the steps reported written
        self.added = {}          # article ID: the tokens this step may bring back
        self.proposals = {}      # proposal ID: the tokens of its own text
        self.edits_made = []     # (arguments, first result) of successful agent edits
        self.secret = set()
        self.copies = 0
        self.web_token = 0

    def teardown(self):
        try:
            problems = self.world.store.audit()
            assert problems == [], problems
        finally:
            self.world.close()

    # -- helpers ---------------------------------------------------------------------------------

    def live(self):
        return [a for a in self.ids if a not in self.deleted]

    def pick(self, index):
        live = self.live()
        return live[index % len(live)] if live else None

    def article(self, article_id):
        return self.world.store.get_article(KB, article_id)

    def history(self, article_id):
        return self.world.store.history(KB, article_id)

    def versions_of(self, article_id):
        """``[(version, title, content, published)]`` of every kept version, oldest first."""
        rows = self.history(article_id)
        texts = self.world.store.version_texts(KB, article_id,
                                               [r["updated_at"] for r in rows if not r["pruned"]])
        return [(r["updated_at"],) + texts[r["updated_at"]] + (r["published"],) for r in rows]

    def snapshot(self):
        """What a refused or cancelled call must leave as it was."""
        store = self.world.store
        return (store.head_sequence(KB), {a: len(self.history(a)) for a in self.live()},
                [(p["proposal_id"], p["state"]) for p in store.proposals.list(
                    KB, states=("pending", "approved", "rejected", "expired"),
                    expire_days=3650)])

    def wrote(self, article_id, count=1, added=()):
        """A step reports ``count`` new versions of an article, which may bring back
        ``added`` tokens."""
        self.made[article_id] = self.made.get(article_id, 0) + count
        self.added.setdefault(article_id, set()).update(added)

    def forbidden(self):
        """Tokens no token of KB may read: the secret knowledge base's, those only a draft
        ever held, and a deleted article's; but never a proposal's own (its agent wrote it,
        and its page shows it, the article gone or not)."""
        shown, hidden = set(), set()
        for versions in self.versions.values():
            for _, title, content, published in versions:
                (shown if published else hidden).update(tokens(title + "\n" + content))
        proposed = set().union(*self.proposals.values()) if self.proposals else set()
        return (hidden - shown - proposed) | self.secret

    def assert_no_leak(self, text, where):
        leaked = tokens(text) & self.forbidden()
        assert not leaked, "%s shows text its reader may not read: %s" % (where,
                                                                          sorted(leaked))

    def current_version(self, article_id):
        return self.article(article_id)["updated_at"]

    def older_version(self, article_id, rng):
        older = [v for v, *_ in self.versions_of(article_id)[:-1]]
        return rng.choice(older) if older else None

    # -- setup -----------------------------------------------------------------------------------

    @initialize(seed=st.integers(0, 2 ** 32 - 1))
    def setup(self, seed):
        self.rng = random.Random(seed)
        for name in FILES:
            text = "# %s\n\n%s\n" % (self.texts.title(self.rng),
                                     self.texts.body(self.rng, self.rng.randrange(3, 7)))
            self._write_file(name, text)
        status, found, err = self.world.kb_json("import", KB, self.world.folder)
        assert status == 0, err
        for action in found["actions"]:
            self.ids.append(action["article_id"])
            self.file_of[action["article_id"]] = action["source"]
            self.file_base[action["source"]] = self.files[action["source"]]
            self.made[action["article_id"]] = 1
        secret = "%s\n%s" % (self.texts.line(self.rng), self.texts.line(self.rng))
        self.secret = tokens(secret)
        self.world.store.create_article(SECRET, "Secret %s" % self.texts.token(), secret)
        self.secret |= tokens(self.world.store.list_articles(SECRET)[0]["title"])
        self.alice = self.world.store.tokens.create("alice", [KB], "allow", review=True)
        self.viewer = self.world.store.tokens.create("viewer", [KB], "deny")
        self.web = AsgiClient(self.world.app)
        assert self.web.sign_in(self.alice) == 303
        self.reader = AsgiClient(self.world.app)
        assert self.reader.sign_in(self.viewer) == 303
        self.web_mode = "allow"

    def _write_file(self, name, text):
        path = os.path.join(self.world.folder, name)
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        self.files[name] = text

    def _read_file(self, name):
        with open(os.path.join(self.world.folder, name), encoding="utf-8", newline="") as fh:
            return fh.read()

    # -- the agent's side ------------------------------------------------------------------------

    @rule(index=st.integers(0, 2), mode=st.sampled_from(["allow", "ask", "review"]),
          era=st.sampled_from(["modern", "legacy"]), answer=st.sampled_from(["accept", "decline"]),
          kind=st.sampled_from(["replace", "insert", "delete", "same", "crlf", "grow",
                                "retitle"]),
          stale=st.booleans())
    def agent_edit(self, index, mode, era, answer, kind, stale):
        article_id = self.pick(index)
        if article_id is None:
            return
        before = self.snapshot()
        now = self.article(article_id)
        read, error, _, _ = self.world.tool("read_knowledge_article", {
            "knowledge_base_id": KB, "article_id": article_id}, AGENT["allow"], era)
        if not now["published"]:
            assert error and read["code"] == "not_found"
            return
        version = read["updated_at"]
        if stale:
            version = self.older_version(article_id, self.rng)
            if version is None:
                return
        content = self.texts.changed(read["content"], "same" if kind == "retitle" else kind,
                                     self.rng)
        arguments = {"knowledge_base_id": KB, "article_id": article_id, "content": content,
                     "expected_version": version, "idempotency_key": uuid.uuid4().hex}
        title = read["title"]
        if kind == "retitle":
            title = arguments["title"] = self.texts.title(self.rng)
        found, error, asked, response = self.world.tool(
            "edit_knowledge_article", arguments, AGENT[mode], era, answer)
        self.assert_no_leak(json.dumps(response), "the edit's answer")
        unchanged = (title, normalized(content)) == (read["title"], normalized(read["content"]))
        too_long = len(content.encode("utf-8")) > CONTENT_LIMIT
        if too_long:  # the arguments are checked first
            assert error and found["code"] == "invalid_argument", found
        elif stale:
            assert error and found["code"] == "version_conflict", found
        elif unchanged:
            # Nothing to write: no version, no proposal, nobody asked; the key keeps the answer.
            assert not error, found
            assert found.get("changed") is False and found["event"] is None, found
            assert found["updated_at"] == read["updated_at"] and not asked, (found, asked)
            self.edits_made.append((arguments, found))
        elif mode == "review":
            assert not error and found["status"] == "proposed", found
            self.proposals[found["proposal_id"]] = tokens(title + "\n" + content)
            return
        elif mode == "ask" and answer == "decline":
            assert error and found["code"] == "write_not_approved", found
        else:
            assert not error and found.get("changed", True), found
            assert found["previous_version"] == read["updated_at"]
            self.wrote(article_id, added=tokens(title + "\n" + content)
                       - tokens(read["title"] + "\n" + read["content"]))
            self.edits_made.append((arguments, found))
            return
        assert self.snapshot() == before

    @precondition(lambda self: self.edits_made)
    @rule(index=st.integers(0, 1000), era=st.sampled_from(["modern", "legacy"]))
    def agent_replay(self, index, era):
        arguments, first = self.edits_made[index % len(self.edits_made)]
        before = self.snapshot()
        found, error, _, _ = self.world.tool("edit_knowledge_article", arguments,
                                             AGENT["allow"], era)
        if error:  # only where the article went away since
            assert found["code"] == "not_found", found
        else:
            assert found["replayed"] is True and found["updated_at"] == first["updated_at"], \
                (found, first)
        assert self.snapshot() == before

    @rule(index=st.integers(0, 2), era=st.sampled_from(["modern", "legacy"]))
    def agent_reads(self, index, era):
        article_id = self.pick(index)
        if article_id is None:
            return
        before = self.snapshot()
        agent = AGENT["deny"]
        answers = []
        now = self.article(article_id)
        words = " ".join(w for w in now["title"].split() if w.isalpha()) or "refund"
        answers.append(self.world.tool("search_knowledge_base", {
            "knowledge_base_id": KB, "query": words + " days"}, agent, era))
        answers.append(self.world.tool("read_knowledge_article", {
            "knowledge_base_id": KB, "article_id": article_id}, agent, era))
        citations = []
        for version, *_ in self.versions_of(article_id):
            citations.append({"knowledge_base_id": KB, "article_id": article_id,
                              "updated_at": version})
            answers.append(self.world.tool("read_knowledge_article", {
                "knowledge_base_id": KB, "article_id": article_id, "version": version},
                agent, era))
        answers.append(self.world.tool("check_citations", {
            "knowledge_base_id": KB, "citations": citations[-50:]}, agent, era))
        answers.append(self.world.tool("poll_resource_events", {
            "resource_type": "knowledge_base", "resource_id": KB}, agent, era))
        for secret in (SECRET,):
            answers.append(self.world.tool("search_knowledge_base", {
                "knowledge_base_id": secret, "query": "secret"}, agent, era))
        response, _ = self.world.call("resources/read", {
            "uri": "kb://%s/articles/%s" % (KB, article_id)}, agent, era)
        for found, error, _, raw in answers:
            self.assert_no_leak(json.dumps(raw), "an agent's tool answer")
        self.assert_no_leak(json.dumps(response), "resources/read")
        assert self.snapshot() == before

    @rule(index=st.integers(0, 2), point=st.sampled_from(CANCEL_POINTS),
          era=st.sampled_from(["modern", "legacy"]))
    def cancelled_edit(self, index, point, era):
        article_id = self.pick(index)
        if article_id is None or not self.article(article_id)["published"]:
            return
        now = self.article(article_id)
        before = self.snapshot()
        arguments = {"knowledge_base_id": KB, "article_id": article_id,
                     "content": self.texts.changed(now["content"], "insert", self.rng),
                     "expected_version": now["updated_at"], "idempotency_key": uuid.uuid4().hex}
        if len(arguments["content"].encode("utf-8")) > CONTENT_LIMIT:
            return  # refused before any cancel could reach it

        def cancel(call, session):
            def stop():
                if session is None:
                    call.cancel()  # 2026-07-28: the client closed the request's stream
                else:
                    session.cancel({"requestId": call.request_id})  # notifications/cancelled
            if point == "before":
                stop()
            else:
                Hook.at, Hook.cancel = point, stop
        try:
            found, error, _, response = self.world.tool("edit_knowledge_article", arguments,
                                                        AGENT["allow"], era, cancel=cancel)
        finally:
            Hook.at = Hook.cancel = None
        assert response is None, "a cancelled edit was answered: %s" % (response,)
        assert self.snapshot() == before, "a cancelled edit (%s) wrote" % point

    # -- the people's side: the command line ------------------------------------------------------

    @rule(index=st.integers(0, 2), kind=st.sampled_from(["replace", "insert", "delete", "same",
                                                         "crlf", "retitle", "grow"]))
    def person_save(self, index, kind):
        article_id = self.pick(index)
        if article_id is None:
            return
        now = self.article(article_id)
        before = self.snapshot()
        content = self.texts.changed(now["content"], "same" if kind == "retitle" else kind,
                                     self.rng)
        title = self.texts.title(self.rng) if kind == "retitle" else now["title"]
        status, found, err = self.world.kb_json("save", KB, article_id, "--content", content,
                                                "--title", title)
        if len(content.encode("utf-8")) > CONTENT_LIMIT:
            assert status != 0 and self.snapshot() == before
            return
        assert status == 0, err
        if (title, normalized(content)) == (now["title"], normalized(now["content"])):
            assert found["updated_at"] == now["updated_at"], found
            assert self.snapshot() == before
        else:
            self.wrote(article_id, added=tokens(title + "\n" + content)
                       - tokens(now["title"] + "\n" + now["content"]))

    @rule(index=st.integers(0, 2), kind=st.sampled_from(["replace", "same", "crlf", "delete"]),
          stale=st.booleans())
    def person_edit(self, index, kind, stale):
        article_id = self.pick(index)
        if article_id is None or not self.article(article_id)["published"]:
            return
        now = self.article(article_id)
        before = self.snapshot()
        version = self.older_version(article_id, self.rng) if stale else now["updated_at"]
        if version is None:
            return
        content = self.texts.changed(now["content"], kind, self.rng)
        status, found, err = self.world.kb_json("edit", KB, article_id, "--expected-version",
                                                version, "--content", content)
        if stale:
            assert status == 3, (status, err)
        elif normalized(content) == normalized(now["content"]):
            assert status == 0 and found.get("changed") is False, (status, found, err)
        else:
            assert status == 0, err
            self.wrote(article_id, added=tokens(content) - tokens(now["content"]))
            return
        assert self.snapshot() == before

    @rule(index=st.integers(0, 2), back=st.integers(0, 5), web=st.booleans())
    def person_revert(self, index, back, web):
        article_id = self.pick(index)
        if article_id is None:
            return
        versions = self.versions_of(article_id)
        to, title, content, shown = versions[max(0, len(versions) - 1 - back)]
        now = self.article(article_id)
        before = self.snapshot()
        unchanged = (title, normalized(content)) == (now["title"], normalized(now["content"]))
        if web:
            if self.web_mode != "allow" or not now["published"]:
                return
            status, _, page = self.web.post("/kb/%s/articles/%s/revert" % (KB, article_id), {
                "csrf": self.csrf(self.web), "to": to, "expected_version": now["updated_at"],
                "idempotency_key": uuid.uuid4().hex})
            if not shown:  # a draft's version: the pages never show it, nor revert to it
                assert status == 404, status
                assert self.snapshot() == before
                return
            if unchanged:
                assert status == 200 and "Nothing changed" in page, status
            else:
                assert status == 303, status
        else:
            status, found, err = self.world.kb_json(
                "revert", KB, article_id, "--to", to, "--expected-version", now["updated_at"])
            assert status == 0, err
        if unchanged:
            assert self.snapshot() == before
        else:
            # A revert brings back what it reverts to: the person asked for that text.
            self.wrote(article_id, added=tokens(title + "\n" + content))

    @rule(index=st.integers(0, 2), action=st.sampled_from(["unpublish", "publish", "draft"]))
    def person_visibility(self, index, action):
        article_id = self.pick(index)
        if article_id is None:
            return
        now = self.article(article_id)
        before = self.snapshot()
        if action == "draft":
            if now["published"]:
                return
            content = self.texts.changed(now["content"], "insert", self.rng)
            status, _, err = self.world.kb("save", KB, article_id, "--content", content)
            if len(content.encode("utf-8")) > CONTENT_LIMIT:
                assert status == 1 and self.snapshot() == before, err
                return
            assert status == 0, err
            self.wrote(article_id, added=tokens(content) - tokens(now["content"]))
            return
        status, _, err = self.world.kb(action, KB, article_id)
        assert status == 0, err
        if now["published"] == (action == "publish"):
            assert self.snapshot() == before
        else:
            self.wrote(article_id)

    @precondition(lambda self: len(self.ids) - len(self.deleted) > 1)
    @rule(index=st.integers(0, 2))
    def person_delete(self, index):
        article_id = self.pick(index)
        status, _, err = self.world.kb("delete", KB, article_id, "--yes")
        assert status == 0, err
        self.deleted.add(article_id)
        # Its texts are gone with it: what only they held, no token may read any more.
        for _, title, content, _ in self.versions.pop(article_id, []):
            self.versions.setdefault("deleted", []).append(
                (None, title, content, False))

    @rule()
    def dump_restore(self):
        path = os.path.join(self.root, "dump-%d.json" % self.copies)
        self.copies += 1
        copy = "copy-%d" % self.copies
        status, _, err = self.world.kb("dump", KB, path)
        assert status == 0, err
        status, _, err = self.world.kb("restore", path, "--as", copy)
        assert status == 0, err
        for article_id in self.live():
            ours = [(r["updated_at"], r["action"], r["sequence"]) for r in
                    self.history(article_id)]
            theirs = [(r["updated_at"], r["action"], r["sequence"]) for r in
                      self.world.store.history(copy, article_id)]
            assert ours == theirs

    # -- the files of the imported folder, and the folder's sync ---------------------------------

    @rule(which=st.integers(0, 2), kind=st.sampled_from(["replace", "insert", "delete",
                                                         "retitle", "rename"]))
    def file_change(self, which, kind):
        names = sorted(self.files)
        name = names[which % len(names)]
        text = self._read_file(name)
        head, _, body = text.partition("\n\n")
        if kind == "retitle":
            self._write_file(name, "# %s\n\n%s" % (self.texts.title(self.rng), body))
            return
        body = self.texts.changed(body.rstrip("\n"), "insert" if kind == "rename" else kind,
                                  self.rng) + "\n"
        if kind == "rename":
            # git mv, and a small edit: git calls it a rename (over 50% similar).
            new = "r%d-%s" % (self.texts.count, name.split("-")[-1])
            os.remove(os.path.join(self.world.folder, name))
            text = self.files.pop(name)
            self.file_base[new] = self.file_base.pop(name, text)
            for article_id, file in list(self.file_of.items()):
                if file == name:
                    self.file_of[article_id] = new
            name = new
        self._write_file(name, "%s\n\n%s" % (head, body))

    def _file_tokens(self, name):
        return tokens(self.files[name])

    def _synced(self, article_id, name):
        """The file and its article agree now: the file's base moves to its text."""
        self.file_base[name] = self._read_file(name)
        self.files[name] = self.file_base[name]
        self.file_of[article_id] = name

    @rule(force=st.booleans())
    def folder_import(self, force):
        before = self.snapshot()
        argv = ["import", KB, self.world.folder] + (["--force"] if force else [])
        status, found, err = self.world.kb_json(*argv)
        assert status in (0, 3), err
        by_file = {a["source"]: a for a in found["actions"]}
        for name in self.files:
            action = by_file.get(name)
            assert action is not None, (name, found)
            kind = action["action"]
            article_id = action.get("article_id")
            if kind == "create":
                # A file the import takes for a new article: a rename it did not see.
                self.ids.append(article_id)
                self.made[article_id] = 1
                self._synced(article_id, name)
                continue
            if article_id in self.deleted:
                continue
            if kind in ("update", "rename"):
                assert self.file_of.get(article_id) == name, (kind, name, self.file_of)
                if action.get("write", kind == "update") and action.get("version") != \
                        action.get("current_version"):
                    added = self._file_tokens(name) if force else \
                        self._file_tokens(name) - tokens(self.file_base[name])
                    self.wrote(article_id, added=added)
                self._synced(article_id, name)
            elif kind == "unchanged":
                self._synced(article_id, name)
        if status == 3:
            assert any(a["action"] == "conflict" for a in found["actions"])
        if not any(a["action"] in ("create", "update", "rename") for a in found["actions"]):
            assert self.snapshot()[1] == before[1]

    @rule(elsewhere=st.booleans())
    def folder_export(self, elsewhere):
        before = self.snapshot()
        target = self.world.elsewhere if elsewhere else self.world.folder
        status, found, err = self.world.kb_json("export", KB, target, "--edited")
        if elsewhere:
            # Not the folder the knowledge base was imported from: refused, nothing written.
            assert status == 2, (status, err)
            assert not os.path.exists(self.world.elsewhere) or \
                not os.listdir(self.world.elsewhere)
            return
        assert status in (0, 3), err
        for action in found["actions"]:
            if action["action"] == "write":
                name = action["path"]
                self._synced(action["article_id"], name)
        assert self.snapshot() == before

    @rule(which=st.integers(0, 2))
    def folder_merge(self, which):
        pairs = [(a, f) for a, f in self.file_of.items() if a not in self.deleted
                 and f in self.files]
        if not pairs:
            return
        self._merge(*sorted(pairs)[which % len(pairs)])

    def _merge(self, article_id, name):
        """``kb merge`` of the article and its file; a conflict is given up (--abort)."""
        path = os.path.join(self.world.folder, name)
        text = self._read_file(name)
        added = tokens(text) - tokens(self.file_base[name])
        before = self.snapshot()
        status, found, err = self.world.kb_json("merge", KB, article_id, "--file", path)
        if status == 1 and "must be at most" in err:
            # The merge of the two sides is past the limit: refused, nothing written.
            assert self.snapshot() == before and self._read_file(name) == text, err
            return
        if status == 3:
            # Overlapping changes, marked in the file: the person gives up on this merge.
            status, _, err = self.world.kb("merge", KB, article_id, "--file", path, "--abort")
            assert status == 0, err
            assert self._read_file(name) == text
            return
        assert status == 0, (status, err)
        if found.get("event") is not None or found.get("version") != found.get("store_version"):
            self.wrote(article_id, added=added)
        self._synced(article_id, name)

    # -- proposals ---------------------------------------------------------------------------------

    def pending(self):
        return self.world.store.proposals.list(KB, expire_days=3650)

    @precondition(lambda self: self.proposals)
    @rule(which=st.integers(0, 20), how=st.sampled_from(["approve", "rebase", "reject",
                                                         "edit"]))
    def review_decide(self, which, how):
        pending = self.pending()
        if not pending:
            return
        self._decide(pending[which % len(pending)], how)

    def _decide(self, proposal, how):
        """A person's decision of a pending proposal: approve (plain or rebased), reject,
        or edit it on its page then approve."""
        number, article_id = proposal["proposal_id"], proposal["article_id"]
        before = self.snapshot()
        if how == "reject":
            status, _, err = self.world.kb("review", "reject", KB, str(number), "--reason",
                                           "not now")
            assert status == 0, err
            return
        if how == "edit":
            self._edit_then_approve(number, article_id, before)
            return
        argv = ["review", "approve", KB, str(number)] + (["--rebase"] if how == "rebase" else [])
        status, found, err = self.world.kb_json(*argv)
        if status != 0:
            # Stale (exit 3), overlapping, past the limit or gone: nothing was written.
            assert status in (1, 2, 3), (status, err)
            assert self.snapshot() == before, err
            return
        if found["version"] != found["previous_version"]:
            self.wrote(article_id, added=self.proposals[number] - self._base_tokens(proposal))

    def _base_tokens(self, proposal):
        texts = self.world.store.version_texts(KB, proposal["article_id"],
                                               [proposal["base_version"]])
        title, content = texts[proposal["base_version"]]
        return tokens(title + "\n" + content)

    def _edit_then_approve(self, number, article_id, before):
        if self.web_mode == "deny":
            return
        status, _, page = self.web.get("/kb/%s/review/%d/edit" % (KB, number))
        if status != 200:  # the article is gone, or this token may not review
            assert self.snapshot() == before
            return
        fields = hidden_fields(page)
        title = re.search(r'name="title" value="([^"]*)"', page)
        content = re.search(r'<textarea[^>]*name="content"[^>]*>\n?(.*?)</textarea>', page, re.S)
        title, content = unescape(title.group(1)), unescape(content.group(1))
        edited = self.texts.changed(content, "replace", self.rng)
        now = self.article(article_id)
        status, _, page = self.web.post("/kb/%s/review/%d/edit" % (KB, number), {
            "csrf": fields["csrf"], "title": title, "content": edited.replace("\n", "\r\n"),
            "expected_version": fields["expected_version"]})
        if status in (400, 409):
            assert self.snapshot() == before
            return
        assert status == 303, status
        # The person's own text: every line they typed is theirs to bring.
        self.wrote(article_id, added=tokens(title + "\n" + edited)
                   - tokens(now["title"] + "\n" + now["content"]))

    @rule()
    def review_expire(self):
        later = datetime.now(timezone.utc) + timedelta(days=30)
        with kbcite.KBStore(self.world.address, clock=lambda: later) as store:
            store.proposals.expire(KB, expire_days=1)

    # -- the pages ---------------------------------------------------------------------------------

    def csrf(self, client):
        _, _, page = client.get("/kb/%s" % KB)
        return hidden_fields(page).get("csrf")

    @rule(index=st.integers(0, 2), kind=st.sampled_from(["replace", "same", "crlf", "delete",
                                                         "retitle"]))
    def web_edit(self, index, kind):
        article_id = self.pick(index)
        if article_id is None:
            return
        now = self.article(article_id)
        before = self.snapshot()
        status, _, page = self.web.get("/kb/%s/articles/%s/edit" % (KB, article_id))
        if not now["published"] or self.web_mode != "allow":
            assert status in (403, 404), status
            assert self.snapshot() == before
            return
        fields = hidden_fields(page)
        content = self.texts.changed(now["content"], "same" if kind == "retitle" else kind,
                                     self.rng)
        title = self.texts.title(self.rng) if kind == "retitle" else now["title"]
        # A browser sends a textarea's lines with CRLF.
        sent = content.replace("\r\n", "\n").replace("\n", "\r\n")
        status, _, page = self.web.post("/kb/%s/articles/%s/edit" % (KB, article_id), {
            "csrf": fields["csrf"], "title": title, "content": sent,
            "expected_version": fields["expected_version"],
            "idempotency_key": fields["idempotency_key"], "summary": ""})
        if (title, normalized(content)) == (now["title"], normalized(now["content"])):
            assert status == 200 and "Nothing changed" in page, status
            assert self.snapshot() == before
            return
        assert status == 303, (status, page[:300])
        self.wrote(article_id, added=tokens(title + "\n" + content)
                   - tokens(now["title"] + "\n" + now["content"]))

    @rule(index=st.integers(0, 2))
    def web_views(self, index):
        article_id = self.pick(index)
        if article_id is None:
            return
        before = self.snapshot()
        pages = ["/kb/%s" % KB, "/kb/%s/articles/%s" % (KB, article_id),
                 "/kb/%s/articles/%s/history" % (KB, article_id),
                 "/kb/%s/review" % KB, "/kb/%s/events" % KB]
        versions = self.versions_of(article_id)
        if len(versions) > 1:
            pages.append("/kb/%s/articles/%s/diff?from=%s&to=%s" % (
                KB, article_id, versions[0][0], versions[-1][0]))
        pages += ["/kb/%s/review/%d" % (KB, number) for number in sorted(self.proposals)[-4:]]
        for client in (self.web, self.reader):
            for path in pages:
                status, _, page = client.get(path)
                assert status in (200, 404, 403), (path, status)
                self.assert_no_leak(page, "page %s" % path)
        assert self.snapshot() == before

    @rule(writes=st.sampled_from(["allow", "ask", "deny"]))
    def grant_change(self, writes):
        store = self.world.store
        self.web_token += 1
        old = self.web.cookies.copy()
        store.tokens.revoke("alice" if self.web_token == 1 else "alice-%d" % (self.web_token - 1))
        status, _, _ = self.web.get("/kb/%s" % KB)
        assert status == 303, "a revoked token's session still reads the pages"
        self.web.cookies = old
        token = store.tokens.create("alice-%d" % self.web_token, [KB], writes, review=True)
        assert self.web.sign_in(token) == 303
        self.web_mode = writes

    # -- the ways teams chain them -------------------------------------------------------------
    #
    # A rule is picked at random, so a sequence of four particular steps on one article is
    # rare in a short run. These rules run a few steps of the ones above in the order teams
    # run them, on one article, the invariants checked after each step as after any rule.

    def _then(self, step, *args):
        step(*args)
        self.check_store()

    @rule(index=st.integers(0, 2), web=st.booleans(), era=st.sampled_from(["modern", "legacy"]))
    def team_round_trip(self, index, web, era):
        """A docs-as-code week: an agent's edit goes back to its file (the team commits it),
        a person reverts it in the store, the next export and a merge of the file follow."""
        article_id = self.pick(index)
        if article_id is None or article_id not in self.file_of or \
                not self.article(article_id)["published"]:
            return
        live = self.live()
        at = live.index(article_id)
        self._then(self.agent_edit, at, "allow", era, "accept", "insert", False)
        self._then(self.folder_export, False)
        self._then(self.person_revert, at, 1, web)
        self._then(self.folder_export, False)
        name = self.file_of[article_id]
        if name in self.files:
            self._then(self._merge, article_id, name)

    @rule(index=st.integers(0, 2))
    def withdraw_and_rewrite(self, index):
        """A person withdraws a page to rewrite it: unpublished, a draft saved in it, while
        its readers (and its proposals' reviewers) look at the pages."""
        article_id = self.pick(index)
        if article_id is None:
            return
        at = self.live().index(article_id)
        if self.article(article_id)["published"]:
            self._then(self.person_visibility, at, "unpublish")
        self._then(self.person_visibility, at, "draft")
        self._then(self.web_views, at)

    @rule(index=st.integers(0, 2), kind=st.sampled_from(["grow", "insert", "replace"]),
          theirs=st.sampled_from(["grow", "insert", "replace", "same"]),
          how=st.sampled_from(["approve", "rebase", "edit"]),
          era=st.sampled_from(["modern", "legacy"]))
    def proposal_meets_a_save(self, index, kind, theirs, how, era):
        """An agent's proposal waits while a person saves the article; then it is decided."""
        article_id = self.pick(index)
        if article_id is None or not self.article(article_id)["published"]:
            return
        at = self.live().index(article_id)
        waiting = {p["proposal_id"] for p in self.pending()}
        self._then(self.agent_edit, at, "review", era, "accept", kind, False)
        made = [p for p in self.pending() if p["proposal_id"] not in waiting]
        if not made:
            return
        self._then(self.person_save, at, theirs)
        [proposal] = [p for p in self.pending() if p["proposal_id"] == made[0]["proposal_id"]]
        self._then(self._decide, proposal, how)

    # -- the invariants ------------------------------------------------------------------------------

    def _counted(self):
        """Count the step that just ran (the rule's name is hypothesis's own record)."""
        if self.counts is not None:
            self.counts["steps"] += 1

    @invariant()
    def check_store(self):
        self._counted()
        if not self.ids:
            return
        store = self.world.store
        sequences = {}
        for article_id in self.live():
            versions = self.versions_of(article_id)
            rows = self.history(article_id)
            # Every version differs from the one before it.
            for (v1, t1, c1, p1), (v2, t2, c2, p2) in zip(versions, versions[1:]):
                assert (t1, normalized(c1), p1) != (t2, normalized(c2), p2), \
                    "%s: version %s is the same as %s" % (article_id, v2, v1)
            # The history grew by exactly the writes the steps reported.
            assert len(rows) == self.made.get(article_id, 0), (
                "%s: %d versions, %d writes reported: %s"
                % (article_id, len(rows), self.made.get(article_id, 0),
                   [(r["action"], r["actor"]) for r in rows]))
            # Within the limits, whatever path wrote it.
            for row, (_, title, content, _) in zip(rows, versions):
                assert len(content.encode("utf-8")) <= CONTENT_LIMIT, (
                    "%s: version %s holds %d bytes, past the limit of %d"
                    % (article_id, row["updated_at"], len(content.encode("utf-8")),
                       CONTENT_LIMIT))
                assert len(title) <= TITLE_MAX
            # What the store removed comes back only through a step that adds it.
            checked = self.versions.get(article_id, [])
            seen = self.seen.setdefault(article_id, set())
            for i in range(len(checked), len(versions)):
                now = tokens(versions[i][1] + "\n" + versions[i][2])
                before = tokens(versions[i - 1][1] + "\n" + versions[i - 1][2]) if i else set()
                back = (now - before) & seen - self.added.get(article_id, set())
                assert not back, ("%s: version %s brings back %s, which the store removed, "
                                  "by a step that did not add it" % (article_id,
                                                                     versions[i][0],
                                                                     sorted(back)))
                seen |= now
            self.versions[article_id] = versions
            for row in rows:
                if row["sequence"] is not None:
                    sequences[row["sequence"]] = (article_id, row["event"], row["updated_at"])
        self.added = {}
        # The event log: gapless, and each article event is a version of the history.
        events, after = [], 0
        while True:
            page = store.events(KB, after, 100)
            events += page["events"]
            after = page["next_after_sequence"]
            if not page["has_more"]:
                break
        assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
        for event in events:
            # A deleted article's history went with it (its deletion's own event, if it was
            # published, is the last of its log).
            if event["type"].startswith("article.") and event["type"] != "article.deleted" \
                    and event["article_id"] not in self.deleted:
                assert sequences.pop(event["sequence"], None) == (
                    event["article_id"], event["type"], event["updated_at"]), event
        assert not sequences, "versions whose events are missing: %s" % sequences
        # Every decided proposal has its event, every approved one its version.
        by_sequence = {e["sequence"]: e for e in events}
        for proposal in store.proposals.list(KB, states=("pending", "approved", "rejected",
                                                         "expired"), expire_days=3650):
            if proposal["state"] == "pending":
                continue
            shown = store.proposals.show(KB, proposal["proposal_id"], expire_days=3650)
            decided = [e for e in events if e.get("proposal_id") == proposal["proposal_id"]
                       and e["type"] == "proposal.%s" % proposal["state"]]
            assert len(decided) == 1, (proposal, decided)
            if proposal["state"] == "approved" and proposal["article_id"] not in self.deleted:
                made = [r for r in self.history(proposal["article_id"])
                        if r["updated_at"] == shown["version"]]
                assert len(made) == 1, proposal
        del by_sequence


def normalized(text):
    """Text as an import compares it: line breaks unified, blank lines at either end dropped."""
    return "\n".join(text.splitlines()).strip("\n")


# -- the runs ----------------------------------------------------------------------------------


def run_machine(engine, make_address, examples, steps):
    counts = {"engine": engine, "examples": 0, "steps": 0}
    machine = type("Machine", (HistoryMachine,), {"make_address": staticmethod(make_address),
                                                  "counts": counts})
    started = time.monotonic()
    try:
        with small_content_limit():
            run_state_machine_as_test(machine, settings=settings(
                max_examples=EXAMPLES or examples, stateful_step_count=STEPS or steps,
                deadline=None, database=None, derandomize=EXAMPLES is None,
                suppress_health_check=list(HealthCheck), print_blob=True, phases=PHASES))
    finally:
        if REPORT:
            counts["seconds"] = round(time.monotonic() - started, 1)
            with open(REPORT, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(counts) + "\n")


@pytest.mark.slow
def test_history_on_sqlite(hooks, quick_cli):
    run_machine("sqlite", lambda root: os.path.join(root, "kb.db"), examples=200, steps=25)


@pytest.mark.slow
def test_history_on_postgresql(hooks, quick_cli, postgres):
    run_machine("postgresql", lambda root: postgres_schema_url(postgres[1]), examples=40,
                steps=25)
