"""Every limit and fixed value of the store, each with the reason it has that value.

The ground floor: nothing here imports anything of the package. The search tuning (BM25,
snippet windows) lives beside the code it tunes, in ``kbcite.search``.
"""

from datetime import timedelta

# Bumped whenever the schema changes; a file written by another schema is refused, not guessed at.
SCHEMA_VERSION = 10

# The first schema with the semantic half's vectors: an upgrade from before it embeds the
# store's articles where the model loads (else ``kb reindex`` does, later).
VECTORS_SCHEMA = 8

# Written into every store this package creates ("KBC1": the SQLite header's application_id,
# a PostgreSQL store's meta row), so that another application's database is told apart even
# when its user_version happens to equal ours.
APPLICATION_ID = 0x4B424331

# A writer waits this long for another process's transaction before giving up: long enough to
# ride out a burst of concurrent edits, short enough that a wedged writer surfaces as an error.
BUSY_TIMEOUT_S = 30.0

# RFC 9110 calls a timestamp a weak validator; one microsecond past the previous version makes
# ours strong: every save gets an updated_at that no earlier save of that article ever had.
VERSION_STEP_US = 1

# Stripe and the IETF idempotency-key draft keep keys at least a day: long enough for any retry
# loop, short enough that the table does not grow without bound.
IDEMPOTENCY_TTL = timedelta(hours=24)

IDEMPOTENCY_TTL_US = IDEMPOTENCY_TTL // timedelta(microseconds=1)

# Limits from the live tool list, and our own for the arguments it leaves open.
QUERY_MIN, QUERY_MAX = 2, 200

SEARCH_LIMIT_MAX, SEARCH_LIMIT_DEFAULT = 20, 10

EVENTS_LIMIT_MAX, EVENTS_LIMIT_DEFAULT = 100, 100

ID_MAX = 255
# A new knowledge base's ID: short enough for a shell prompt, a URL segment and a file name.
KB_ID_MAX = 64

# Article IDs are art-000001 up to art-999999: six digits keep their text order equal to their
# creation order, which search relies on to break ties by article ID.
MAX_ARTICLES_PER_KB = 999999

KEY_MAX = 255

TITLE_MAX = 200

CONTENT_MAX_BYTES = 1024 * 1024

# A Markdown file an import reads holds content plus a title and front matter (an export's
# adds four keys): 64 KiB of room for those; a larger file is refused before it is read whole.
FILE_MAX_BYTES = CONTENT_MAX_BYTES + 64 * 1024

VERSION_MAX = 64

# An imported article's source path, which an export writes back: a name at most what every
# common file system holds in one component (255 bytes), the whole well under PATH_MAX (4096)
# once joined to the export folder.
SOURCE_COMPONENT_MAX = 255
SOURCE_MAX = 1024

# Longest piece of a caller's own text that an error message quotes back.
SHOWN_MAX = 80

# What an import can do with one file or article, in the order a summary lists them.
SYNC_ACTIONS = ("create", "update", "rename", "adopt", "unchanged", "conflict", "unpublish",
                "orphan")

RESOURCE_TYPES = ("channel", "note", "knowledge_base", "record", "session")

EVENT_PUBLISHED = "article.published"

EVENT_UPDATED = "article.updated"

EVENT_UNPUBLISHED = "article.unpublished"

# A published article deleted for good: its citations come back gone, and stay gone.
EVENT_DELETED = "article.deleted"

# A proposal's life (writes mode review): made, then approved (the event's updated_at is the
# version it produced), rejected (with the reviewer's reason) or expired, undecided.
PROPOSAL_EVENTS = ("proposal.created", "proposal.approved", "proposal.rejected",
                   "proposal.expired")

# -- versions kept (the history) ------------------------------------------------------------------

# How a version came to be, as the history lists it.
ACTIONS = ("create", "save", "edit", "import", "publish", "unpublish", "revert", "upgrade")

# How long an approval handle stays good: long enough to read an edit, short enough that a
# forgotten one lapses (as long as a handshake session's question waits, ASK_TIMEOUT_S).
APPROVAL_TTL_S = 600

# One check_citations call answers for at most this many citations: a page of poll_resource_events
# holds up to 100 changes, so one call covers what one poll can report.
CITATIONS_MAX = 100
# The change from a cited version to now is cut to this many characters of paragraph text per
# citation (and flagged ``truncated``): enough to re-apply a typical edit, bounded whatever the
# article's size, so 100 citations stay a reply a model can read.
CHANGES_MAX_CHARS = 4000
# Who made a version (a token's name, a person's login, "import") and why, as recorded.
ACTOR_MAX = 256
# The issuer recorded beside an actor is an issuer URL, which OAuth bounds nowhere: this is
# longer than any real one, and keeps a row small.
ISSUER_MAX = 1024
SUMMARY_MAX = 200
# The longest retention `kb history prune` takes: a hundred years.
KEEP_DAYS_MAX = 36500
