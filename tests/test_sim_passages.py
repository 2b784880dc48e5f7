"""The seventh table: the passage an answer relied on, found from its snippet and read; each
way of finding out whether it still stands, against the schedule; what each costs; and the
closed forms beside the counts.
"""

import math
import random

import pytest

from kbcite import changes
from kbcite.search.snippets import make_snippet
from kbcite.search.text import query_terms
from kbcite.sim import day as sim_day
from kbcite.sim.agent import PASSAGE_STRATEGIES, Agent
from kbcite.sim.cli import main
from kbcite.sim.day import fill_store
from kbcite.sim.expectations import (expected_by_hour, expected_checks, expected_passages,
                                     p_passage_survives, p_touched)
from kbcite.sim.model import (CHECK_STEP, HOUR_US, KB_ID, QUESTION_STEP, SAVE_MIX, SAVE_STEP,
                              Change, Config, Save, SimClock)
from kbcite.sim.oracle import Oracle
from kbcite.sim.passages import (Passage, change_bytes, locate, verdict_of_check,
                                 verdict_of_read)
from kbcite.sim.plan import draw_plan, make_body, people_saves, rewrite
from kbcite.sim.runner import run, run_part
from kbcite.store import KBStore

SMALL = Config(articles=60, questions=24, saves=60, hours=4)

CONTENT = "\n\n".join([
    "Open the billing page and find the plan you pay for.",
    "To rotate keys, open Security and choose the key to replace.",
    "Keys rotated here stop working within an hour everywhere.",
    "Write to support with the request ID if it still fails.",
])


def snippet(content, query):
    return make_snippet(content, query_terms(query))


# -- where the passage is ----------------------------------------------------------------------


def test_the_passage_is_the_paragraph_of_the_first_marked_match():
    s = snippet(CONTENT, "rotate keys")
    assert s.count("**") >= 4
    found = locate(s, CONTENT)
    # The window's first mark is "rotate" of the second paragraph, not "Keys" of the third.
    assert found == Passage(1, CONTENT.split("\n\n")[1], True)


def test_a_window_that_starts_in_one_paragraph_and_matches_in_the_next():
    s = snippet(CONTENT, "support request")
    assert s.startswith("\u2026")  # the window starts after the content's first word
    found = locate(s, CONTENT)
    assert found.index == 3 and found.marked
    head = "\u2026hour everywhere. Write to **support** with the"
    assert locate(head + "\u2026", CONTENT).index == 3


def test_a_snippet_without_a_match_points_at_its_windows_first_paragraph():
    s = snippet(CONTENT, "absent words")
    assert "**" not in s
    assert locate(s, CONTENT) == Passage(0, CONTENT.split("\n\n")[0], False)


def test_a_snippet_of_other_text_has_no_passage():
    assert locate("To **rotate** passwords, open Security", CONTENT) is None
    assert locate("", CONTENT) is None


def test_the_first_run_of_the_windows_words_wins_and_a_cut_word_still_matches():
    repeated = "Keys expire.\n\nKeys expire.\n\nOther text."
    assert locate("**Keys** expire.", repeated).index == 0
    assert locate("**Other** te", repeated).index == 2  # the scan's window cut the last word


def test_on_text_of_unique_words_the_passage_is_exactly_the_first_marks_paragraph():
    """Every word of the text is unique, so where the first marked word stands is known."""
    rng = random.Random(8)
    for case in range(300):
        words = ["w%d" % i for i in range(400)]
        paragraphs, at = [], 0
        for _ in range(3 + int(rng.random() * 5)):
            size = 3 + int(rng.random() * 40)
            paragraphs.append(" ".join(words[at:at + size]))
            at += size
        content = "\n\n".join(paragraphs)
        asked = ["w%d" % int(rng.random() * 450) for _ in range(1 + int(rng.random() * 3))]
        s = snippet(content, " ".join(asked))
        marked = [w.replace("**", "") for w in s.replace("\u2026", " ").split() if "**" in w]
        first = marked[0] if marked else s.lstrip("\u2026").split()[0]
        want = next(i for i, p in enumerate(paragraphs) if first in p.split())
        assert locate(s, content) == Passage(want, paragraphs[want], bool(marked)), (case, s)


def test_every_sim_body_and_query_gives_a_paragraph_holding_the_first_mark():
    rng = random.Random(8)
    plan = draw_plan(2, Config(articles=120))
    for _ in range(400):
        a = min(int(rng.random() * len(plan.bodies)), len(plan.bodies) - 1)
        body = make_body(rng, *plan.subjects[a]) if rng.random() < 0.5 else plan.bodies[a]
        query = plan.titles[min(int(rng.random() * len(plan.titles)), len(plan.titles) - 1)]
        s = snippet(body, query.lower())
        found = locate(s, body)
        assert found is not None and found.text == body.split("\n\n")[found.index], (s, body)
        if found.marked:
            word = next(w for w in s.split() if "**" in w).replace("**", "")
            assert word.strip(".,") in found.text


# -- what became of it -------------------------------------------------------------------------


class Cited:
    updated_at, title = "v1", "Rotate keys"


def test_verdicts_from_a_read_and_from_a_check():
    paragraphs = CONTENT.split("\n\n")
    passage = Passage(1, paragraphs[1], True)
    other = CONTENT.replace(paragraphs[2], "Keys now stop working at once.")
    mine = CONTENT.replace(paragraphs[1], "Open Security, then Keys.")
    for title, content, want in (("Rotate keys", other, "intact"),
                                 ("Rotate keys", mine, "rewritten"),
                                 ("Rotate API keys", other, "retitled_intact"),
                                 ("Rotate API keys", mine, "retitled_rewritten")):
        article = {"updated_at": "v2", "title": title, "content": content}
        assert verdict_of_read(Cited, passage, article) == want
        change = changes.changes("Rotate keys", CONTENT, title, content)
        result = {"status": "changed", "changes": change}
        assert verdict_of_check(passage, CONTENT, result) == want
    assert verdict_of_read(Cited, passage, None) == "gone"
    assert verdict_of_read(Cited, passage, {"updated_at": "v1"}) == "fresh"
    assert verdict_of_check(passage, CONTENT, {"status": "current", "changes": None}) == "fresh"
    assert verdict_of_check(passage, CONTENT, {"status": "gone", "changes": None}) == "gone"
    # Nothing to replay: the caller reads the article instead.
    assert verdict_of_check(passage, CONTENT, {"status": "changed", "changes": None}) is None
    cut = dict(changes.changes("a", CONTENT, "a", mine, limit=10))
    assert cut["truncated"]
    assert verdict_of_check(passage, CONTENT, {"status": "changed", "changes": cut}) is None
    # A passage moved by an insertion above it still stands: anywhere counts.
    moved = "New first paragraph.\n\n" + CONTENT
    assert verdict_of_read(Cited, passage, {"updated_at": "v2", "title": "Rotate keys",
                                            "content": moved}) == "intact"


def test_the_bytes_of_a_change_are_its_paragraphs_and_titles():
    change = changes.changes("Ab", "x\n\nyz", "Cd", "x\n\nuvw\n\nq")
    assert change_bytes(change) == len("yz") + len("uvw") + len("q") + len("Ab") + len("Cd")
    assert change_bytes(None) == 0
    assert change_bytes(changes.changes("é", "é", "é", "é")) == 0


# -- the oracle's paragraphs -------------------------------------------------------------------


def test_the_oracles_paragraphs_are_the_stores_at_the_end_of_the_day(tmp_path):
    plan = draw_plan(3, SMALL)
    run_part(3, SMALL, "zipf", db_dir=str(tmp_path))
    oracle = Oracle(plan.titles, people_saves(plan, False), plan.bodies, plan.subjects)
    end = (SMALL.hours * HOUR_US, CHECK_STEP, SMALL.hours)
    with KBStore() as fresh:
        ids = fill_store(fresh, plan)
    rewritten = 0
    with KBStore(str(tmp_path / "seed3-zipf.db")) as store:
        for a, article_id in enumerate(ids):
            content = store.get_article(KB_ID, article_id)["content"]
            assert "\n\n".join(oracle.paragraphs_at(a, end)) == content
            rewritten += content != plan.bodies[a]
    assert rewritten > 10


def test_the_oracles_passage_on_a_hand_made_schedule():
    body = "p0\n\np1\n\np2\n\np3"

    def change(t, kind, index, title="Reset a"):
        # text_u[0] picks the paragraph among four: index / 4 plus a little.
        save = Save(t, kind, 0, 0, ((index + 0.5) / 4,) + (0.3,) * 8)
        return Change((t, SAVE_STEP, t), 0, save, title, "Reset")

    saves = [change(10, "content", 1), change(20, "content_title", 3, "Sync a"),
             change(30, "unpublish", 0, "Sync a")]
    oracle = Oracle(["Reset a"], saves, [body], [("Reset", "invoices")])
    new1 = rewrite(saves[0].save, 4, "invoices", "Reset")
    assert new1[0] == 1 and oracle.paragraphs_at(0, (15, CHECK_STEP, 0))[1] == new1[1]

    def read(t):
        return (t, QUESTION_STEP, 0)

    def at(t):
        return (t, CHECK_STEP, 0)

    assert oracle.passage(0, read(5), at(8), 1) == "fresh"
    assert oracle.passage(0, read(5), at(15), 1) == "rewritten"
    assert oracle.passage(0, read(5), at(15), 2) == "intact"
    assert oracle.passage(0, read(15), at(25), 3) == "retitled_rewritten"
    assert oracle.passage(0, read(5), at(25), 0) == "retitled_intact"
    assert oracle.passage(0, read(5), at(35), 0) == "gone"


# -- the agent's four ways on a hand-made timeline ---------------------------------------------


class Timeline:
    """Two articles (one of four paragraphs), an agent, and a clock moved by hand."""

    def __init__(self):
        self.clock = SimClock()
        self.store = KBStore(clock=self.clock)
        self.store.create_knowledge_base(KB_ID)
        self.id = self.store.create_article(KB_ID, "Rotate keys", CONTENT)
        self.other = self.store.create_article(KB_ID, "Rotate invoices", "Plans.\n\nPrices.")
        self.agent = Agent(self.store)

    def at(self, minutes):
        self.clock.t_us = minutes * 60 * 1000000

    def rewrite(self, index, text, title=None):
        paragraphs = self.store.get_article(KB_ID, self.id)["content"].split("\n\n")
        paragraphs[index] = text
        self.store.save_article(KB_ID, self.id, content="\n\n".join(paragraphs), title=title)

    def check(self):
        agent = self.agent
        agent.check_reread()
        agent.check_poll()
        agent.check_citations_all()
        agent.check_citations_polled()
        return {name: agent.verdicts[name][0] for name in PASSAGE_STRATEGIES}


@pytest.fixture
def timeline():
    t = Timeline()
    yield t
    t.store.close()


def all_say(verdicts, want):
    return verdicts == {name: want for name in PASSAGE_STRATEGIES}


def test_four_ways_follow_one_passage_through_the_day(timeline):
    timeline.at(1)
    timeline.agent.answer("rotate keys")
    assert timeline.agent.citations[0].article_id == timeline.id
    assert timeline.agent.passages[0].index == 1
    assert all_say(timeline.check(), "fresh")
    timeline.at(10)
    timeline.rewrite(3, "Support answers within a day.")
    assert all_say(timeline.check(), "intact")
    timeline.at(20)
    timeline.rewrite(0, "Billing moved.", title="Rotate API keys")
    assert all_say(timeline.check(), "retitled_intact")
    timeline.at(30)
    timeline.rewrite(1, "Keys rotate themselves now.")
    assert all_say(timeline.check(), "retitled_rewritten")
    timeline.at(40)
    timeline.store.unpublish(KB_ID, timeline.id)
    assert all_say(timeline.check(), "gone")


def test_what_each_way_pays(timeline):
    timeline.at(1)
    timeline.agent.answer("rotate keys")  # cites both articles
    assert len(timeline.agent.citations) == 2
    timeline.check()
    timeline.at(10)
    timeline.rewrite(3, "Support answers within a day.")
    timeline.check()
    cost = timeline.agent.passage_costs()
    change = changes.changes("Rotate keys", CONTENT, "Rotate keys",
                             timeline.store.get_article(KB_ID, timeline.id)["content"])
    assert cost["check_all"] == {"calls": 2, "check_calls": 2, "citations_sent": 4,
                                 "articles_read": 0, "bytes_read": change_bytes(change)}
    # The first poll named nothing; the second named one article, cited once.
    pages = timeline.agent.cost["poll"]["pages"]
    assert cost["poll_check"] == {"calls": pages + 1, "check_calls": 1, "citations_sent": 1,
                                  "articles_read": 0, "bytes_read": change_bytes(change)}
    assert cost["reread"]["calls"] == 4 and cost["poll_reread"]["articles_read"] == 1


def test_check_citations_goes_a_hundred_distinct_citations_a_call():
    config = Config(articles=200, questions=150, saves=40, hours=2)
    report = run([5], config, processes=1)
    assert report["check_mismatches"] == []
    distinct = [row["distinct"] for row in report["staleness"]["zipf"]]
    assert max(distinct) > 100
    cost = report["passages"]["zipf"]["cost"]["check_all"]
    assert cost["check_calls"] == sum(math.ceil(d / 100) for d in distinct)
    assert cost["citations_sent"] == sum(distinct)


# -- failure is loud ---------------------------------------------------------------------------


def test_a_store_whose_changes_hide_the_rewrite_fails_the_run(monkeypatch, capsys):
    """check_citations that reports a change without its hunks: the passage looks intact."""
    class HidesHunks(KBStore):
        def call_tool(self, name, arguments, *, granted):
            result = super().call_tool(name, arguments, granted=granted)
            if name == "check_citations":
                for answer in result["results"]:
                    if answer["changes"]:
                        answer["changes"] = dict(answer["changes"], hunks=[])
            return result

    monkeypatch.setattr(sim_day, "KBStore", HidesHunks)
    status = main(["--seeds", "4", "--articles", "60", "--questions", "24", "--saves", "60",
                   "--hours", "4", "--processes", "1"])
    assert status == 1
    err = capsys.readouterr().err
    assert "is rewritten by the schedule, intact by check_all" in err
    assert "by reread" not in err and "by poll_reread" not in err


def test_a_store_whose_search_shows_another_text_fails_the_run(monkeypatch, capsys):
    """Snippets not of the content read: the agent finds no passage, and says so."""
    class OddSnippets(KBStore):
        def call_tool(self, name, arguments, *, granted):
            result = super().call_tool(name, arguments, granted=granted)
            if name == "search_knowledge_base":
                for hit in result["results"]:
                    hit["snippet"] = "**Nothing** of the kind"
            return result

    monkeypatch.setattr(sim_day, "KBStore", OddSnippets)
    status = main(["--seeds", "4", "--articles", "60", "--questions", "24", "--saves", "60",
                   "--hours", "4", "--processes", "1"])
    assert status == 1
    assert "gave no passage" in capsys.readouterr().err


def test_a_store_whose_saves_write_other_text_fails_the_run(monkeypatch, capsys):
    """Saves stored with a space before each later paragraph: the words are the same, so the
    snippet still finds its passage, but not the text the plan's people wrote."""
    class Spaces(KBStore):
        def save_article(self, kb_id, article_id, **changes):
            if changes.get("content"):
                changes["content"] = changes["content"].replace("\n\n", "\n\n ")
            return super().save_article(kb_id, article_id, **changes)

    monkeypatch.setattr(sim_day, "KBStore", Spaces)
    status = main(["--seeds", "4", "--articles", "60", "--questions", "24", "--saves", "60",
                   "--hours", "4", "--processes", "1"])
    assert status == 1
    assert "its answer's passage, is" in capsys.readouterr().err


# -- the closed forms --------------------------------------------------------------------------


def test_a_passage_survives_n_saves_with_chance_k_minus_1_over_k_to_the_n():
    assert p_passage_survives(4, 0) == 1.0
    assert p_passage_survives(4, 2) == 9 / 16
    assert p_passage_survives(1, 1) == 0.0


def test_the_models_verdicts_add_up_and_match_a_drawn_day():
    q, saves, day_us, k = 0.05, 60, 2 * HOUR_US, 4
    read = (HOUR_US // 2, QUESTION_STEP, 0)
    rows = expected_passages([q], [(0, read)], [k], saves, day_us, 2)
    verdicts = ("intact", "rewritten", "retitled_intact", "retitled_rewritten", "gone")
    for row in rows:
        assert abs(sum(row[v] for v in verdicts) - row["stale"]) < 1e-3
    w = (2 * HOUR_US - read[0]) / day_us
    assert abs(rows[-1]["stale"] - p_touched(q, w, saves)) < 1e-4
    # The same day drawn: each save picks the article with chance q w, is of a kind of the
    # mix, and rewrites a paragraph drawn uniformly; the passage is paragraph 0.
    rng, n, counts = random.Random(1), 20000, dict.fromkeys(verdicts + ("fresh",), 0)
    for _ in range(n):
        kinds = []
        for _ in range(saves):
            if rng.random() < q * w:
                u = rng.random()
                kinds.append("unpublish" if u >= 0.95 else "content_title" if u >= 0.85
                             else "content")
                if kinds[-1] != "unpublish" and int(rng.random() * k) == 0:
                    kinds.append("rewrite")
        if not kinds:
            counts["fresh"] += 1
        elif "unpublish" in kinds:
            counts["gone"] += 1
        else:
            counts[("retitled_" if "content_title" in kinds else "")
                   + ("rewritten" if "rewrite" in kinds else "intact")] += 1
    assert [share for _, share in SAVE_MIX] == [0.85, 0.10, 0.05]
    for v in verdicts:
        p = rows[-1][v]
        assert abs(counts[v] / n - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-3, (v, p)


def test_the_hourly_expectations_end_where_the_end_of_day_ones_do():
    q = [0.01 * (1 + a % 7) for a in range(40)]
    day_us, saves, hours = 4 * HOUR_US, 60, 4
    reads = [(a, (int(i * 0.9 * day_us / 40), QUESTION_STEP, i // 2)) for i, a in
             enumerate(range(40))]
    answers = [[i, i + 1] for i in range(0, len(reads), 2)]
    hourly = expected_by_hour(q, reads, answers, saves, day_us, hours)
    end = expected_checks(q, [(a, step[0]) for a, step in reads], answers,
                          list(range(len(reads))), saves, day_us)
    assert abs(hourly[-1]["stale"] - end["stale"]) < 1e-3
    assert abs(hourly[-1]["answers_with_stale"] - end["answers_with_stale"]) < 1e-3
    assert [r["stale"] for r in hourly] == sorted(r["stale"] for r in hourly)
    model = expected_passages(q, reads, [4] * len(reads), saves, day_us, hours)
    assert [r["stale"] for r in model] == [r["stale"] for r in hourly]
