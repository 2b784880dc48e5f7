"""The model's fixed parts: its constants and vocabulary, the records a day is made of, and the
simulated clock. Everything else in the simulation stands on this module; it imports none of it.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Optional

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
    image: Optional[bytes]
    article_ids: Optional[list]


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
    """The simulated clock handed to the store; the day's scheduler moves it from step to step."""

    def __init__(self):
        self.t_us = 0

    def __call__(self):
        """The simulated time as the store reads it."""
        return DAY_START + timedelta(microseconds=self.t_us)

    def time_us(self):
        """Microseconds since the day started: the scheduler's ``timefunc``."""
        return self.t_us

    def advance(self, us):
        """Move the time on by ``us`` microseconds: the scheduler's ``delayfunc``, which has
        nothing to wait for."""
        self.t_us += us


def delay_text(seconds):
    """A delay as the tables and messages write it: ``10s``, ``10m``, ``1h``."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return "%d%s" % (seconds // size, unit)
    return "%ds" % seconds
