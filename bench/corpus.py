"""Believable help-centre articles of about 300 words, any number of them, from one seed.

Titles are action + optional qualifier + subject + audience ("Reset expired passwords for
admins"), drawn from a vocabulary large enough for millions of distinct titles, so a
100,000-article knowledge base is not 100,000 near-copies. Bodies are support prose: an
introduction about the title's subject, numbered steps, and general paragraphs that sometimes
mention a neighbouring subject, as real help articles do. All randomness is ``rng.random()``,
which gives the same sequence on every Python version.
"""

import common  # noqa: F401  (puts the checkout on sys.path)
from kbcite.sim import model
from kbcite.sim.plan import pick as sim_pick

ACTIONS = model.ACTIONS + (
    "Rename", "Restrict", "Monitor", "Review", "Approve", "Assign", "Revoke", "Test",
    "Reconnect", "Refresh", "Limit", "Customize", "Download", "Print", "Translate", "Duplicate",
)
# An empty qualifier half the time: most help titles have none.
QUALIFIERS = ("",) * 25 + (
    "expired", "duplicate", "recurring", "failed", "pending", "archived", "default", "custom",
    "scheduled", "locked", "missing", "imported", "legacy", "unpaid", "blocked", "inactive",
    "encrypted", "temporary", "regional", "primary", "secondary", "overdue", "unverified",
    "external", "bulk",
)
SUBJECTS = model.SUBJECTS + (
    "user groups", "signup forms", "landing pages", "discount codes", "gift cards",
    "shipping labels", "return requests", "order histories", "product catalogs", "price lists",
    "inventory counts", "warehouse locations", "vendor profiles", "expense reports",
    "receipts", "timesheets", "payroll runs", "leave requests", "onboarding checklists",
    "training courses", "survey responses", "feedback forms", "meeting rooms", "video calls",
    "screen recordings", "file previews", "version histories", "comment threads",
    "task boards", "sprint plans", "milestones", "dashboards", "saved filters",
    "custom fields", "automation rules", "escalation paths", "service levels",
    "holiday calendars", "phone numbers", "SMS messages", "voicemail greetings",
    "call queues", "chatbot replies", "macros", "tags", "spam filters", "mail forwarding",
    "DNS records", "SSL certificates", "encryption keys",
)
AUDIENCES = model.AUDIENCES + model.SURFACES
SURFACES = model.SURFACES + ("in the Help menu", "in Account settings", "in Integrations",
                           "on the Home page")

INTROS = (
    "This guide explains how to {a} {s} {u}.",
    "Many teams need to {a} {s} {u} at some point.",
    "You can {a} {s} {u} in a few minutes.",
    "Here is how to {a} {s} {u}, and what to check first.",
)
CONTEXT = (
    "Most customers ask about {s} when something has changed in their account.",
    "Our support team hears about {s} mostly after a change of plan.",
    "A common mistake with {s} is forgetting that changes apply to the whole workspace.",
    "If {s} do not behave as expected, read the troubleshooting notes below.",
    "Only people with the right role can change {s}.",
    "Changes to {s} are recorded in the activity history.",
)
STEPS = (
    "Open the page {w} and sign in with an owner account.",
    "Choose {s} from the list on the left.",
    "Select the items you want to change, or use the search box to find them.",
    "Click the {a} button and confirm the dialog.",
    "Wait for the green confirmation banner before you leave the page.",
    "Check the result {w} and try it with one person first.",
    "Keep a copy of the current settings, just in case.",
    "Ask a second administrator to look over the change.",
)
GENERAL = (
    "The change takes effect immediately for everyone in the workspace.",
    "Large organisations may need a few minutes before it shows everywhere.",
    "Keep a copy of the old value until you have tested its replacement.",
    "Everything is recorded, so you can undo it within thirty days.",
    "Look at the service status page first if several colleagues report the same problem.",
    "Ask the workspace owner if the option is greyed out.",
    "Phones receive the fresh value the next time they sign in.",
    "Messages may be delayed for a short while when the queue is long.",
    "The nightly job handles anything you change after six in the evening.",
    "A browser extension that blocks scripts can hide the button.",
    "Clearing the cache of the browser often fixes a page that looks out of date.",
    "Write to us with the request ID from the error message if it still fails.",
    "Customers on the free plan see a shorter list of options.",
    "Contracts that name a data region keep every copy in that region.",
    "The activity history shows who made each change and when.",
    "Reviewers get an email as soon as a request waits for them.",
    "Nothing is deleted for good until the retention period has passed.",
    "Partners who manage several workspaces can repeat these steps in each one.",
    "Keyboard shortcuts for this page are listed in the Help menu.",
    "If the page shows an error, wait a minute and try again before contacting us.",
)
RELATED = (
    "This works the same way for {s}.",
    "See also the guide on {s}, which follows the same rules.",
    "People who change this often also ask about {s}.",
)
WORDS_TARGET = 300


def pick(seq, u):
    """The element of ``seq`` that a uniform ``u`` in [0, 1) selects."""
    return sim_pick(seq, u)


def make_title(rng):
    """One title and its (action, subject, audience) parts."""
    action, qualifier = pick(ACTIONS, rng.random()), pick(QUALIFIERS, rng.random())
    subject, audience = pick(SUBJECTS, rng.random()), pick(AUDIENCES, rng.random())
    words = [action, qualifier, subject, audience] if qualifier else [action, subject, audience]
    return " ".join(words), (action, (qualifier + " " + subject).strip(), audience)


def make_body(rng, action, subject, audience):
    """About 300 words of help text about ``subject``."""
    a = action.lower()
    fill = {"a": a, "s": subject, "u": audience, "w": pick(SURFACES, rng.random())}
    paragraphs = [" ".join((pick(INTROS, rng.random()).format(**fill),
                            pick(CONTEXT, rng.random()).format(**fill)))]
    steps = [s.format(**fill) for s in STEPS if rng.random() < 0.6] or [STEPS[3].format(**fill)]
    paragraphs.append("\n".join("%d. %s" % (i + 1, s) for i, s in enumerate(steps)))
    words = sum(len(p.split()) for p in paragraphs)
    while words < WORDS_TARGET:
        sentences = []
        for _ in range(2 + int(rng.random() * 3)):
            sentence = pick(GENERAL, rng.random())
            if sentence not in sentences:
                sentences.append(sentence)
        if rng.random() < 0.3:
            # A mention of a neighbouring subject, so a subject's words are not in its own
            # articles alone.
            sentences.append(pick(RELATED, rng.random()).format(s=pick(SUBJECTS, rng.random())))
        paragraph = " ".join(sentences)
        paragraphs.append(paragraph)
        words += len(paragraph.split())
    return "\n\n".join(paragraphs)


def articles(rng, count):
    """``count`` (title, body) pairs with distinct titles."""
    seen, out = set(), []
    while len(out) < count:
        title, (action, subject, audience) = make_title(rng)
        if title in seen:
            continue
        seen.add(title)
        out.append((title, make_body(rng, action, subject, audience)))
    return out


def question(title):
    """The query an agent sends for an article: its title's words, lower-cased (as the day does)."""
    return title.lower()
