"""Reliability: a stateful random test against a reference model, and writers killed mid-work.

The model test drives thousands of seeded, mixed operations (people's creates, saves, publish
and unpublish; agent searches, reads, edits with good, stale and respelled versions, replays,
reused keys, polls; a clock that moves forward and sometimes back) and checks after every step
that the store's answers, versions and event log are what a plain in-memory model predicts.

The kill test runs several writer processes on one database file, one knowledge base each,
kills them with SIGKILL at random moments, round after round, and checks the file after every
round: integrity, audit, gapless logs, every article at its last event, no half-written edit.
"""

import random
import re
import signal
import sqlite3
import time

import pytest

from kbcite import (IdempotencyKeyReused, InvalidArgument, KBStore, NotFound, VersionConflict,
                    format_version)
from kbcite.versions import datetime_to_us
from support.workers import Worker, check_consistent

# Thousands of random operations, and writers killed again and again.
pytestmark = pytest.mark.slow

KBS = ("kb-a", "kb-b")
UNGRANTED = "kb-c"  # exists, but the agent is not granted it: it must look missing
WORDS = ("reset", "password", "invoice", "export", "webhook", "token", "Zürich", "naïve",
         "日本語", "emoji🙂", "AND", "OR", "NOT", "NEAR(", '"quoted"', "star*", "col:on",
         "minus-sign", "back\\slash")


# -- the reference model ---------------------------------------------------------------------


class Article:
    """What the model knows of one article."""

    def __init__(self, article_id, token, title, content, published, version_us):
        self.article_id, self.token = article_id, token
        self.title, self.content, self.published = title, content, published
        self.version_us = version_us
        self.versions = [version_us]

    @property
    def updated_at(self):
        return format_version(self.version_us)


class Model:
    """Knowledge bases, articles, event logs and idempotency keys as plain Python data."""

    def __init__(self):
        self.kbs = {kb: {"articles": {}, "events": [], "created": 0} for kb in KBS + (UNGRANTED,)}
        self.keys = {}  # (kb, key) -> (arguments without the key, first result)

    def next_version(self, art, now_us):
        # The store's strong versions: at least one microsecond past the previous one.
        return now_us if art is None else max(now_us, art.version_us + 1)

    def event(self, kb, type_, art):
        events = self.kbs[kb]["events"]
        event = {"sequence": len(events) + 1, "type": type_, "article_id": art.article_id,
                 "updated_at": art.updated_at}
        events.append(event)
        return event

    @staticmethod
    def changes(art, content=None, title=None, published=None):
        """Whether a write would change the article: a write that changes nothing makes no
        version and no event (line breaks aside; the walk's texts have none to differ by)."""
        return (art.content if content is None else content,
                art.title if title is None else title,
                art.published if published is None else published) != (
            art.content, art.title, art.published)

    def write(self, kb, art, now_us, content=None, title=None, published=None):
        if not self.changes(art, content, title, published):
            return None
        was = art.published
        art.version_us = self.next_version(art, now_us)
        art.versions.append(art.version_us)
        if content is not None:
            art.content = content
        if title is not None:
            art.title = title
        if published is not None:
            art.published = published
        if was and art.published:
            return self.event(kb, "article.updated", art)
        if art.published:
            return self.event(kb, "article.published", art)
        if was:
            return self.event(kb, "article.unpublished", art)
        return None


# -- the random walk ---------------------------------------------------------------------------


class Walk:
    """One seeded run of random operations on a store, each checked against the model."""

    def __init__(self, store, clock, seed):
        self.store, self.clock = store, clock
        self.rng = random.Random(seed)
        self.model = Model()
        self.granted = frozenset(KBS)
        self.successful_edits = []  # (kb, arguments, first result)
        self.failed_keys = []  # (kb, key) of edits that failed: free for a new payload
        self.counts = {}
        self.key_number = 0
        for kb in KBS + (UNGRANTED,):
            store.create_knowledge_base(kb)

    # Helpers

    def now_us(self):
        return datetime_to_us(self.clock())

    def call(self, name, **arguments):
        return self.store.call_tool(name, arguments, granted=self.granted)

    def text(self, words):
        return " ".join(self.rng.choice(WORDS) for _ in range(words))

    def content_for(self, art_token):
        # Every version keeps the article's unique token, so a search for it finds exactly it.
        return "%s\n\n%s %s" % (self.text(self.rng.randint(3, 30)), art_token,
                                self.text(self.rng.randint(0, 5)))

    def pick_article(self, kb, published=None):
        arts = [a for a in self.model.kbs[kb]["articles"].values()
                if published is None or a.published == published]
        return self.rng.choice(arts) if arts else None

    def new_key(self):
        self.key_number += 1
        return "key-%d" % self.key_number

    def edit_args(self, kb, art, version, key=None, **extra):
        args = {"knowledge_base_id": kb, "article_id": art.article_id,
                "content": self.content_for(art.token) + " edit",
                "expected_version": version, "idempotency_key": key or self.new_key()}
        args.update(extra)
        return args

    # Operations: each returns the knowledge base whose log it may have touched, or None.

    def op_create(self):
        kb = self.rng.choice(KBS + (UNGRANTED,))
        k = self.model.kbs[kb]
        token = "uniq%s%04d" % (kb[-1], k["created"] + 1)
        title, content = self.text(3), self.content_for(token)
        published = self.rng.random() < 0.8
        article_id = self.store.create_article(kb, title, content, published=published)
        k["created"] += 1
        assert article_id == "art-%06d" % k["created"]
        art = Article(article_id, token, title, content, published,
                      self.model.next_version(None, self.now_us()))
        k["articles"][article_id] = art
        if published:
            self.model.event(kb, "article.published", art)
        return kb, art

    def op_save(self):
        kb = self.rng.choice(KBS)
        art = self.pick_article(kb)
        if art is None:
            return self.op_create()
        content = self.content_for(art.token) if self.rng.random() < 0.8 else None
        title = self.text(2) if content is None or self.rng.random() < 0.2 else None
        updated_at = self.store.save_article(kb, art.article_id, content=content, title=title)
        self.model.write(kb, art, self.now_us(), content=content, title=title)
        assert updated_at == art.updated_at
        return kb, art

    def op_publish(self, published):
        kb = self.rng.choice(KBS)
        art = self.pick_article(kb)
        if art is None:
            return None
        do = self.store.publish if published else self.store.unpublish
        updated_at = do(kb, art.article_id)
        if art.published != published:
            self.model.write(kb, art, self.now_us(), published=published)
        assert updated_at == art.updated_at  # unchanged when it already was so
        return kb, art

    def op_search_token(self):
        kb = self.rng.choice(KBS)
        art = self.pick_article(kb)
        if art is None:
            return None
        found = self.call("search_knowledge_base", knowledge_base_id=kb, query=art.token)
        hits = [(h["article_id"], h["title"], h["updated_at"]) for h in found["results"]]
        expected = [(art.article_id, art.title, art.updated_at)] if art.published else []
        assert hits == expected, (art.article_id, art.published, hits)
        assert found["head_sequence"] == len(self.model.kbs[kb]["events"])
        return None

    def op_search_words(self):
        kb = self.rng.choice(KBS)
        limit = self.rng.randint(1, 20)
        found = self.call("search_knowledge_base", knowledge_base_id=kb,
                          query=self.text(self.rng.randint(1, 4)), limit=limit)
        assert len(found["results"]) <= limit
        articles = self.model.kbs[kb]["articles"]
        for hit in found["results"]:
            art = articles[hit["article_id"]]
            assert art.published, "a draft leaked into search: %s" % hit["article_id"]
            assert (hit["title"], hit["updated_at"]) == (art.title, art.updated_at)
            assert hit["citation"] == {"knowledge_base_id": kb, "article_id": art.article_id,
                                       "updated_at": art.updated_at}
        return None

    def op_read(self):
        kb = self.rng.choice(KBS)
        art = self.pick_article(kb)
        if art is None or self.rng.random() < 0.05:
            with pytest.raises(NotFound):
                self.call("read_knowledge_article", knowledge_base_id=kb, article_id="art-999999")
            return None
        if not art.published:
            with pytest.raises(NotFound):
                self.call("read_knowledge_article", knowledge_base_id=kb,
                          article_id=art.article_id)
            return None
        read = self.call("read_knowledge_article", knowledge_base_id=kb,
                         article_id=art.article_id)
        assert (read["title"], read["content"], read["updated_at"]) == (
            art.title, art.content, art.updated_at)
        assert read["head_sequence"] == len(self.model.kbs[kb]["events"])
        return None

    def op_ungranted(self):
        kb = self.rng.choice((UNGRANTED, "kb-missing"))
        art = self.pick_article(UNGRANTED)
        article_id = art.article_id if art else "art-000001"
        calls = [("read_knowledge_article", {"knowledge_base_id": kb, "article_id": article_id}),
                 ("search_knowledge_base", {"knowledge_base_id": kb, "query": "password"}),
                 ("poll_resource_events", {"resource_type": "knowledge_base",
                                           "resource_id": kb}),
                 ("edit_knowledge_article", {"knowledge_base_id": kb, "article_id": article_id,
                                             "content": "x", "idempotency_key": self.new_key(),
                                             "expected_version": art.updated_at if art else
                                             "2026-11-08T09:00:00Z"})]
        name, arguments = self.rng.choice(calls)
        with pytest.raises(NotFound) as caught:
            self.store.call_tool(name, arguments, granted=self.granted)
        assert "not granted" in caught.value.message
        return None

    def op_edit_good(self):
        kb = self.rng.choice(KBS)
        art = self.pick_article(kb, published=True)
        if art is None:
            return None
        version = art.updated_at
        if self.rng.random() < 0.2:
            version = version.replace("Z", "+00:00")  # another spelling of the same instant
        key = None
        if self.failed_keys and self.rng.random() < 0.3:
            # A key whose only use failed was never recorded: a new change may take it.
            failed_kb, key = self.failed_keys.pop(self.rng.randrange(len(self.failed_keys)))
            if failed_kb != kb:
                key = None
        extra = {"title": self.text(2)} if self.rng.random() < 0.2 else {}
        args = self.edit_args(kb, art, version, key, **extra)
        previous = art.updated_at
        result = self.call("edit_knowledge_article", **args)
        changed = self.model.changes(art, args["content"], extra.get("title"))
        event = self.model.write(kb, art, self.now_us(), content=args["content"],
                                 title=extra.get("title"))
        assert result == {
            "knowledge_base_id": kb, "article_id": art.article_id, "title": art.title,
            "updated_at": art.updated_at, "previous_version": previous,
            "citation": {"knowledge_base_id": kb, "article_id": art.article_id,
                         "updated_at": art.updated_at},
            "event": event, "replayed": False, "changed": changed}
        self.model.keys[(kb, args["idempotency_key"])] = (args, result)
        self.successful_edits.append((kb, args, result))
        return kb, art

    def op_edit_stale(self):
        kb = self.rng.choice(KBS)
        art = self.pick_article(kb, published=True)
        if art is None or len(art.versions) < 2:
            return None
        stale = format_version(self.rng.choice(art.versions[:-1]))
        args = self.edit_args(kb, art, stale)
        with pytest.raises(VersionConflict) as caught:
            self.call("edit_knowledge_article", **args)
        assert caught.value.details["current_version"] == art.updated_at
        self.failed_keys.append((kb, args["idempotency_key"]))
        return None

    def op_edit_draft(self):
        kb = self.rng.choice(KBS)
        art = self.pick_article(kb, published=False)
        if art is None:
            return None
        args = self.edit_args(kb, art, art.updated_at)
        with pytest.raises(NotFound):
            self.call("edit_knowledge_article", **args)
        self.failed_keys.append((kb, args["idempotency_key"]))
        return None

    def op_replay(self):
        if not self.successful_edits:
            return None
        kb, args, first = self.rng.choice(self.successful_edits)
        again = self.call("edit_knowledge_article", **args)
        assert again == dict(first, replayed=True)
        return kb, None

    def op_key_reused(self):
        if not self.successful_edits:
            return None
        kb, args, _ = self.rng.choice(self.successful_edits)
        art = self.model.kbs[kb]["articles"][args["article_id"]]
        changed = dict(args, content=args["content"] + " but different")
        if self.rng.random() < 0.5 and art.published:
            changed["expected_version"] = art.updated_at
        with pytest.raises(IdempotencyKeyReused):
            self.call("edit_knowledge_article", **changed)
        other = [k for k in KBS if k != kb]
        target = self.pick_article(other[0], published=True)
        if target is not None and (other[0], args["idempotency_key"]) not in self.model.keys:
            # Keys are scoped to a knowledge base: the same key elsewhere is a fresh key.
            fresh = self.edit_args(other[0], target, target.updated_at,
                                   args["idempotency_key"])
            result = self.call("edit_knowledge_article", **fresh)
            assert result["replayed"] is False
            self.model.write(other[0], target, self.now_us(), content=fresh["content"])
            assert result["updated_at"] == target.updated_at
            self.model.keys[(other[0], fresh["idempotency_key"])] = (fresh, result)
            self.successful_edits.append((other[0], fresh, result))
            return other[0], target
        return None

    def op_poll(self):
        kb = self.rng.choice(KBS)
        events = self.model.kbs[kb]["events"]
        head = len(events)
        after = self.rng.randint(0, head)
        limit = self.rng.randint(1, 100)
        page = self.call("poll_resource_events", resource_type="knowledge_base",
                         resource_id=kb, after_sequence=after, limit=limit)
        expected = events[after:after + limit]
        assert page["events"] == expected
        cursor = expected[-1]["sequence"] if expected else after
        assert (page["next_after_sequence"], page["has_more"], page["head_sequence"]) == (
            cursor, cursor < head, head)
        with pytest.raises(InvalidArgument):
            self.call("poll_resource_events", resource_type="knowledge_base", resource_id=kb,
                      after_sequence=head + 1)
        return None

    def op_clock(self):
        # Mostly forward, sometimes a step back: versions must still strictly increase.
        if self.rng.random() < 0.1:
            self.clock.advance(seconds=-self.rng.randint(1, 3))
        else:
            self.clock.advance(microseconds=self.rng.choice((0, 1, 7, 1000, 2500000,
                                                             10000000)))
        return None

    OPS = (("create", 6), ("save", 10), ("publish", 3), ("unpublish", 3), ("search_token", 8),
           ("search_words", 5), ("read", 10), ("ungranted", 2), ("edit_good", 12),
           ("edit_stale", 6), ("edit_draft", 2), ("replay", 6), ("key_reused", 3), ("poll", 8),
           ("clock", 16))

    def step(self):
        """One random operation, then the checks that follow every step."""
        names = [name for name, weight in self.OPS for _ in range(weight)]
        name = self.rng.choice(names)
        heads = {kb: self.store.head_sequence(kb) for kb in KBS + (UNGRANTED,)}
        if name == "publish":
            touched = self.op_publish(True)
        elif name == "unpublish":
            touched = self.op_publish(False)
        else:
            touched = getattr(self, "op_" + name)()
        self.counts[name] = self.counts.get(name, 0) + 1
        self.check_step(heads, touched)

    def check_step(self, heads, touched):
        """The log grew by exactly the model's new events; the touched article is as modelled."""
        for kb, before in heads.items():
            events = self.model.kbs[kb]["events"]
            assert self.store.head_sequence(kb) == len(events)
            if len(events) > before:
                page = self.store.call_tool("poll_resource_events", {
                    "resource_type": "knowledge_base", "resource_id": kb,
                    "after_sequence": before}, granted={kb})
                assert page["events"] == events[before:before + 100]
        if touched and touched[1] is not None:
            kb, art = touched
            row = self.store.get_article(kb, art.article_id)
            assert (row["title"], row["content"], bool(row["published"]), row["updated_at"]) \
                == (art.title, art.content, art.published, art.updated_at)
            assert art.versions == sorted(set(art.versions)), "versions must strictly increase"

    def check_all(self):
        """Every article and every event of every knowledge base, and the store's own audit."""
        for kb, k in self.model.kbs.items():
            listed = {a["article_id"]: (a["title"], bool(a["published"]), a["updated_at"])
                      for a in self.store.list_articles(kb)}
            assert listed == {aid: (a.title, a.published, a.updated_at)
                              for aid, a in k["articles"].items()}
            events, after = [], 0
            while True:
                page = self.store.call_tool("poll_resource_events", {
                    "resource_type": "knowledge_base", "resource_id": kb,
                    "after_sequence": after}, granted={kb})
                events += page["events"]
                after = page["next_after_sequence"]
                if not page["has_more"]:
                    break
            assert events == k["events"]
        assert self.store.audit() == []


# Bounded in count and in time: a fast machine walks up to STEPS, a loaded one stops at the
# time limit, but never before MIN_STEPS (so the walk's reach does not depend on the load).
# PostgreSQL answers over a socket, a few milliseconds a step: each seed walks a shorter way.
STEPS = 5000
MIN_STEPS = 500
TIME_LIMIT_S = {"sqlite": 20.0, "postgresql": 6.0}


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_random_operations_agree_with_the_model(store, clock, seed, engine):
    walk = Walk(store, clock, seed)
    deadline = time.monotonic() + TIME_LIMIT_S[engine]
    for i in range(STEPS):
        walk.step()
        if i % 250 == 249:
            walk.check_all()
        if i + 1 >= MIN_STEPS and time.monotonic() > deadline:
            break
    walk.check_all()
    assert i + 1 >= MIN_STEPS
    # the walk really did exercise every kind of operation
    assert set(walk.counts) == {name for name, _ in Walk.OPS}
    assert len(walk.successful_edits) > 20


def test_random_operations_on_a_file_database(file_store, clock, db_path):
    walk = Walk(file_store, clock, 4)
    for i in range(600):
        walk.step()
    walk.check_all()
    # A fresh connection sees the same committed state.
    with KBStore(db_path, clock=clock) as again:
        walk.store = again
        walk.check_all()


def test_the_walk_is_reproducible(clock):
    """The same seed makes the same operations and the same store, step for step."""
    dumps, start = [], clock.now
    for _ in range(2):
        clock.set(start)
        with KBStore(":memory:", clock=clock) as store:
            walk = Walk(store, clock, 99)
            for _ in range(300):
                walk.step()
            dumps.append((walk.counts, store._db.dump()))
    assert dumps[0] == dumps[1]


# -- SIGKILL of writers in the middle of work ---------------------------------------------------

LINE = re.compile(r"^w\d+ op \d+$")
KILL_ROUNDS = 8
WRITERS = 3


def check_file(db_path, kbs, filler):
    """The whole file is consistent; returns {kb: (events, {article_id: article})}."""
    conn = sqlite3.connect(db_path)
    try:
        for (pk,) in conn.execute("SELECT pk FROM knowledge_bases").fetchall():
            # FTS5's own check of its index structures (rank 0: not against the shared table).
            conn.execute("INSERT INTO fts_{0} (fts_{0}, rank) VALUES ('integrity-check', 0)"
                         .format(pk))
    finally:
        conn.close()
    with KBStore(db_path) as store:
        assert store.audit() == []  # integrity_check and every invariant, all the kbs at once
    out = {}
    for kb in kbs:
        # gapless sequences, every article at its last event.
        events, articles = check_consistent(db_path, kb, audit=False)
        with KBStore(db_path) as store:
            for article_id, art in articles.items():
                # no half edit: the filler intact, then whole lines only, each once
                head, _, tail = art["content"].partition("\n")
                assert head == filler
                lines = tail.split("\n") if tail else []
                assert all(LINE.match(l) for l in lines), lines
                assert len(lines) == len(set(lines))
                if art["published"]:
                    found = store.call_tool("read_knowledge_article", {
                        "knowledge_base_id": kb, "article_id": article_id}, granted={kb})
                    assert found["updated_at"] == art["updated_at"]
        out[kb] = (events, articles)
    return out


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_writers_killed_again_and_again_leave_a_consistent_file(tmp_path):
    db = str(tmp_path / "kill.db")
    kbs = ["kill-%d" % i for i in range(WRITERS)]
    # 8,000 distinct words make each write re-index a lot (about 4 ms here), so a writer spends
    # most of its time inside transactions and most kills land in one.
    filler = " ".join("word%d" % i for i in range(8000))
    with KBStore(db, create=True) as store:
        for kb in kbs:
            store.create_knowledge_base(kb)
            for i in range(3):
                store.create_article(kb, "Streamed %d" % i, filler)
    rng = random.Random(20261108)
    reported = {kb: [] for kb in kbs}
    for round_ in range(KILL_ROUNDS):
        # One writer per knowledge base, all on the one file, so they contend for its lock.
        workers = [Worker("stream", db, kb, "w%d" % (round_ * WRITERS + i))
                   for i, kb in enumerate(kbs)]
        try:
            for worker in workers:
                assert worker.read() == "ready"
            for kb, worker in zip(kbs, workers):
                for _ in range(rng.randint(1, 6)):
                    reported[kb].append(worker.read())
            for worker in workers:
                time.sleep(rng.random() * 0.03)
                worker.proc.send_signal(signal.SIGKILL)
            for kb, worker in zip(kbs, workers):
                worker.proc.wait(timeout=60)
                assert worker.proc.returncode == -signal.SIGKILL
                # what it printed before dying was committed too
                reported[kb].extend(worker.drain())
        finally:
            for worker in workers:
                worker.stop()
        state = check_file(db, kbs, filler)

    kinds = {"edit": "article.updated", "save": "article.updated",
             "publish": "article.published", "unpublish": "article.unpublished"}
    for kb in kbs:
        events, articles = state[kb]
        logged = {(e["article_id"], e["updated_at"]): e["type"] for e in events}
        lines = {aid: art["content"].split("\n")[1:] for aid, art in articles.items()}
        for r in reported[kb]:
            # nothing a writer saw committed was lost
            assert logged.get((r["article_id"], r["updated_at"])) == kinds[r["op"]], r
            if "line" in r:
                assert r["line"] in lines[r["article_id"]]
        reported_lines = {r["line"] for r in reported[kb] if "line" in r}
        unreported = [l for found in lines.values() for l in found if l not in reported_lines]
        assert len(unreported) <= KILL_ROUNDS  # at most the write in flight at each kill
    with KBStore(db) as store:  # and the file is still writable
        for kb in kbs:
            art = store.list_articles(kb)[0]
            if not art["published"]:
                store.publish(kb, art["article_id"])
            store.save_article(kb, art["article_id"], content=filler + "\nw999 op 0")
    check_file(db, kbs, filler)
