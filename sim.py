"""A simulated support day that reproduces, and checks, the article's measurements.

For each seed: 400 articles, 120 questions and 300 people's saves over 8 hours, popularity
Zipf (s = 0.9) over one ranking for both questions and saves. A scripted agent answers each
question through the four tools (search, read the top two hits, keep both citations) and, every
hour, checks all citations given so far three ways: by title only, by re-reading every cited
article, and by polling the event log and re-reading only what changed. The truth comes from
an oracle that never calls the store: the plan's schedule of saves and the times the agent read
what it cited. The database's rows, re-read and poll must all agree with it at every check,
and every edit must get the verdict the schedule implies, or the run fails. A control day
spreads the same saves uniformly; an edit experiment sends each answer's first citation back
as ``expected_version`` after a delay, and replays every successful edit. A save to a withdrawn
article keeps it withdrawn: nobody publishes during the day. Beside each headline figure the
report prints its closed-form expectation, from the model's parameters and what the agent
cited when; ``--popularity`` and ``--questions-from`` vary two modelling choices (see
docs/simulation.md and ``bench/sensitivity.py``).

    python sim.py --seeds 1-5             # the article's run: tables on stdout
    python sim.py --seeds 1-5 --json out.json --per-seed

All randomness comes from one ``random.Random(seed)`` per seed, drawn only through
``.random()``, so the same arguments give the same counts on every Python from 3.9 on.
"""

import argparse
import bisect
import json
import multiprocessing
import os
import random
import re
import sqlite3
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone

import kb_store

# The day the live tool list was fetched; the article's simulated support day starts then.
DAY_START = datetime(2026, 11, 8, 9, 0, 0, tzinfo=timezone.utc)
HOUR_US = 3600 * 1000000
KB_ID = "support"

# The article's mix of people's saves: content only, content and title, unpublish.
SAVE_MIX = (("content", 0.85), ("content_title", 0.10), ("unpublish", 0.05))
# The saves that take a citation out of the title-only check's reach: a retitle or an unpublish.
UNPUBLISH_SHARE = dict(SAVE_MIX)["unpublish"]
TITLE_VISIBLE_SHARE = dict(SAVE_MIX)["content_title"] + UNPUBLISH_SHARE

# 10 s, 10 min, 1 h, 4 h: from "a few seconds old" to "hours old"; answer i gets delay i mod 4.
DEFAULT_DELAYS = (10, 600, 3600, 14400)

# The order of steps that fall on the same microsecond: people's saves, then questions, then
# the agent's edits, then the hourly checks. A step's place in the day is (t_us, rank, index).
SAVE_STEP, QUESTION_STEP, EDIT_STEP, CHECK_STEP = 0, 1, 2, 3

# The agent cites the top two hits of each search, as the article's scripted agent does, and
# asks search for just those. Looking a title up again it asks for two as well: with one, a
# longer title holding every word of the cited one can outrank it and raise a false alarm.
CITATIONS_PER_ANSWER = 2
TITLE_LOOKUP_HITS = 2

# The modelling choices the sensitivity table varies; the first of each is the default. Popularity
# independent of titles is the article's "one ranking of the articles"; a question in its
# article's title words is the agent's likeliest query.
POPULARITY = ("independent", "topical")
QUESTIONS_FROM = ("title", "paraphrase")

# Upper bounds on the command line, so a typo cannot ask for a day that never ends. The bound on
# articles, the distinct titles the vocabulary makes, is MAX_ARTICLES below the vocabulary.
MAX_QUESTIONS, MAX_SAVES, MAX_HOURS = 1000000, 1000000, 24 * 7

# The article's own figures (five seeds summed), for the arithmetic beside the side-by-side;
# "four out of five" answers of 600 is 480.
ARTICLE = {"citations": 1200, "answers": 600, "stale_zipf": 369, "answers_stale_zipf": 480,
           "stale_control": 167, "answers_stale_control": 280}

# A support team's vocabulary: titles are action + subject + audience (+ surface when the
# three alone run out), bodies are sentences about the subject, so real search ranks them.
ACTIONS = (
    "Reset", "Configure", "Troubleshoot", "Export", "Import", "Set up", "Cancel", "Upgrade",
    "Migrate", "Enable", "Disable", "Rotate", "Recover", "Merge", "Share", "Archive", "Audit",
    "Schedule", "Verify", "Update", "Delete", "Restore", "Sync", "Transfer",
)
SUBJECTS = (
    "passwords", "two-factor codes", "invoices", "API keys", "webhooks", "SSO login",
    "user roles", "audit logs", "data exports", "billing plans", "team workspaces",
    "mobile notifications", "calendar sync", "CSV imports", "email templates", "refunds",
    "payment methods", "custom domains", "access tokens", "shared folders", "guest accounts",
    "support tickets", "chat widgets", "knowledge articles", "usage reports", "tax settings",
    "seat licenses", "IP allowlists", "retention policies", "backup snapshots",
    "integration apps", "SAML certificates", "recovery codes", "time zones",
    "language settings", "storage quotas", "project archives", "approval workflows",
    "contact lists", "sandbox environments", "rate limits", "push tokens", "login alerts",
    "device sessions", "purchase orders", "credit notes", "usage alerts", "report schedules",
    "field mappings", "status pages",
)
AUDIENCES = (
    "for admins", "for new users", "for guest users", "on iOS", "on Android", "on Windows",
    "on macOS", "in the EU region", "after a plan change", "with Okta", "with Google Workspace",
    "with Microsoft Entra", "for contractors", "for enterprise teams", "on the free plan",
    "during a trial", "after an outage", "for resellers", "in the browser", "from the CLI",
    "for billing owners", "in shared inboxes", "for suspended accounts", "in bulk",
    "for partner workspaces", "before renewal", "across regions", "with SCIM",
    "for read-only members", "behind a proxy",
)
SURFACES = (
    "in Settings", "in the Admin console", "in the mobile app", "in the desktop app",
    "through the API", "in Billing", "in the Security tab", "in Reports",
)
# Body sentences: the opener names the article's action and subject; the rest is generic
# support prose kept clear of title words, so a title's words find their own articles.
OPENERS = (
    "Most customers ask how to {a} {s} when", "Our agents hear about {s} mostly when",
    "To {a} {s} safely, check that", "You can {a} {s} whenever", "If {s} fail,",
    "A common mistake with {s} is forgetting that", "People who {a} {s} should know that",
    "The fastest way to {a} {s} is when",
)
MIDDLES = (
    "the owner has confirmed the request in writing",
    "the nightly job has finished",
    "the cache still holds an older copy",
    "the subscription covers the feature for everyone in it",
    "several people edit the same record at once",
    "the edit appears in the history within a minute",
    "a reviewer approves the request first",
    "the contract names the country where records are kept",
    "the identity provider sends the right group claims",
    "the job runs overnight",
    "the credential has not expired or been revoked",
    "the charge is still open and not yet settled",
    "phones receive the fresh value at next sign-in",
    "messages are delayed while the queue drains",
)
CLOSERS = (
    "Write to us with the request ID if it still fails.",
    "It takes effect immediately for everyone.",
    "Keep a copy of the old value until you have tested its replacement.",
    "Everything is recorded, so you can undo it within thirty days.",
    "Look at the service health first if several customers mention it at once.",
    "Ask the owner if the option is greyed out.",
    "Large organisations may need a few minutes until it shows.",
    "The related guides below give the steps elsewhere.",
)
# Every distinct title: action + subject + audience, bare or with one of the surfaces. Drawing
# that many at random takes a few seconds; one more could never be drawn.
MAX_ARTICLES = len(ACTIONS) * len(SUBJECTS) * len(AUDIENCES) * (1 + len(SURFACES))


@dataclass(frozen=True)
class Config:
    """The knobs of one simulated day."""

    articles: int = 400
    questions: int = 120
    saves: int = 300
    hours: int = 8
    zipf: float = 0.9
    delays: tuple = DEFAULT_DELAYS
    popularity: str = "independent"
    questions_from: str = "title"


@dataclass
class Save:
    """One person's save: when, what kind, which article under Zipf and under uniform."""

    t_us: int
    kind: str
    zipf_article: int
    uniform_article: int
    text_u: tuple


@dataclass
class Question:
    """One customer question: when, and which article it is really about."""

    t_us: int
    target: int


@dataclass
class Plan:
    """Everything random about one seed's day, drawn once so every run of it is the same day."""

    seed: int
    titles: list
    bodies: list
    subjects: list
    ranking: list
    questions: list
    saves: list


@dataclass(frozen=True)
class Change:
    """One person's save as the schedule has it: its place, its article, the title it leaves."""

    step: tuple
    article: int
    save: Save
    title: str
    action: str


@dataclass
class Start:
    """A seed's day before it starts: its plan, and its database image with the articles' IDs
    (``None`` where each run builds its own)."""

    plan: Plan
    image: object
    article_ids: list


@dataclass
class Citation:
    """A citation the agent handed out, with the title it saw (for the title-only check)."""

    answer: int
    article_id: str
    updated_at: str
    title: str

    @property
    def key(self):
        """The distinct citation: ``(knowledge_base_id, article_id, updated_at)``."""
        return (KB_ID, self.article_id, self.updated_at)


class SimClock:
    """The simulated clock handed to the store: the current step's time, set by the runner."""

    def __init__(self):
        self.t_us = 0

    def __call__(self):
        return DAY_START + timedelta(microseconds=self.t_us)


# -- drawing the day ---------------------------------------------------------------------------


def pick(seq, u):
    """The element of ``seq`` that a uniform ``u`` in [0, 1) selects."""
    return seq[min(int(u * len(seq)), len(seq) - 1)]


def shuffled(rng, items):
    """A Fisher-Yates shuffle drawing only ``rng.random()`` (stable across Python versions)."""
    items = list(items)
    for i in range(len(items) - 1, 0, -1):
        j = min(int(rng.random() * (i + 1)), i)
        items[i], items[j] = items[j], items[i]
    return items


def zipf_cumulative(n, s):
    """Cumulative Zipf weights ``1/r**s`` for ranks 1..n, normalised to end at 1."""
    total, cumulative = 0.0, []
    for rank in range(1, n + 1):
        total += 1.0 / rank ** s
        cumulative.append(total)
    return [c / total for c in cumulative]


def draw_rank(cumulative, u):
    """The 0-based rank that ``u`` falls in (binary search over the cumulative weights)."""
    lo, hi = 0, len(cumulative) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if u < cumulative[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def draw_kind(mix, u):
    """The name of ``(name, share)`` pairs ``mix`` whose share ``u`` (in [0, 1)) falls in."""
    for name, share in mix:
        if u < share:
            return name
        u -= share
    return mix[-1][0]


def top_share(cumulative, k):
    """The probability mass of the top ``k`` ranks."""
    return cumulative[min(k, len(cumulative)) - 1]


def make_sentence(subject, action, u):
    """One body sentence about ``subject`` from three uniforms."""
    opener = pick(OPENERS, u[0]).format(s=subject, a=action.lower())
    return "%s %s. %s" % (opener, pick(MIDDLES, u[1]), pick(CLOSERS, u[2]))


def make_paragraph(subject, action, u):
    """A paragraph of two sentences about ``subject`` from six uniforms."""
    return "%s %s" % (make_sentence(subject, action, u[0:3]),
                      make_sentence(subject, action, u[3:6]))


def make_titles(rng, n):
    """``n`` distinct titles with their subjects, drawn from the vocabulary."""
    seen, titles, subjects = set(), [], []
    while len(titles) < n:
        action, subject, audience = (pick(ACTIONS, rng.random()), pick(SUBJECTS, rng.random()),
                                     pick(AUDIENCES, rng.random()))
        title = "%s %s %s" % (action, subject, audience)
        if title in seen:
            title = "%s %s" % (title, pick(SURFACES, rng.random()))
            if title in seen:
                continue
        seen.add(title)
        titles.append(title)
        subjects.append((action, subject))
    return titles, subjects


def make_body(rng, action, subject):
    """An article body: three to five paragraphs, mostly about its own subject."""
    paragraphs = []
    for i in range(3 + int(rng.random() * 3)):
        # One paragraph in four mentions a neighbouring subject, as real help articles do.
        about = subject if i == 0 or rng.random() >= 0.25 else pick(SUBJECTS, rng.random())
        paragraphs.append(make_paragraph(about, action, [rng.random() for _ in range(6)]))
    return "\n\n".join(paragraphs)


def topical_ranking(ranking, subjects):
    """The ranking with each subject's articles moved onto consecutive ranks.

    Subjects take the order of their best-ranked article and keep their articles' order, so
    no randomness is drawn: a seed's questions and saves are the same draws either way, and
    the top ranks keep their Zipf share.
    """
    order, members = [], {}
    for article in ranking:
        subject = subjects[article][1]
        if subject not in members:
            members[subject] = []
            order.append(subject)
        members[subject].append(article)
    return [article for subject in order for article in members[subject]]


def draw_plan(seed, config):
    """Draw one seed's whole day: corpus, ranking, questions and saves, in a fixed order."""
    rng = random.Random(seed)
    titles, subjects = make_titles(rng, config.articles)
    bodies = [make_body(rng, a, s) for a, s in subjects]
    ranking = shuffled(rng, range(config.articles))
    if config.popularity == "topical":
        ranking = topical_ranking(ranking, subjects)
    cumulative = zipf_cumulative(config.articles, config.zipf)
    day_us = config.hours * HOUR_US
    questions = []
    for _ in range(config.questions):
        t_us = int(rng.random() * day_us)
        questions.append(Question(t_us, ranking[draw_rank(cumulative, rng.random())]))
    saves = []
    for _ in range(config.saves):
        t_us = int(rng.random() * day_us)
        kind = draw_kind(SAVE_MIX, rng.random())
        zipf_article = ranking[draw_rank(cumulative, rng.random())]
        uniform_article = min(int(rng.random() * config.articles), config.articles - 1)
        saves.append(Save(t_us, kind, zipf_article, uniform_article,
                          tuple(rng.random() for _ in range(9))))
    questions.sort(key=lambda q: q.t_us)
    saves.sort(key=lambda s: s.t_us)
    return Plan(seed, titles, bodies, subjects, ranking, questions, saves)


# -- the schedule of people's saves, and the oracle that reads only it -------------------------


def retitle(old, old_action, subject, u, taken):
    """A new title that keeps the subject, unique among ``taken``; returns (title, action).

    Two uniforms pick the action and audience; ``taken`` is updated, so a plan's retitles
    come out the same wherever they are replayed.
    """
    audience = pick(AUDIENCES, u[1])
    for k in range(len(ACTIONS)):
        action = ACTIONS[(int(u[0] * len(ACTIONS)) + k) % len(ACTIONS)]
        title = "%s %s %s" % (action, subject, audience)
        if title not in taken:
            break
    else:
        n = 2
        while "%s (%d)" % (old, n) in taken:
            n += 1
        title, action = "%s (%d)" % (old, n), old_action
    taken.discard(old)
    taken.add(title)
    return title, action


def people_saves(plan, uniform):
    """The day's people's saves in order, each with the title it leaves: from the plan alone."""
    titles = list(plan.titles)
    actions = [action for action, _ in plan.subjects]
    taken = set(plan.titles)
    changes = []
    for i, save in enumerate(plan.saves):
        article = save.uniform_article if uniform else save.zipf_article
        if save.kind == "content_title":
            titles[article], actions[article] = retitle(
                titles[article], actions[article], plan.subjects[article][1], save.text_u[7:9],
                taken)
        changes.append(Change((save.t_us, SAVE_STEP, i), article, save, titles[article],
                              actions[article]))
    return changes


def any_between(steps, after, before):
    """Whether sorted ``steps`` holds one strictly between ``after`` and ``before``."""
    return bisect.bisect_right(steps, after) < bisect.bisect_left(steps, before)


class Oracle:
    """What every check and edit must find, from the schedule of people's saves alone.

    It never calls the store: it knows when each person saved which article and how, and is
    told where in the day the agent read each citation and when its own edits landed. Every
    article starts published; an unpublish withdraws it for the rest of the day (a later save
    edits the draft, and nobody publishes it again), so a citation is gone once an unpublish
    follows its read, changed once any other save does, and fresh otherwise.
    """

    def __init__(self, titles, changes):
        self.titles = titles
        self.steps, self.withdrawn, self.retitled = {}, {}, {}
        for change in changes:
            self.steps.setdefault(change.article, []).append(change.step)
            if change.save.kind == "unpublish":
                self.withdrawn.setdefault(change.article, []).append(change.step)
            elif change.save.kind == "content_title":
                self.retitled.setdefault(change.article, []).append((change.step, change.title))

    def version(self, article, step):
        """How many people's saves the article has had before ``step``: its version's number."""
        return bisect.bisect_left(self.steps.get(article, ()), step)

    def title_at(self, article, step):
        """The article's title just before ``step``."""
        retitles = self.retitled.get(article, ())
        i = bisect.bisect_left(retitles, (step,))
        return retitles[i - 1][1] if i else self.titles[article]

    def status(self, article, read, now):
        """``(status, cause)`` at step ``now`` of a citation of ``article`` read at ``read``."""
        if any_between(self.withdrawn.get(article, ()), read, now):
            return "gone", "gone"
        if not any_between(self.steps.get(article, ()), read, now):
            return "fresh", None
        if self.title_at(article, now) != self.title_at(article, read):
            return "changed", "retitled"
        return "changed", "content_only"

    def edit(self, article, read, at, own_edits):
        """``accepted``, ``changed`` or ``gone``: an edit at step ``at`` with the version read
        at step ``read``; ``own_edits`` are the steps of the agent's other edits of the article,
        each of which changes it unless it is gone."""
        status, _ = self.status(article, read, at)
        if status == "fresh" and any_between(own_edits, read, at):
            return "changed"
        return "accepted" if status == "fresh" else status


# -- closed-form expectations -----------------------------------------------------------------
#
# Each of a day's S people's saves falls at a uniform time and picks an article with its save
# chance q (Zipf by the ranking, or 1/N), independently of everything before it. So a version
# read with a share x of the saving day left is overtaken by the end of the day with chance
# 1 - (1 - q x)^S, whatever happened before the read; averaged over a uniform read time that is
# 1 - (1 - (1-q)^(S+1)) / ((S+1) q). Which article the agent cites, and when, comes from the
# run (it depends on search); everything else is arithmetic on the model's parameters. These
# functions never see a measured count.


def _round(x):
    # Four decimals keep the JSON identical across platforms whose pow() differs in the last bit.
    return round(x, 4)


def zipf_weights(n, s):
    """The Zipf probabilities ``1/r**s`` (normalised) of ranks 1..n."""
    weights = [1.0 / rank ** s for rank in range(1, n + 1)]
    total = sum(weights)
    return [w / total for w in weights]


def save_chances(plan, config, uniform):
    """Each article's chance of being the one a people's save picks: Zipf by rank, or 1/N."""
    if uniform:
        return [1.0 / config.articles] * config.articles
    chances = [0.0] * config.articles
    for article, weight in zip(plan.ranking, zipf_weights(config.articles, config.zipf)):
        chances[article] = weight
    return chances


def p_touched(q, x, saves):
    """Chance that one of ``saves`` saves picks an article of save chance ``q`` within a share
    ``x`` of the day: ``1 - (1 - q x)^S``."""
    return 1.0 - (1.0 - q * x) ** saves


def p_touched_by_end(q, saves):
    """``p_touched`` from a uniform read time to the end: 1 - (1 - (1-q)^(S+1)) / ((S+1) q)."""
    if q <= 0.0:
        return 0.0
    n = saves + 1
    return 1.0 - (1.0 - (1.0 - q) ** n) / (n * q)


def expected_checks(q, reads, answers, versions, saves, day_us):
    """Expected end-of-day counts of a checked day, from the articles cited and when.

    ``reads`` holds each citation's ``(article, read t_us)``, ``answers`` each answer's
    citation indices, ``versions`` each citation's distinct version as the schedule numbers it.
    A distinct citation is judged from its first read: which read comes last depends on whether
    the version survives, but the first depends on the past alone. The title-only check sees a
    distinct citation when a retitle or an unpublish overtakes it; it is gone when an unpublish
    does.
    """
    left = [max(day_us - t, 0) / day_us for _, t in reads]
    stale = [p_touched(q[a], x, saves) for (a, _), x in zip(reads, left)]
    positions = [0.0] * CITATIONS_PER_ANSWER
    with_stale = 0.0
    for cited in answers:
        for p, c in enumerate(cited):
            positions[p] += stale[c]
        if cited:
            articles = {reads[c][0] for c in cited}
            with_stale += p_touched(sum(q[a] for a in articles), left[cited[0]], saves)
    first = {}
    for c, version in enumerate(versions):
        first.setdefault(version, c)
    distinct = {"stale_distinct": 0.0, "title_only_distinct": 0.0, "gone_distinct": 0.0}
    for c in first.values():
        q_c, x = q[reads[c][0]], left[c]
        distinct["stale_distinct"] += p_touched(q_c, x, saves)
        distinct["title_only_distinct"] += p_touched(TITLE_VISIBLE_SHARE * q_c, x, saves)
        distinct["gone_distinct"] += p_touched(UNPUBLISH_SHARE * q_c, x, saves)
    out = {"by_position": [{"position": p + 1, "stale": _round(v)}
                           for p, v in enumerate(positions)],
           "stale": _round(sum(stale)), "answers_with_stale": _round(with_stale)}
    out.update((k, _round(v)) for k, v in distinct.items())
    return out


def expected_edits(q, edits, delays, saves, day_us):
    """Expected rejected and gone edits per delay, from the articles cited and when.

    ``edits`` holds ``(delay, article, read step, edit step)``. An edit is rejected for sure
    when another of the agent's edits of the same article lands between its read and itself;
    otherwise when a people's save does, with chance ``p_touched``. It finds the article gone
    when an unpublish does.
    """
    landed = {}
    for _, article, _, at in edits:
        landed.setdefault(article, []).append(at)
    for steps in landed.values():
        steps.sort()
    rows = {d: {"delay_s": d, "rejected": 0.0, "gone": 0.0} for d in delays}
    for delay, article, read, at in edits:
        window = max(min(at[0], day_us) - read[0], 0) / day_us
        own = any_between(landed[article], read, at)
        rows[delay]["rejected"] += 1.0 if own else p_touched(q[article], window, saves)
        rows[delay]["gone"] += p_touched(UNPUBLISH_SHARE * q[article], window, saves)
    return [dict(rows[d], rejected=_round(rows[d]["rejected"]), gone=_round(rows[d]["gone"]))
            for d in delays]


def model_expectations(config):
    """Expectations from the parameters alone, for a citation read at a uniform time."""
    weights = zipf_weights(config.articles, config.zipf)
    return {
        "uniform_saves_any_article": _round(p_touched_by_end(1.0 / config.articles,
                                                             config.saves)),
        "zipf_saves_question_own_article": _round(
            sum(w * p_touched_by_end(w, config.saves) for w in weights)),
        "zipf_saves_article_of_independent_popularity": _round(
            sum(p_touched_by_end(w, config.saves) for w in weights) / config.articles),
    }


# -- the agent ---------------------------------------------------------------------------------


class Agent:
    """The scripted agent: it touches the knowledge base only through ``call_tool``."""

    def __init__(self, store):
        self.store = store
        self.granted = frozenset([KB_ID])
        self.citations = []
        self.answers = []
        self.read_content = {}
        self.cursor = None
        self.cost = {name: {"calls": 0, "articles_read": 0, "bytes_read": 0, "events": 0}
                     for name in ("title_only", "reread", "poll")}
        self.cost["poll"]["pages"] = 0
        self.poll_status = {}  # the poll strategy's view of each distinct citation

    def call(self, name, **arguments):
        """One tool call on the granted knowledge base."""
        return self.store.call_tool(name, arguments, granted=self.granted)

    def search(self, query, limit=None):
        """search_knowledge_base; returns its result."""
        args = {"knowledge_base_id": KB_ID, "query": query}
        if limit is not None:
            args["limit"] = limit
        return self.call("search_knowledge_base", **args)

    def read(self, article_id):
        """read_knowledge_article; returns its result, or ``None`` if the article is gone."""
        try:
            return self.call("read_knowledge_article", knowledge_base_id=KB_ID,
                             article_id=article_id)
        except kb_store.NotFound:
            return None

    def answer(self, question_text):
        """Search, read the top two hits, keep both citations; returns the answer's index."""
        index = len(self.answers)
        found = self.search(question_text, CITATIONS_PER_ANSWER)
        cited = []
        for hit in found["results"][:CITATIONS_PER_ANSWER]:
            article = self.read(hit["article_id"])
            if article is None:
                continue
            if self.cursor is None:
                # The agent keeps the log's head from its first read as its polling cursor.
                self.cursor = article["head_sequence"]
            citation = Citation(index, article["article_id"], article["updated_at"],
                                article["title"])
            self.read_content[(index, len(cited))] = article["content"]
            self.poll_status.setdefault(citation.key, "fresh")
            cited.append(len(self.citations))
            self.citations.append(citation)
        self.answers.append(cited)
        return index

    # The three ways of checking old citations. Each returns {distinct citation: status}.

    def check_title_only(self):
        """Look every cited title up again; a citation is stale when its title is not found."""
        cost = self.cost["title_only"]
        found_titles = {}
        for citation in self.citations:
            title = citation.title
            if title in found_titles:
                continue
            result = self.search(title, TITLE_LOOKUP_HITS)
            cost["calls"] += 1
            cost["bytes_read"] += sum(_utf8(h["title"]) + _utf8(h["snippet"])
                                      for h in result["results"])
            found_titles[title] = any(h["title"] == title for h in result["results"])
        return {c.key: "fresh" if found_titles[c.title] else "stale" for c in self.citations}

    def check_reread(self):
        """Re-read every distinct cited article by ID and compare versions."""
        cost = self.cost["reread"]
        current = {}
        for citation in self.citations:
            if citation.article_id not in current:
                current[citation.article_id] = self._read_counted(citation.article_id, cost)
        return {c.key: _status(c, current[c.article_id]) for c in self.citations}

    def check_poll(self):
        """Resume the event log from the cursor; re-read only cited articles that changed."""
        cost = self.cost["poll"]
        changed, more = set(), True
        if self.cursor is None:
            return {}
        while more:
            page = self.call("poll_resource_events", resource_type="knowledge_base",
                             resource_id=KB_ID, after_sequence=self.cursor)
            cost["calls"] += 1
            cost["pages"] += 1
            cost["events"] += len(page["events"])
            changed.update(event["article_id"] for event in page["events"])
            self.cursor, more = page["next_after_sequence"], page["has_more"]
        status = self.poll_status
        cited = {}
        for citation in self.citations:
            cited.setdefault(citation.article_id, []).append(citation)
        for article_id in sorted(changed):
            if article_id in cited:
                article = self._read_counted(article_id, cost)
                for citation in cited[article_id]:
                    status[citation.key] = _status(citation, article)
        return dict(status)

    def _read_counted(self, article_id, cost):
        article = self.read(article_id)
        cost["calls"] += 1
        if article is not None:
            cost["articles_read"] += 1
            cost["bytes_read"] += _utf8(article["title"]) + _utf8(article["content"])
        return article


def _utf8(text):
    return len(text.encode("utf-8"))


def _status(citation, article):
    """``fresh``, ``changed`` or ``gone``: a citation against the article as now read."""
    if article is None:
        return "gone"
    return "fresh" if article["updated_at"] == citation.updated_at else "changed"


# -- one run of the day ------------------------------------------------------------------------


class DayRun:
    """One seed's day on one store: people's saves, the agent's answers, checks or edits."""

    def __init__(self, plan, config, *, uniform=False, checks=True, edits=False, db_path=None,
                 start=None):
        self.plan, self.config = plan, config
        self.uniform, self.checks, self.edits = uniform, checks, edits
        self.clock = SimClock()
        self.article_ids = []
        if db_path is not None and "://" not in db_path and os.path.exists(db_path):
            os.remove(db_path)
        if start is not None and start.image is not None and db_path is None:
            self.store = _store_from_image(start.image, self.clock)
            self.article_ids = list(start.article_ids)
        else:
            self.store = kb_store.KBStore(db_path or ":memory:", clock=self.clock, create=True)
        self.agent = Agent(self.store)
        self.changes = people_saves(plan, uniform)
        self.oracle = Oracle(plan.titles, self.changes)
        self.index_of = {}
        self.actions = [action for action, _ in plan.subjects]  # each title's action now
        self.reads = []  # per citation: (article index, step of the read)
        self.own_edits = {}  # article index -> steps of the agent's edits of it, in day order
        self.edit_log = []  # per edit: (delay, article index, step of the read, step of the edit)
        self.hourly = []
        self.detection = None
        self.by_position = None
        self.first_hit_is_target = 0
        self.mismatches = []
        self.edit_rows = {d: _edit_row(d) for d in config.delays}
        self.idempotency = {"successful_edits": 0, "replays": 0, "replays_marked": 0,
                            "new_events_from_replays": 0}

    def run(self):
        """Play the day in time order; returns this run's results."""
        if not self.article_ids:
            self.article_ids = fill_store(self.store, self.plan)
        self.index_of = {article_id: i for i, article_id in enumerate(self.article_ids)}
        self.clock.t_us = 0
        steps = []
        for change in self.changes:
            steps.append(change.step + (self._save, change))
        for i, question in enumerate(self.plan.questions):
            steps.append((question.t_us, QUESTION_STEP, i, self._question, (i, question)))
            if self.edits:
                delay = self.config.delays[i % len(self.config.delays)]
                steps.append((question.t_us + delay * 1000000, EDIT_STEP, i, self._edit,
                              (i, delay)))
        if self.checks:
            for hour in range(1, self.config.hours + 1):
                steps.append((hour * HOUR_US, CHECK_STEP, hour, self._check, hour))
        steps.sort(key=lambda step: step[:3])
        for step in steps:
            self.clock.t_us = step[0]
            step[3](step[4])
        self.store.close()
        q = save_chances(self.plan, self.config, self.uniform)
        day_us = self.config.hours * HOUR_US
        if self.checks:
            expected = expected_checks(
                q, [(a, step[0]) for a, step in self.reads], self.agent.answers,
                [(a, self.oracle.version(a, step)) for a, step in self.reads],
                len(self.plan.saves), day_us)
        else:
            expected = {"edits": expected_edits(q, self.edit_log, self.config.delays,
                                                len(self.plan.saves), day_us)}
        return {
            "expected": expected,
            "hourly": self.hourly,
            "detection": self.detection,
            "by_position": self.by_position,
            "first_hit_is_target": self.first_hit_is_target,
            "cost": self.agent.cost,
            "edits": [self.edit_rows[d] for d in self.config.delays],
            "idempotency": self.idempotency,
            "mismatches": self.mismatches,
        }

    def _save(self, change):
        """A person's save, last writer wins, on what the editor shows now.

        Saving a withdrawn article edits its draft and leaves it withdrawn (the store writes no
        event, as agents cannot see it); an unpublish of an article already withdrawn changes
        nothing.
        """
        article_id = self.article_ids[change.article]
        save = change.save
        self.actions[change.article] = change.action
        if save.kind == "unpublish":
            self.store.unpublish(KB_ID, article_id)
            return
        current = self.store.get_article(KB_ID, article_id)
        action, subject = self.plan.subjects[change.article]
        u = save.text_u
        paragraphs = current["content"].split("\n\n")
        paragraphs[min(int(u[0] * len(paragraphs)), len(paragraphs) - 1)] = make_paragraph(
            subject, action, u[1:7])
        title = change.title if save.kind == "content_title" else None
        self.store.save_article(KB_ID, article_id, content="\n\n".join(paragraphs), title=title)

    def _question(self, arg):
        """The agent answers a question made of its target article's current title words (or,
        paraphrased, of its action and subject only)."""
        i, question = arg
        target_id = self.article_ids[question.target]
        if self.config.questions_from == "paraphrase":
            query = "%s %s" % (self.actions[question.target],
                               self.plan.subjects[question.target][1])
        else:
            query = self.store.get_article(KB_ID, target_id)["title"]
        first = len(self.agent.citations)
        cited = self.agent.answers[self.agent.answer(query.lower())]
        step = (question.t_us, QUESTION_STEP, i)
        for citation in self.agent.citations[first:]:
            self.reads.append((self.index_of[citation.article_id], step))
        if cited and self.agent.citations[cited[0]].article_id == target_id:
            self.first_hit_is_target += 1

    def _edit(self, arg):
        """After the delay, edit the answer's first cited article with the citation's version."""
        i, delay = arg
        row = self.edit_rows[delay]
        if not self.agent.answers[i]:
            row["skipped_no_citation"] += 1
            return
        first = self.agent.answers[i][0]
        citation = self.agent.citations[first]
        article, read = self.reads[first]
        at = (self.clock.t_us, EDIT_STEP, i)
        own = self.own_edits.setdefault(article, [])
        expected = self.oracle.edit(article, read, at, own)
        own.append(at)
        self.edit_log.append((delay, article, read, at))
        line = "Agent note %d: customers asked about this at %s." % (
            i + 1, self.plan_time(self.plan.questions[i].t_us))
        content = self.agent.read_content[(i, 0)] + "\n\n" + line
        row["edits"] += 1
        args = {"knowledge_base_id": KB_ID, "article_id": citation.article_id,
                "content": content, "expected_version": citation.updated_at,
                "idempotency_key": "seed%d-answer%d-try1" % (self.plan.seed, i + 1)}
        try:
            result = self.agent.call("edit_knowledge_article", **args)
            row["accepted_first_try"] += 1
            found = "accepted"
        except kb_store.VersionConflict:
            row["rejected_changed"] += 1
            found = "changed"
            # The mechanical fix: re-read, re-apply the change to what is there, new version.
            current = self.agent.read(citation.article_id)
            if current is None:
                row["retries_failed"] += 1
                found = "changed, then gone on re-read"
            else:
                args = dict(args, content=current["content"] + "\n\n" + line,
                            expected_version=current["updated_at"],
                            idempotency_key="seed%d-answer%d-try2" % (self.plan.seed, i + 1))
                try:
                    result = self.agent.call("edit_knowledge_article", **args)
                    row["retries_succeeded"] += 1
                except kb_store.ToolError:
                    row["retries_failed"] += 1
                    found = "changed, then the retry failed"
        except kb_store.NotFound:
            row["rejected_gone"] += 1
            found = "gone"
        if found != expected:
            self.mismatches.append(
                "seed %d, edit of answer %d after %s: %s by the schedule, %s by the store"
                % (self.plan.seed, i + 1, _delay_text(delay), expected, found))
        if found in ("accepted", "changed"):
            self._replay(args, result)

    def _replay(self, args, first):
        """Send a successful edit again with the same key: a marked replay, no new event."""
        stats = self.idempotency
        stats["successful_edits"] += 1
        head = self.store.head_sequence(KB_ID)
        again = self.agent.call("edit_knowledge_article", **args)
        stats["replays"] += 1
        if again.get("replayed") is True and dict(again, replayed=False) == first:
            stats["replays_marked"] += 1
        stats["new_events_from_replays"] += self.store.head_sequence(KB_ID) - head

    @staticmethod
    def plan_time(t_us):
        """Wall-clock text of a simulated time, to the minute."""
        return (DAY_START + timedelta(microseconds=t_us)).strftime("%H:%M UTC")

    def _check(self, hour):
        """Check every citation so far three ways; all must match the schedule's truth."""
        agent = self.agent
        truth, cause = self._ground_truth()
        title_only = agent.check_title_only()
        reread = agent.check_reread()
        poll = agent.check_poll()
        schedule, schedule_cause = self._schedule_truth(hour)
        by_key = {}
        for i, citation in enumerate(agent.citations):
            by_key.setdefault(citation.key, schedule[i])
        self._compare(hour, schedule, schedule_cause, (
            ("the database", truth, cause), ("re-read", reread, None), ("poll", poll, None)))
        stale_keys = {k for k, v in truth.items() if v != "fresh"}
        answers_stale = sum(
            1 for cited in agent.answers
            if any(agent.citations[c].key in stale_keys for c in cited))
        self.hourly.append({
            "hour": hour,
            "citations": len(agent.citations),
            "stale": sum(1 for c in agent.citations if c.key in stale_keys),
            "distinct": len(truth),
            "stale_distinct": len(stale_keys),
            "answers": len(agent.answers),
            "answers_with_stale": answers_stale,
        })
        if hour == self.config.hours:
            self.by_position = [{"position": p + 1, "citations": 0, "stale": 0}
                                for p in range(CITATIONS_PER_ANSWER)]
            for cited in agent.answers:
                for p, c in enumerate(cited):
                    self.by_position[p]["citations"] += 1
                    self.by_position[p]["stale"] += agent.citations[c].key in stale_keys
            self.detection = {
                "ground_truth": self._detected(truth, truth, cause),
                "schedule": self._detected(by_key, truth, cause),
                "title_only": self._detected(title_only, truth, cause),
                "reread": self._detected(reread, truth, cause),
                "poll": self._detected(poll, truth, cause),
            }

    def _schedule_truth(self, hour):
        """Status and cause of every citation by the oracle: ``{citation index: ...}`` twice."""
        now = (hour * HOUR_US, CHECK_STEP, hour)
        status, cause = {}, {}
        for i, (article, read) in enumerate(self.reads):
            status[i], cause[i] = self.oracle.status(article, read, now)
        return status, cause

    def _compare(self, hour, schedule, schedule_cause, sources):
        """Record each citation whose status (or cause) a source gives unlike the schedule."""
        seen = set()
        for i, citation in enumerate(self.agent.citations):
            for name, found, found_cause in sources:
                key = citation.key
                got = found.get(key)
                if got == schedule[i] and (found_cause is None or got != "changed"
                                           or found_cause[key] == schedule_cause[i]):
                    continue
                if (key, name) in seen:
                    continue
                seen.add((key, name))
                want = schedule[i]
                if got == want:  # the same status, another cause
                    want, got = schedule_cause[i], found_cause[key]
                self.mismatches.append(
                    "seed %d, hour %d, %s: citation %s is %s by the schedule, %s by %s"
                    % (self.plan.seed, hour, "uniform" if self.uniform else "zipf",
                       "/".join(key), want, got, name))

    def _ground_truth(self):
        """Status and cause of every distinct citation, from the database's own rows."""
        truth, cause, rows = {}, {}, {}
        for citation in self.agent.citations:
            if citation.key in truth:
                continue
            if citation.article_id not in rows:
                rows[citation.article_id] = self.store.get_article(KB_ID, citation.article_id)
            row = rows[citation.article_id]
            if not row["published"]:
                truth[citation.key], cause[citation.key] = "gone", "gone"
            elif row["updated_at"] != citation.updated_at:
                truth[citation.key] = "changed"
                cause[citation.key] = ("retitled" if row["title"] != citation.title
                                       else "content_only")
            else:
                truth[citation.key], cause[citation.key] = "fresh", None
        return truth, cause

    def _detected(self, found, truth, cause):
        """What one strategy reports stale, counted as citations and distinct, and by cause."""
        stale_keys = {k for k, v in found.items() if v != "fresh"}
        out = {"stale": sum(1 for c in self.agent.citations if c.key in stale_keys),
               "stale_distinct": len(stale_keys),
               "changed": 0, "gone": 0, "content_only": 0, "retitled": 0, "false_stale": 0}
        for key in stale_keys:
            if truth[key] == "fresh":
                out["false_stale"] += 1
                continue
            out[truth[key]] += 1
            if cause[key] != "gone":
                out[cause[key]] += 1
        return out


def _edit_row(delay):
    return {"delay_s": delay, "edits": 0, "accepted_first_try": 0, "rejected_changed": 0,
            "rejected_gone": 0, "retries_succeeded": 0, "retries_failed": 0,
            "skipped_no_citation": 0}


# -- the one place sim.py reaches inside the store ---------------------------------------------
#
# KBStore has no public way to copy its database, and copying a seed's start of day is cheaper
# than building it three times. If the store's internals change, these two functions are what
# to adapt, or to drop: prepare() without an image (the plain build) is always correct.


def _database_image(store):
    """The store's whole database as bytes, or ``None`` where it cannot be had."""
    return store.image()


def _store_from_image(image, clock):
    """A new in-memory store holding a copy of the database ``image``."""
    return kb_store.KBStore.from_image(image, clock=clock)


# -- one seed, many seeds ----------------------------------------------------------------------


# The three runs of a seed's day; each is one task, so a pool of two processes stays balanced.
PARTS = ("zipf", "uniform", "edits")


def fill_store(store, plan):
    """The knowledge base at the start of the day: every article published; returns their IDs."""
    store.create_knowledge_base(KB_ID, "Support")
    return store.create_articles(KB_ID, list(zip(plan.titles, plan.bodies)))


def prepare(seed, config, image=True):
    """One seed's plan, drawn once for its three runs, and its start-of-day database image.

    The image (where sqlite3 can serialize, Python 3.11 on) spares each run the build of the
    articles and their index; without it each run builds its own, with the same result.
    """
    plan = draw_plan(seed, config)
    if not image or not hasattr(sqlite3.Connection, "serialize"):
        return Start(plan, None, None)
    store = kb_store.KBStore(":memory:", clock=SimClock())
    try:
        article_ids = fill_store(store, plan)
        return Start(plan, _database_image(store), article_ids)
    finally:
        store.close()


def run_part(seed, config, part, db_dir=None, start=None, db_url=None):
    """One run of one seed's day: Zipf with checks, the uniform control, or the edit experiment.

    ``start`` is the seed's ``prepare()``d plan and image, shared by its three runs; without
    it the run draws its own. The store is in memory, a file in ``db_dir``, or a fresh schema
    of the PostgreSQL database at ``db_url``.
    """
    if start is None:
        start = prepare(seed, config, image=False)
    plan = start.plan
    db_path = None if db_dir is None else os.path.join(db_dir, "seed%d-%s.db" % (seed, part))
    if db_url is not None:
        import kb_postgres

        db_path = kb_postgres.schema_address(db_url, "sim_seed%d_%s" % (seed, part), fresh=True)
    result = DayRun(plan, config, uniform=(part == "uniform"), checks=(part != "edits"),
                    edits=(part == "edits"), db_path=db_path, start=start).run()
    if part == "zipf":
        top = set(plan.ranking[:10])
        result["workload"] = {
            "questions": len(plan.questions),
            "first_hit_is_target": result["first_hit_is_target"],
            "questions_top10": sum(1 for q in plan.questions if q.target in top),
            "saves": len(plan.saves),
            "saves_top10": sum(1 for s in plan.saves if s.zipf_article in top),
            "save_kinds": {kind: sum(1 for s in plan.saves if s.kind == kind)
                           for kind, _ in SAVE_MIX},
        }
    return result


def _seed_result(seed, parts):
    return dict(seed=seed, workload=parts["zipf"].pop("workload"), **parts)


def _add(into, row):
    for key, value in row.items():
        if isinstance(value, float):
            into[key] = _round(into.get(key, 0) + value)
        elif isinstance(value, int) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + value
        elif isinstance(value, dict):
            _add(into.setdefault(key, {}), value)
    return into


def _sum_rows(per_seed, rows_of, key, labels):
    """Row i of every seed's list ``rows_of(seed result)`` summed, labelled ``key: labels[i]``."""
    out = []
    for i, label in enumerate(labels):
        row = {}
        for r in per_seed:
            _add(row, rows_of(r)[i])
        row[key] = label
        out.append(row)
    return out


def summarize(per_seed, config):
    """Sum the seeds' results into the report's structure (everything but timing)."""
    workload = _add({}, {})
    for r in per_seed:
        _add(workload, r["workload"])
    staleness, expected = {}, {"model": model_expectations(config)}
    for mode in ("zipf", "uniform"):
        staleness[mode] = _sum_rows(per_seed, lambda r: r[mode]["hourly"], "hour",
                                    range(1, config.hours + 1))
        staleness[mode + "_by_position"] = _sum_rows(
            per_seed, lambda r: r[mode]["by_position"], "position",
            range(1, CITATIONS_PER_ANSWER + 1))
        expected[mode] = {}
        for r in per_seed:
            _add(expected[mode], r[mode]["expected"])
        expected[mode]["by_position"] = _sum_rows(
            per_seed, lambda r: r[mode]["expected"]["by_position"], "position",
            range(1, CITATIONS_PER_ANSWER + 1))
    detection, cost = {}, {}
    for mode in ("zipf", "uniform"):
        detection[mode] = {}
        cost[mode] = {}
        for r in per_seed:
            _add(detection[mode], r[mode]["detection"])
            _add(cost[mode], r[mode]["cost"])
    edits = _sum_rows(per_seed, lambda r: r["edits"]["edits"], "delay_s", config.delays)
    expected["edits"] = _sum_rows(per_seed, lambda r: r["edits"]["expected"]["edits"],
                                  "delay_s", config.delays)
    idempotency = {}
    for r in per_seed:
        _add(idempotency, r["edits"]["idempotency"])
    mismatches = [m for r in per_seed for part in PARTS for m in r[part]["mismatches"]]
    return {
        "config": dict(asdict(config), delays=list(config.delays)),
        "seeds": [r["seed"] for r in per_seed],
        "workload": dict(
            workload,
            top10_question_share=_ratio(workload["questions_top10"], workload["questions"]),
            top10_save_share=_ratio(workload["saves_top10"], workload["saves"]),
            top10_zipf_expected=round(top_share(zipf_cumulative(config.articles, config.zipf),
                                                10), 4),
        ),
        "staleness": staleness,
        # The article's detection and cost figures are for the Zipf day; the control's follow.
        "detection": detection["zipf"],
        "cost": cost["zipf"],
        "control": {"detection": detection["uniform"], "cost": cost["uniform"]},
        "edits": edits,
        "expected": expected,
        "idempotency": idempotency,
        "checks": {"zipf": len(per_seed) * config.hours, "uniform": len(per_seed) * config.hours},
        "check_mismatches": mismatches,
        "per_seed": per_seed,
    }


def _ratio(n, d):
    return round(n / d, 4) if d else 0.0


def run(seeds, config, *, db_dir=None, processes=None, db_url=None):
    """Run every seed (across processes when there are several) and summarise."""
    started = time.perf_counter()
    # Longest runs first, so the short edit runs fill the gaps at the end.
    jobs = [(seed, part) for part in PARTS for seed in seeds]
    if processes is None:
        processes = min(len(jobs), os.cpu_count() or 1)
    # Each seed's plan (and image) is made once, then shared by its three runs.
    preparing = [(seed, config, db_dir is None and db_url is None) for seed in seeds]
    if processes > 1:
        with multiprocessing.get_context(_start_method()).Pool(processes) as pool:
            starts = dict(zip(seeds, pool.starmap(prepare, preparing, chunksize=1)))
            results = pool.starmap(run_part, [(seed, config, part, db_dir, starts[seed], db_url)
                                              for seed, part in jobs], chunksize=1)
    else:
        starts = {seed: prepare(*args) for seed, args in zip(seeds, preparing)}
        results = [run_part(seed, config, part, db_dir, starts[seed], db_url)
                   for seed, part in jobs]
    by_seed = {seed: {} for seed in seeds}
    for (seed, part), result in zip(jobs, results):
        by_seed[seed][part] = result
    per_seed = [_seed_result(seed, by_seed[seed]) for seed in seeds]
    report = summarize(per_seed, config)
    report["timing"] = {"seconds": round(time.perf_counter() - started, 3),
                        "processes": processes, "python": sys.version.split()[0]}
    return report


def _start_method():
    # fork starts a worker in milliseconds where it is safe (Linux, before any threads run);
    # elsewhere the platform default.
    methods = multiprocessing.get_all_start_methods()
    return "fork" if sys.platform.startswith("linux") and "fork" in methods else None


# -- rendering ---------------------------------------------------------------------------------


def _pct(n, d):
    return "%.1f%%" % (100.0 * n / d) if d else "-"


def markdown_table(header, rows):
    """A Markdown table; the first column left-aligned, the rest right-aligned."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _n(x):
    return "{:,}".format(x)


def _count_pct(count, of):
    """A count (a float for an expectation) with its share: ``368 (61.3%)``, ``351.2 (58.5%)``."""
    text = _n(count) if isinstance(count, int) else "{:,.1f}".format(count)
    return "%s (%s)" % (text, _pct(count, of))


def render(report, per_seed=False):
    """The report as Markdown tables."""
    out = []
    seeds = report["seeds"]
    cfg = report["config"]
    out.append("# Simulated support day, seeds %s, summed\n" % seed_text(seeds))
    out.append("%d articles, %d questions, %d people's saves over %d hours per seed; Zipf s = %g "
               "over a ranking %s; questions from %s.\n"
               % (cfg["articles"], cfg["questions"], cfg["saves"], cfg["hours"], cfg["zipf"],
                  "independent of titles" if cfg["popularity"] == "independent"
                  else "that keeps each subject's articles together",
                  "titles" if cfg["questions_from"] == "title"
                  else "action and subject words only"))

    out.append("## 1. Staleness by hour (Zipf saves | uniform control)\n")
    rows = []
    for z, u in zip(report["staleness"]["zipf"], report["staleness"]["uniform"]):
        row = [z["hour"]]
        for r in (z, u):
            row += [_n(r["citations"]),
                    "%s (%s)" % (_n(r["stale"]), _pct(r["stale"], r["citations"])),
                    _n(r["distinct"]),
                    "%s (%s)" % (_n(r["stale_distinct"]), _pct(r["stale_distinct"], r["distinct"])),
                    _n(r["answers"]),
                    "%s (%s)" % (_n(r["answers_with_stale"]),
                                 _pct(r["answers_with_stale"], r["answers"]))]
        rows.append(row)
    header = ["hour"] + ["%s %s" % (m, c) for m in ("zipf", "ctrl") for c in (
        "citations", "stale", "distinct", "stale distinct", "answers", "answers w/ stale")]
    out.append(markdown_table(header, rows) + "\n")

    out.append("End of day by the citation's place in its answer (1: the top search hit, which "
               "is the question's own article in %s of Zipf answers):\n"
               % _pct(report["workload"]["first_hit_is_target"], report["workload"]["questions"]))
    rows = []
    expected = report["expected"]
    for z, u, ez, eu in zip(report["staleness"]["zipf_by_position"],
                            report["staleness"]["uniform_by_position"],
                            expected["zipf"]["by_position"], expected["uniform"]["by_position"]):
        rows.append([z["position"], _n(z["citations"]), _count_pct(z["stale"], z["citations"]),
                     _count_pct(ez["stale"], z["citations"]),
                     _count_pct(u["stale"], u["citations"]),
                     _count_pct(eu["stale"], u["citations"])])
    out.append(markdown_table(["position", "citations", "zipf stale", "zipf expected",
                               "ctrl stale", "ctrl expected"], rows) + "\n")
    out.append("Expected: the closed form 1 - (1 - q x)^S summed over the citations, with S the "
               "day's people's saves, q the cited article's chance of being the one a save "
               "picks and x the share of the day left after the read; which article each "
               "answer cited, and when, is the run's.\n")

    out.append("## 2. Detection at end of day (Zipf)\n")
    det = report["detection"]
    gt = det["ground_truth"]
    rows = []
    for name, label in (("ground_truth", "ground truth (database)"),
                        ("schedule", "schedule (no store call)"), ("title_only", "title only"),
                        ("reread", "re-read"), ("poll", "poll")):
        d = det[name]
        rows.append([label, "%s (%s)" % (_n(d["stale"]), _pct(d["stale"], gt["stale"])),
                     "%s (%s)" % (_n(d["stale_distinct"]),
                                  _pct(d["stale_distinct"], gt["stale_distinct"])),
                     _n(d["content_only"]), _n(d["retitled"]), _n(d["gone"]),
                     _n(d["false_stale"])])
    out.append(markdown_table(["strategy", "stale citations found", "stale distinct found",
                       "content only", "retitled", "gone", "false alarms"], rows) + "\n")
    out.append("Causes count distinct citations. A retitle also changes content, so the title "
               "check sees only retitles and unpublishes. The schedule's row is the oracle: "
               "staleness from the plan's saves and the citations' read times alone; the run "
               "fails unless the database, re-read and poll agree with it at every check.\n")

    out.append("## 3. Cost of all hourly checks (Zipf, %d checks)\n" % report["checks"]["zipf"])
    cost = report["cost"]
    rows = []
    for name, label in (("title_only", "title only"), ("reread", "re-read"), ("poll", "poll")):
        c = cost[name]
        rows.append([label, _n(c["calls"]), _n(c["articles_read"]), _n(c["bytes_read"]),
                     _n(c["events"])])
    r, p = cost["reread"], cost["poll"]
    rows.append(["re-read / poll", _ratio_text(r["calls"], p["calls"]),
                 _ratio_text(r["articles_read"], p["articles_read"]),
                 _ratio_text(r["bytes_read"], p["bytes_read"]), "-"])
    out.append(markdown_table(["strategy", "tool calls", "articles read", "bytes of article text",
                       "events fetched"], rows) + "\n")

    out.append("## 4. Edits with the citation's version, by delay\n")
    rows = []
    for e, x in zip(report["edits"], report["expected"]["edits"]):
        rejected = e["rejected_changed"] + e["rejected_gone"]
        rows.append([_delay_text(e["delay_s"]), _n(e["edits"]), _n(e["accepted_first_try"]),
                     _n(e["rejected_changed"]), _n(e["rejected_gone"]),
                     _pct(rejected, e["edits"]), _pct(x["rejected"], e["edits"]),
                     "%.1f" % x["gone"],
                     "%d of %d" % (e["retries_succeeded"],
                                   e["retries_succeeded"] + e["retries_failed"])])
    out.append(markdown_table(["delay", "edits", "accepted first try", "rejected: changed",
                               "rejected: gone", "rejected", "expected rejected",
                               "expected gone", "retries succeeded"], rows) + "\n")
    out.append("Expected: rejected for sure when another of the agent's own edits of the "
               "article lands in between, else with chance 1 - (1 - q w)^S, w the share of the "
               "saving day between read and edit; gone with 1 - (1 - %g q w)^S.\n"
               % UNPUBLISH_SHARE)

    out.append("## 5. Idempotency\n")
    i = report["idempotency"]
    out.append(markdown_table(["successful edits", "replays sent", "replays marked as replay",
                       "events written by replays"],
                      [[_n(i["successful_edits"]), _n(i["replays"]), _n(i["replays_marked"]),
                        _n(i["new_events_from_replays"])]]) + "\n")

    out.append("## 6. The article beside us\n")
    out.append(markdown_table(["figure", "article", "ours", "expected (model)"],
                              comparison_rows(report)) + "\n")
    out.append("\n".join("%d. %s" % (i + 1, note) for i, note in enumerate(article_notes()))
               + "\n")

    if per_seed:
        out.append("## Per seed\n")
        out.append(per_seed_table(report) + "\n")
    return "\n".join(out)


def comparison_rows(report):
    """The side-by-side of SPEC's figures, ours and the model's expectation, as table rows."""
    w = report["workload"]
    z, u = report["staleness"]["zipf"][-1], report["staleness"]["uniform"][-1]
    ez, eu = report["expected"]["zipf"], report["expected"]["uniform"]
    model = report["expected"]["model"]
    det = report["detection"]
    gt, title = det["ground_truth"], det["title_only"]
    edits, expected_edits = report["edits"], report["expected"]["edits"]
    total_edits = sum(e["edits"] for e in edits)
    gone = sum(e["rejected_gone"] for e in edits)
    retries = sum(e["retries_succeeded"] for e in edits)
    retries_all = retries + sum(e["retries_failed"] for e in edits)
    idem = report["idempotency"]
    checks = report["checks"]["zipf"]
    poll = report["cost"]["poll"]
    by_delay = "; ".join("%s %s" % (_delay_text(e["delay_s"]),
                                    _pct(e["rejected_changed"] + e["rejected_gone"], e["edits"]))
                         for e in edits)
    expected_by_delay = "; ".join("%s %s" % (_delay_text(e["delay_s"]), _pct(x["rejected"],
                                                                             e["edits"]))
                                  for e, x in zip(edits, expected_edits))
    return [
        ["top-10 share of questions / saves", "36.7% / 36.7%",
         "%.1f%% / %.1f%%" % (100 * w["top10_question_share"], 100 * w["top10_save_share"]),
         "%.1f%% (Zipf %g over %d)" % (100 * w["top10_zipf_expected"], report["config"]["zipf"],
                                       report["config"]["articles"])],
        ["stale citations at end of day, Zipf", "369 of 1,200 (30.8%)",
         "%s of %s citations (%s); %s of %s distinct (%s)" % (
             _n(z["stale"]), _n(z["citations"]), _pct(z["stale"], z["citations"]),
             _n(z["stale_distinct"]), _n(z["distinct"]), _pct(z["stale_distinct"], z["distinct"])),
         "%s citations; %s distinct" % (_count_pct(ez["stale"], z["citations"]),
                                         _count_pct(ez["stale_distinct"], z["distinct"]))],
        ["answers with a stale citation, Zipf", "four out of five (note 1)",
         "%s of %s (%s)" % (_n(z["answers_with_stale"]), _n(z["answers"]),
                            _pct(z["answers_with_stale"], z["answers"])),
         _count_pct(ez["answers_with_stale"], z["answers"])],
        ["control: stale citations", "167 of 1,200 (13.9%) (note 2)",
         "%s of %s citations (%s); %s of %s distinct (%s)" % (
             _n(u["stale"]), _n(u["citations"]), _pct(u["stale"], u["citations"]),
             _n(u["stale_distinct"]), _n(u["distinct"]), _pct(u["stale_distinct"], u["distinct"])),
         "%s citations; %s distinct; any citation read at a uniform time: %.1f%%" % (
             _count_pct(eu["stale"], u["citations"]),
             _count_pct(eu["stale_distinct"], u["distinct"]),
             100 * model["uniform_saves_any_article"])],
        ["control: answers with a stale citation", "280 of 600 (46.7%) (note 1)",
         "%s of %s (%s)" % (_n(u["answers_with_stale"]), _n(u["answers"]),
                            _pct(u["answers_with_stale"], u["answers"])),
         _count_pct(eu["answers_with_stale"], u["answers"])],
        ["stale found by title only", "152 of 369 (41.2%), all retitles or unpublishes",
         "%s of %s distinct (%s): %d retitled, %d gone, %d content-only, %d false alarms" % (
             _n(title["stale_distinct"]), _n(gt["stale_distinct"]),
             _pct(title["stale_distinct"], gt["stale_distinct"]), title["retitled"],
             title["gone"], title["content_only"], title["false_stale"]),
         "%.1f of %.1f distinct (%s)" % (ez["title_only_distinct"], ez["stale_distinct"],
                                         _pct(ez["title_only_distinct"], ez["stale_distinct"]))],
        ["re-read and poll found", "exactly the ground truth, at each of 40 checks",
         "%s at each of %d checks (plus %d control checks and every edit); %d mismatches" % (
             "exactly the schedule's truth (so did the database's rows)" if not
             report["check_mismatches"] else "NOT the schedule's truth",
             checks, report["checks"]["uniform"], len(report["check_mismatches"])),
         "the schedule's truth, by construction of a correct store"],
        ["poll cost", "one call per check (< 100 changes an hour)",
         "%d event pages over %d checks, %s events" % (poll["pages"], checks, _n(poll["events"])),
         "-"],
        ["edits whose article was unpublished by then", "19 of 600",
         "%d of %d" % (gone, total_edits),
         "%.1f" % sum(x["gone"] for x in expected_edits)],
        ["edit with an hour-old citation", "fails nearly 4 in 10; seconds old: fine",
         "rejected: " + by_delay, expected_by_delay],
        ["retries after re-read", "all succeeded", "%d of %d succeeded" % (retries, retries_all),
         "all: nothing lands between a re-read and its retry"],
        ["idempotent replays", "409 of 409 marked, no new event",
         "%d of %d marked, %d new events" % (idem["replays_marked"], idem["replays"],
                                              idem["new_events_from_replays"]), "-"],
        ["whole run", "25.7 s (M1, Python 3.9.6)",
         "%.2f s (%d processes, Python %s)" % (report["timing"]["seconds"],
                                                report["timing"]["processes"],
                                                report["timing"]["python"]), "-"],
    ]


def article_notes():
    """Where the article's own figures cannot all hold, with the arithmetic (its day's sizes)."""
    day = Config()
    q = 1.0 / day.articles
    control = p_touched_by_end(q, day.saves)
    needed = saves_for_stale_share(q, ARTICLE["stale_control"] / ARTICLE["citations"])
    return [
        "An answer holding a stale citation holds one of its own, so such answers cannot "
        "outnumber stale citations. The article's %d control answers against %d stale "
        "citations, and its Zipf \"four out of five\" (%d of %d answers) against %d, are "
        "impossible if those citations are of the %s handed out; they fit as *distinct* "
        "citations, so we count both ways."
        % (ARTICLE["answers_stale_control"], ARTICLE["stale_control"],
           ARTICLE["answers_stale_zipf"], ARTICLE["answers"], ARTICLE["stale_zipf"],
           _n(ARTICLE["citations"])),
        "With saves spread uniformly every article has q = 1/%d, and a citation read at a "
        "uniform time is stale by evening with chance 1 - (1 - (1-q)^%d) / (%d q) = %.1f%%, "
        "whichever article it cites. The article's %d of %s (%.1f%%) would need about %d "
        "saves, not %d."
        % (day.articles, day.saves + 1, day.saves + 1, 100 * control, ARTICLE["stale_control"],
           _n(ARTICLE["citations"]), 100.0 * ARTICLE["stale_control"] / ARTICLE["citations"],
           needed, day.saves),
    ]


def saves_for_stale_share(q, share):
    """The fewest saves that make a citation read at a uniform time stale with ``share``."""
    low, high = 0, 1
    while p_touched_by_end(q, high) < share:
        high *= 2
    while low < high:
        mid = (low + high) // 2
        if p_touched_by_end(q, mid) < share:
            low = mid + 1
        else:
            high = mid
    return low


def per_seed_table(report):
    """Key end-of-day figures with a column per seed."""
    header = ["figure", "all"] + ["seed %d" % s for s in report["seeds"]]
    def row(label, fn):
        return [label, fn(None)] + [fn(r) for r in report["per_seed"]]

    def end(mode, key):
        def fn(r):
            rows = report["staleness"][mode] if r is None else r[mode]["hourly"]
            return _n(rows[-1][key])
        return fn

    def det(key):
        return lambda r: _n((report["detection"] if r is None
                             else r["zipf"]["detection"])["title_only"][key])

    def edit(i, key):
        return lambda r: _n((report["edits"] if r is None else r["edits"]["edits"])[i][key])

    rows = [
        row("zipf: stale citations", end("zipf", "stale")),
        row("zipf: stale distinct", end("zipf", "stale_distinct")),
        row("zipf: answers with stale", end("zipf", "answers_with_stale")),
        row("control: stale citations", end("uniform", "stale")),
        row("control: stale distinct", end("uniform", "stale_distinct")),
        row("control: answers with stale", end("uniform", "answers_with_stale")),
        row("title only: stale distinct found", det("stale_distinct")),
    ]
    for i, d in enumerate(report["config"]["delays"]):
        rows.append(row("edits at %s rejected: changed" % _delay_text(d),
                        edit(i, "rejected_changed")))
        rows.append(row("edits at %s rejected: gone" % _delay_text(d), edit(i, "rejected_gone")))
    return markdown_table(header, rows)


def _ratio_text(a, b):
    return "%.1fx" % (a / b) if b else "-"


def _delay_text(seconds):
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return "%d%s" % (seconds // size, unit)
    return "%ds" % seconds


def seed_text(seeds):
    """Seeds as the command line takes them: ``1-5`` for a run of them, else ``1,3,7``."""
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return "%d-%d" % (seeds[0], seeds[-1])
    return ",".join(str(s) for s in seeds)


# -- command line ------------------------------------------------------------------------------


def parse_seeds(text):
    """``1-5``, ``1,3,7`` or ``3`` as a list of distinct seeds in the order given."""
    seeds = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise argparse.ArgumentTypeError(
                "--seeds takes N, A-B or a comma list such as 1,3,7; got %r" % text)
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise argparse.ArgumentTypeError("--seeds range %s runs backwards" % part)
        if hi - lo > 10000:
            raise argparse.ArgumentTypeError("--seeds range %s is longer than 10,001 seeds" % part)
        for seed in range(lo, hi + 1):
            if seed not in seeds:
                seeds.append(seed)
    return seeds


def parse_delays(text):
    """``10s,10m,1h,4h`` as a tuple of seconds."""
    delays = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*([smh]?)\s*", part)
        if not m:
            raise argparse.ArgumentTypeError(
                "--delays takes a comma list of durations such as 10s,10m,1h,4h; got %r" % text)
        seconds = int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
        if seconds > 7 * 24 * 3600:
            raise argparse.ArgumentTypeError("--delays %s is longer than 7 days" % part.strip())
        delays.append(seconds)
    return tuple(delays)


def _bounded(name, low, high, kind=int, why=""):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%s takes a number, got %r" % (name, text)) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError("%s must be from %s to %s%s, got %s"
                                             % (name, low, high, why, text))
        return value
    return parse


def file_error(path):
    """Why ``path`` cannot be written, or ``None``: tried (and undone) before a long run."""
    existed = os.path.exists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        return "cannot write %s: %s" % (path, exc.strerror or exc)
    if not existed:
        os.remove(path)
    return None


def directory_error(path):
    """Why databases cannot be kept in directory ``path`` (made if missing), or ``None``."""
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix="sim-probe-", suffix=".db", dir=path)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        return "cannot keep databases in %s: %s" % (path, exc.strerror or exc)
    return None


def database_error(url):
    """Why the simulation cannot run on PostgreSQL at ``url``, or ``None``: tried before a run."""
    if not url.startswith(kb_store.POSTGRES_SCHEMES):
        return ("%s is not a postgresql:// URL (keep SQLite files with --db-dir DIR)"
                % kb_store.kb_core.clip(url))
    try:
        import kb_postgres

        kb_postgres.schema_address(url, "sim_probe", fresh=True)
        kb_postgres.drop_schema(url, "sim_probe")
    except (kb_store.ToolError, ValueError) as exc:
        return getattr(exc, "message", str(exc))
    return None


def _parser():
    p = argparse.ArgumentParser(prog="sim.py", description=__doc__.split("\n\n")[0])
    d = Config()
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-5"),
                   help="N, A-B or a comma list (default 1-5)")
    p.add_argument("--articles", type=_bounded(
        "--articles", 2, MAX_ARTICLES, why=" (the distinct titles of %d actions x %d subjects x "
        "%d audiences x %d surfaces or none)" % (len(ACTIONS), len(SUBJECTS), len(AUDIENCES),
                                                  len(SURFACES))), default=d.articles)
    p.add_argument("--questions", type=_bounded("--questions", 1, MAX_QUESTIONS),
                   default=d.questions)
    p.add_argument("--saves", type=_bounded("--saves", 0, MAX_SAVES), default=d.saves)
    p.add_argument("--hours", type=_bounded("--hours", 1, MAX_HOURS), default=d.hours)
    p.add_argument("--zipf", type=_bounded("--zipf", 0.0, 10.0, float), default=d.zipf,
                   help="Zipf exponent s (0 = uniform popularity)")
    p.add_argument("--delays", type=parse_delays, default=d.delays,
                   help="edit delays, e.g. 10s,10m,1h,4h")
    p.add_argument("--popularity", choices=POPULARITY, default=d.popularity,
                   help="the popularity ranking: independent of titles, or topical (a subject's "
                        "articles on consecutive ranks)")
    p.add_argument("--questions-from", choices=QUESTIONS_FROM, default=d.questions_from,
                   help="a question's words: its article's title, or a paraphrase (action and "
                        "subject only)")
    p.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    p.add_argument("--db-dir", metavar="DIR", help="keep each run's SQLite file in DIR")
    # Not $KB_DB: that names the store a person works on (often a SQLite file), and the
    # article's run must work the same whatever the shell exports.
    p.add_argument("--db", metavar="URL", default=None,
                   help="run on PostgreSQL: a postgresql:// URL; each run gets a fresh schema "
                        "sim_seedN_PART in that database (default: in memory)")
    p.add_argument("--per-seed", action="store_true", help="add a column per seed")
    p.add_argument("--processes", type=_bounded("--processes", 1, 64), default=None,
                   help="worker processes (default: one per core, at most one per seed)")
    return p


def main(argv=None):
    """Run the simulation, print the tables, and exit non-zero if a check failed."""
    parser = _parser()
    args = parser.parse_args(argv)
    config = Config(args.articles, args.questions, args.saves, args.hours, args.zipf, args.delays,
                    args.popularity, args.questions_from)
    for name, value, error in (("--json", args.json, file_error),
                               ("--db-dir", args.db_dir, directory_error),
                               ("--db", args.db, database_error)):
        problem = value and error(value)
        if problem:
            parser.error("%s: %s" % (name, problem))
    if args.db and args.db_dir:
        parser.error("--db and --db-dir: give one (PostgreSQL, or SQLite files)")
    report = run(args.seeds, config, db_dir=args.db_dir, processes=args.processes,
                 db_url=args.db)
    status = 1 if report["check_mismatches"] else 0
    if args.json:
        # Written before the tables, so a reader that leaves early loses none of it.
        try:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump(report, fh, indent=1, sort_keys=True)
                fh.write("\n")
        except OSError as exc:  # checked before the run, yet the disk can still fill up
            print("sim.py: --json: cannot write %s: %s" % (args.json, exc.strerror or exc),
                  file=sys.stderr)
            status = 1
    try:
        print(render(report, per_seed=args.per_seed))
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (``sim.py | head``): say nothing more to it, and let the interpreter's
        # last flush go nowhere instead of raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    failed = report["check_mismatches"]
    for line in failed[:20]:
        print("sim.py: check failed: %s" % line, file=sys.stderr)
    if len(failed) > 20:
        print("sim.py: ... and %d more failed checks" % (len(failed) - 20), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
