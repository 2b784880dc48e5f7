"""A knowledge-base store whose citations are version stamps.

Four agent tools over SQLite, named, described and limited exactly as osFoundry's live
``tools/list``: ``search_knowledge_base``, ``read_knowledge_article``,
``edit_knowledge_article`` and ``poll_resource_events``. A search hit and a read both return a
citation ``{knowledge_base_id, article_id, updated_at}``; the edit tool takes that same
``updated_at`` back as ``expected_version`` and performs a compare-and-swap on it; every change
that agents can see writes one event into a gapless per-knowledge-base log, so an agent checks
all of its old citations by resuming from one integer cursor.

People's side (the app's own editor): ``create_knowledge_base``, ``create_article``,
``save_article``, ``publish`` and ``unpublish``. Agent's side: ``TOOLS`` and ``call_tool``.
Run ``python kb_store.py --help`` for the admin command line.
"""

import collections
import contextlib
import hashlib
import heapq
import json
import logging
import operator
import os
import re
import sqlite3
import sys
import unicodedata
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

# Bumped whenever the schema changes; a file written by another schema is refused, not guessed at.
SCHEMA_VERSION = 2
# Written into the SQLite header of every store this module creates ("KBC1"), so that another
# application's file is told apart even when its user_version happens to equal ours.
APPLICATION_ID = 0x4B424331
# The tables every store has had since schema 1; a file made before APPLICATION_ID existed is
# recognised by them (its application_id is 0).
STORE_TABLES = frozenset({"knowledge_bases", "articles", "events", "idempotency"})

# A writer waits this long for another process's transaction before giving up: long enough to
# ride out a burst of concurrent edits, short enough that a wedged writer surfaces as an error.
BUSY_TIMEOUT_S = 30.0

# RFC 9110 calls a timestamp a weak validator; one microsecond past the previous version makes
# ours strong: every save gets an updated_at that no earlier save of that article ever had.
VERSION_STEP_US = 1

# Stripe and the IETF idempotency-key draft keep keys at least a day: long enough for any retry
# loop, short enough that the table does not grow without bound.
IDEMPOTENCY_TTL = timedelta(hours=24)

# Limits from the live tool list, and our own for the arguments it leaves open.
QUERY_MIN, QUERY_MAX = 2, 200
SEARCH_LIMIT_MAX, SEARCH_LIMIT_DEFAULT = 20, 10
EVENTS_LIMIT_MAX, EVENTS_LIMIT_DEFAULT = 100, 100
ID_MAX = 255
# Up to this many published articles, search scores every article holding any query word in one
# pass (cheaper there than several queries); above it, intersections first (see _ranked_in_tiers).
# Both give the same hits in the same order.
ONE_PASS_MAX_ARTICLES = 2000
# Article IDs are art-000001 up to art-999999: six digits keep their text order equal to their
# creation order, which search relies on to break ties by article ID at no cost.
MAX_ARTICLES_PER_KB = 999999
KEY_MAX = 255
TITLE_MAX = 200
CONTENT_MAX_BYTES = 1024 * 1024
VERSION_MAX = 64
# Longest piece of a caller's own text that an error message quotes back.
SHOWN_MAX = 80

# Title matches count five times a body match: a query made of a title's words should find
# that article first, as a person searching a help centre expects.
TITLE_WEIGHT, BODY_WEIGHT = 5.0, 1.0
SNIPPET_WORDS = 16
SNIPPET_MAX_MATCHES = 12
# Recent snippets kept per store, keyed by article version and query words: a few hundred KB.
SNIPPET_CACHE_SIZE = 4096

# Words that match nearly every article: left in an any-word query they add nothing to the
# ranking and make bm25 score the whole knowledge base, so they are dropped from queries.
STOPWORDS = frozenset("""
a an and are as at be by can do does for from how i if in into is it its my not of on or our
so than that the their then there these this to was we what when where which who why will
with you your
""".split())
_PUNCTUATION = "\"'.,;:!?()[]{}<>*^-+~`|/\\"

# What an import can do with one file or article, in the order a summary lists them.
SYNC_ACTIONS = ("create", "update", "rename", "unchanged", "conflict", "unpublish", "orphan")

RESOURCE_TYPES = ("channel", "note", "knowledge_base", "record", "session")
EVENT_PUBLISHED = "article.published"
EVENT_UPDATED = "article.updated"
EVENT_UNPUBLISHED = "article.unpublished"

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

log = logging.getLogger("kb_store")
# ASCII digits only, and \Z rather than $, which would let a trailing newline through.
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"([Zz]|[+-]\d{2}:\d{2})\Z",
    re.ASCII,
)


class ToolError(Exception):
    """A call that could not be carried out; ``code`` is stable, ``message`` says what to do."""

    code = "error"

    def __init__(self, message, **details):
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self):
        """The error as JSON-ready data."""
        return {"code": self.code, "message": self.message, "details": dict(self.details)}


class InvalidArgument(ToolError):
    """An argument is missing, of the wrong type, or outside its limits."""

    code = "invalid_argument"


class NotFound(ToolError):
    """No such published article or granted knowledge base."""

    code = "not_found"


class VersionConflict(ToolError):
    """The article changed since the version the caller read."""

    code = "version_conflict"


class IdempotencyKeyReused(ToolError):
    """The idempotency key was already used for a different request."""

    code = "idempotency_key_reused"


class StoreBusy(ToolError):
    """Another writer held the database past the wait; nothing was written, a retry is safe."""

    code = "store_busy"


class StoreFailed(ToolError):
    """The database failed (disk full, I/O error); the transaction left nothing half done."""

    code = "store_failed"


class StoreDamaged(ToolError):
    """The stored data contradicts itself (a gap in the event log, a broken index or file)."""

    code = "store_damaged"


class NotAStore(ToolError):
    """The path or address holds no knowledge-base store, or one this version cannot read."""

    code = "not_a_store"


class InternalError(ToolError):
    """A fault in this program, not in the call; the transaction was rolled back."""

    code = "internal_error"


def _string(description, min_length=1, max_length=ID_MAX, **extra):
    schema = {"type": "string", "minLength": min_length, "maxLength": max_length}
    schema.update(extra)
    schema["description"] = description
    return schema


_KB_ID = _string("ID of a granted knowledge base.")
_ARTICLE_ID = _string("Article ID, as a search hit or citation gives it.")
_UPDATED_AT = {"type": "string", "format": "date-time"}
_CITATION = {
    "type": "object",
    "properties": {
        "knowledge_base_id": {"type": "string"},
        "article_id": {"type": "string"},
        "updated_at": _UPDATED_AT,
    },
    "required": ["knowledge_base_id", "article_id", "updated_at"],
    "additionalProperties": False,
}
_EVENT = {
    "type": "object",
    "properties": {
        "sequence": {"type": "integer", "minimum": 1},
        "type": {"type": "string", "enum": [EVENT_PUBLISHED, EVENT_UPDATED, EVENT_UNPUBLISHED]},
        "article_id": {"type": "string"},
        "updated_at": _UPDATED_AT,
    },
    "required": ["sequence", "type", "article_id", "updated_at"],
    "additionalProperties": False,
}


def _object(properties, required=None):
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


TOOLS = [
    {
        "name": "search_knowledge_base",
        "description": (
            "Search current published articles in one granted knowledge base. Results cite the "
            "article ID and updated time; this is a live database read."
        ),
        "inputSchema": _object(
            {
                "knowledge_base_id": _KB_ID,
                "query": _string("Words to look for.", QUERY_MIN, QUERY_MAX),
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": SEARCH_LIMIT_MAX,
                    "description": "Most hits to return (default %d)." % SEARCH_LIMIT_DEFAULT,
                },
            },
            ["knowledge_base_id", "query"],
        ),
        "outputSchema": _object(
            {
                "knowledge_base_id": {"type": "string"},
                "query": {"type": "string"},
                "results": {
                    "type": "array",
                    "items": _object(
                        {
                            "article_id": {"type": "string"},
                            "title": {"type": "string"},
                            "snippet": {"type": "string"},
                            "updated_at": _UPDATED_AT,
                            "citation": _CITATION,
                        }
                    ),
                },
                "head_sequence": {"type": "integer", "minimum": 0},
            }
        ),
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "read_knowledge_article",
        "description": (
            "Read one current published article by ID from a granted knowledge base and return "
            "a stable citation."
        ),
        "inputSchema": _object(
            {"knowledge_base_id": _KB_ID, "article_id": _ARTICLE_ID},
            ["knowledge_base_id", "article_id"],
        ),
        "outputSchema": _object(
            {
                "knowledge_base_id": {"type": "string"},
                "article_id": {"type": "string"},
                "title": {"type": "string"},
                "content": {"type": "string"},
                "updated_at": _UPDATED_AT,
                "citation": _CITATION,
                "head_sequence": {"type": "integer", "minimum": 0},
            }
        ),
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "edit_knowledge_article",
        "description": (
            "Replace article content and optionally its title. Supply the version from "
            "read_knowledge_article; concurrent changes are rejected."
        ),
        "inputSchema": _object(
            {
                "knowledge_base_id": _KB_ID,
                "article_id": _ARTICLE_ID,
                "content": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The whole new content, at most 1 MiB of UTF-8.",
                },
                "title": _string("New title; omit to keep the current one.", 1, TITLE_MAX),
                "expected_version": _string(
                    "The updated_at of the citation you read; the edit is rejected if the "
                    "article changed since.",
                    1,
                    VERSION_MAX,
                    format="date-time",
                ),
                "idempotency_key": _string(
                    "A fresh unique key per intended change; resending the same call with the "
                    "same key returns the first result and writes nothing.",
                    1,
                    KEY_MAX,
                ),
            },
            ["knowledge_base_id", "article_id", "content", "expected_version", "idempotency_key"],
        ),
        "outputSchema": _object(
            {
                "knowledge_base_id": {"type": "string"},
                "article_id": {"type": "string"},
                "title": {"type": "string"},
                "updated_at": _UPDATED_AT,
                "previous_version": _UPDATED_AT,
                "citation": _CITATION,
                "event": _EVENT,
                "replayed": {"type": "boolean"},
            }
        ),
        "annotations": {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True},
    },
    {
        "name": "poll_resource_events",
        "description": (
            "Resume from an event sequence for one granted channel, Note, knowledge base, "
            "record, or session."
        ),
        "inputSchema": _object(
            {
                "resource_type": {
                    "type": "string",
                    "enum": list(RESOURCE_TYPES),
                    "description": "Kind of resource; this store keeps logs for knowledge_base.",
                },
                "resource_id": _string("ID of the resource, e.g. a knowledge base ID."),
                "after_sequence": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Return events after this sequence (default 0: from the start).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": EVENTS_LIMIT_MAX,
                    "description": "Most events to return (default %d)." % EVENTS_LIMIT_DEFAULT,
                },
            },
            ["resource_type", "resource_id"],
        ),
        "outputSchema": _object(
            {
                "resource_type": {"type": "string"},
                "resource_id": {"type": "string"},
                "events": {"type": "array", "items": _EVENT},
                "next_after_sequence": {"type": "integer", "minimum": 0},
                "has_more": {"type": "boolean"},
                "head_sequence": {"type": "integer", "minimum": 0},
            }
        ),
        "annotations": {"readOnlyHint": True},
    },
]

_SCHEMA_SQL = """
CREATE TABLE knowledge_bases (
    pk INTEGER PRIMARY KEY,
    kb_id TEXT NOT NULL UNIQUE,
    name TEXT,
    head_sequence INTEGER NOT NULL DEFAULT 0,
    published_count INTEGER NOT NULL DEFAULT 0,
    articles_created INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE articles (
    pk INTEGER PRIMARY KEY,
    kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk),
    article_id TEXT NOT NULL,
    title TEXT NOT NULL,
    published INTEGER NOT NULL,
    version_us INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    -- The file an import made it from, and the version that import wrote (or found equal to
    -- the file): a later version means someone edited it since, and import leaves it alone.
    source TEXT,
    import_version TEXT,
    -- Last, so reading the small columns never walks a long article's overflow pages.
    content TEXT NOT NULL,
    UNIQUE (kb_pk, article_id),
    UNIQUE (kb_pk, source)
);
CREATE TABLE events (
    kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk),
    sequence INTEGER NOT NULL,
    type TEXT NOT NULL,
    article_id TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (kb_pk, sequence)
) WITHOUT ROWID;
CREATE TABLE idempotency (
    kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk),
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    result TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    PRIMARY KEY (kb_pk, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_age ON idempotency (created_us);
"""

# The statements that take a store of schema N to N + 1 (run by KBStore.upgrade). An article
# imported under schema 1 gets no import version: re-importing it reports a conflict where its
# text differs from its file, rather than overwriting an edit it cannot rule out.
_MIGRATIONS = {
    1: ["ALTER TABLE articles ADD COLUMN import_version TEXT"],
}

# One full-text table per knowledge base, holding published articles only: bm25's document
# statistics then come from what this knowledge base's agents may see, so neither a draft nor
# another knowledge base can move a ranking. The table name is built from an integer key.
_FTS_SQL = (
    "CREATE VIRTUAL TABLE fts_{pk} USING fts5(title, content, content='articles', "
    "content_rowid='pk', tokenize='unicode61 remove_diacritics 2')"
)
# Every save rewrites an article's index entries, and each write adds a segment that every
# query must visit until merged. Merging at two segments a level (not four) and all at once at
# four (not sixteen) keeps a busy index near one segment: searches measured twice as fast after
# a day of saves, for a little more work per write.
_FTS_TUNING = (("automerge", 2), ("crisismerge", 4))


def format_version(us):
    """RFC 3339 UTC text, microseconds and ``Z``, of microseconds since the epoch."""
    dt = EPOCH + timedelta(microseconds=us)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (
        dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second, dt.microsecond
    )


def datetime_to_us(dt):
    """Microseconds since the epoch of an aware datetime."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError("the clock must return an aware datetime, got naive %r" % (dt,))
    return (dt - EPOCH) // timedelta(microseconds=1)


def parse_version(text, argument="expected_version"):
    """Microseconds since the epoch of an RFC 3339 date-time; ``None`` if finer than 1 us.

    Any spelling of the same instant gives the same number (offsets, no fraction, ``z``).
    An instant with nonzero digits past the microsecond can equal no version, hence ``None``.
    """
    m = _RFC3339.match(text)
    if not m:
        raise InvalidArgument(
            "%s %r is not an RFC 3339 date-time; send the updated_at of a citation, "
            "e.g. 2026-11-08T09:00:00.000000Z" % (argument, text),
            argument=argument,
        )
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, offset = m.group(7) or "", m.group(8)
    try:
        base = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    except ValueError as exc:
        raise InvalidArgument(
            "%s %r is not a valid date-time (%s)" % (argument, text, exc), argument=argument
        ) from None
    if offset not in ("Z", "z"):
        sign = 1 if offset[0] == "+" else -1
        oh, om = int(offset[1:3]), int(offset[4:6])
        if oh > 23 or om > 59:
            raise InvalidArgument(
                "%s %r has an invalid UTC offset" % (argument, text), argument=argument
            )
        try:
            base -= sign * timedelta(hours=oh, minutes=om)
        except OverflowError:
            raise InvalidArgument(
                "%s %r is outside the years 1-9999 in UTC" % (argument, text), argument=argument
            ) from None
    if fraction[6:].strip("0"):
        return None
    return datetime_to_us(base) + int((fraction + "000000")[:6])


def query_terms(text):
    """The distinct searchable whitespace-separated pieces of a query, function words dropped.

    Common English function words are dropped unless nothing else is left (a query of only
    ``and or not`` still searches for them). Pieces with no letter or digit are skipped, and
    a piece repeated (in any case) counts once.
    """
    pieces = [piece for piece in text.split()
              if any(ch.isalnum() for ch in piece) or any(ord(ch) > 127 for ch in piece)]
    content_words = [p for p in pieces if p.strip(_PUNCTUATION).lower() not in STOPWORDS]
    distinct = {}
    for piece in content_words or pieces:
        distinct.setdefault(piece.lower(), piece)
    return list(distinct.values())


def fts_literal(piece):
    """One query piece as an FTS5 string literal: searched for as text, never parsed as syntax.

    Inside double quotes ``AND``, ``NEAR``, ``*``, ``:`` or ``(`` are plain text; a quote is
    doubled. The tokenizer then splits the literal as it splits articles.
    """
    return '"%s"' % piece.replace('"', '""')


def fts_query(text):
    """An FTS5 query matching any of the words of ``text``, or ``None`` if none is searchable."""
    return " OR ".join(fts_literal(piece) for piece in query_terms(text)) or None


def _joins_word(ch):
    """Whether ``ch`` continues a word (so a match beside it is only part of a word)."""
    if ch < "\x80":
        return ch.isalnum() or ch == "_"
    return ch.isalnum() or unicodedata.category(ch)[0] == "M"


def _find_terms(text, terms):
    """Sorted, non-overlapping ``(start, end, term)`` of whole-word matches of ``terms``."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a letter whose lower case is longer would shift offsets
        lowered = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in text)
    size, hits = len(lowered), []
    for term in terms:
        at, found = lowered.find(term), 0
        # A snippet shows one window; a dozen matches of a word are plenty to place it.
        while at >= 0 and found < SNIPPET_MAX_MATCHES:
            stop = at + len(term)
            if ((at == 0 or not _joins_word(lowered[at - 1]))
                    and (stop == size or not _joins_word(lowered[stop]))):
                hits.append((at, stop, term))
                found += 1
            at = lowered.find(term, stop)
    hits.sort(key=lambda hit: (hit[0], -hit[1]))
    kept, reach = [], 0
    for hit in hits:
        if hit[0] >= reach:
            kept.append(hit)
            reach = hit[1]
    return kept


def make_snippet(text, terms, words=SNIPPET_WORDS):
    """About ``words`` words of ``text`` around its densest cluster of ``terms``, marked **.

    Display only: matching is case-insensitive on whole words, without FTS5's diacritic
    folding, so a snippet may show no mark where the index still matched.
    """
    cores = sorted({t.strip(_PUNCTUATION).lower() for t in terms} - {""}, key=len, reverse=True)
    hits = _find_terms(text, cores) if cores else []
    width = words * 7  # characters: an English word and its space average about seven
    start, best, seen, j = 0, None, {}, 0
    for i, (at, _, term) in enumerate(hits):
        # Slide a window of ``width`` characters over the hits; score it by distinct terms.
        while j < len(hits) and hits[j][0] < at + width:
            seen[hits[j][2]] = seen.get(hits[j][2], 0) + 1
            j += 1
        if best is None or (len(seen), j - i) > best[0]:
            best = ((len(seen), j - i), at)
        seen[term] -= 1
        if not seen[term]:
            del seen[term]
    if best is not None and len(text) > width:
        # Start a few words before the cluster, at a word boundary, for context.
        start = best[1]
        for _ in range(3):
            start = text.rfind(" ", 0, max(start - 1, 0)) + 1
        if len(text) - start < width:  # near the end: show a full window, ending at the end
            start = text.rfind(" ", 0, len(text) - width) + 1
    end = text.find(" ", start + width)
    end = len(text) if end < 0 else end
    parts, cursor = [], start
    for at, stop, _ in hits:
        if start <= at and stop <= end:
            parts += [text[cursor:at], "**", text[at:stop], "**"]
            cursor = stop
    parts.append(text[cursor:end])
    piece = " ".join("".join(parts).split())
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")


def _check_text(value, argument):
    """Refuse strings SQLite or UTF-8 cannot hold faithfully: NUL and lone surrogates."""
    if "\x00" in value:
        raise InvalidArgument("%s must not contain NUL characters" % argument, argument=argument)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(
            "%s is not valid Unicode (it holds a lone surrogate)" % argument, argument=argument
        ) from None


def validate_arguments(schema, arguments):
    """Check ``arguments`` against one of our input schemas; return them with defaults unset.

    Covers exactly the JSON Schema keywords our tools use: type, required,
    additionalProperties, minLength, maxLength, minimum, maximum, enum.
    """
    if not isinstance(arguments, dict):
        raise InvalidArgument(
            "arguments must be a JSON object, got %s" % type(arguments).__name__,
            argument="arguments",
        )
    properties = schema["properties"]
    for name in arguments:
        if not isinstance(name, str):
            raise InvalidArgument(
                "argument names must be strings, got %s %s" % (_json_type(name), _shown(name)),
                argument="arguments",
            )
        if name not in properties:
            raise InvalidArgument(
                "unknown argument %s; this tool takes %s" % (_shown(name), ", ".join(properties)),
                argument=_clip(name),
            )
    for name in schema["required"]:
        if name not in arguments:
            raise InvalidArgument("missing required argument %r" % name, argument=name)
    clean = {}
    for name, value in arguments.items():
        rule = properties[name]
        if rule["type"] == "string":
            if not isinstance(value, str):
                raise InvalidArgument(
                    "%s must be a string, got %s" % (name, _json_type(value)), argument=name
                )
            _check_text(value, name)
            if len(value) < rule.get("minLength", 0):
                raise InvalidArgument(
                    "%s must be at least %d characters, got %d"
                    % (name, rule["minLength"], len(value)),
                    argument=name,
                )
            if "maxLength" in rule and len(value) > rule["maxLength"]:
                raise InvalidArgument(
                    "%s must be at most %d characters, got %d"
                    % (name, rule["maxLength"], len(value)),
                    argument=name,
                )
            if "enum" in rule and value not in rule["enum"]:
                raise InvalidArgument(
                    "%s must be one of %s, got %s" % (name, ", ".join(rule["enum"]), _shown(value)),
                    argument=name,
                )
        elif rule["type"] == "integer":
            # JSON Schema counts 3.0 as an integer; a bool is not a number.
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidArgument(
                    "%s must be an integer, got %s" % (name, _json_type(value)), argument=name
                )
            if value < rule.get("minimum", value):
                raise InvalidArgument(
                    "%s must be at least %d, got %s" % (name, rule["minimum"], _int_text(value)),
                    argument=name,
                )
            if value > rule.get("maximum", value):
                raise InvalidArgument(
                    "%s must be at most %d, got %s" % (name, rule["maximum"], _int_text(value)),
                    argument=name,
                )
        clean[name] = value
    return clean


def _clip(text):
    """A caller's string cut to a length fit for an error message."""
    return text if len(text) <= SHOWN_MAX else text[:SHOWN_MAX] + "…"


def _shown(value):
    """``repr`` of a caller's value for an error message, cut short: errors never echo megabytes."""
    if isinstance(value, str):
        return repr(_clip(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return _int_text(value)
    return repr(value)[:SHOWN_MAX]


def _int_text(value):
    """An integer for an error message; past 18 digits only its size (str() refuses huge ones)."""
    if abs(value) < 10 ** 18:
        return "%d" % value
    return "%san integer of about %d digits" % ("-" if value < 0 else "",
                                                  int(value.bit_length() * 0.30103) + 1)


def _json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _check_content(content, argument="content"):
    size = len(content.encode("utf-8"))
    if size > CONTENT_MAX_BYTES:
        raise InvalidArgument(
            "%s must be at most %d bytes of UTF-8 (1 MiB), got %d"
            % (argument, CONTENT_MAX_BYTES, size),
            argument=argument,
        )


def is_blank(text):
    """Whether ``text`` has no visible character: only separators (Z*), controls and formats."""
    return all(unicodedata.category(ch)[0] == "Z" or unicodedata.category(ch) in ("Cc", "Cf")
               for ch in text)


def _check_title(title, argument="title"):
    if is_blank(title):
        raise InvalidArgument(
            "%s must not be blank: it needs a visible character, not only spaces, controls or "
            "zero-width characters" % argument, argument=argument)


def _citation(kb_id, article_id, updated_at):
    return {"knowledge_base_id": kb_id, "article_id": article_id, "updated_at": updated_at}


def _fingerprint(kb_id, article_id, content, title, expected_us):
    """SHA-256 of the request as the store understands it, so a respelled version still matches."""
    canonical = json.dumps(
        [kb_id, article_id, content, title, expected_us], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _check_people_string(value, argument, max_length):
    if not isinstance(value, str):
        raise InvalidArgument("%s must be a string, got %s" % (argument, _json_type(value)),
                              argument=argument)
    _check_text(value, argument)
    if not value:
        raise InvalidArgument("%s must not be empty" % argument, argument=argument)
    if max_length is not None and len(value) > max_length:
        raise InvalidArgument("%s must be at most %d characters, got %d"
                              % (argument, max_length, len(value)), argument=argument)


def _check_new_article(title, content, title_argument, content_argument):
    _check_people_string(title, title_argument, TITLE_MAX)
    _check_title(title, title_argument)
    _check_people_string(content, content_argument, None)
    _check_content(content, content_argument)


@dataclass(frozen=True)
class SourceDocument:
    """One Markdown file as an import sees it: its path below the folder, title and content."""

    source: str
    title: str
    content: str


# YAML-style front matter: a first line of three dashes, ``key: value`` lines, a closing line
# of three dashes (or dots). Only ``title`` is used; other keys are allowed and ignored.
_FRONT_MATTER_END = ("---", "...")


def parse_markdown(text, fallback_title):
    """``(title, body)`` of a Markdown text: front matter ``title:``, else the first ``# ``
    heading (removed from the body), else ``fallback_title``. A BOM and front matter are
    stripped; raises ValueError for a text with no body."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines()
    title = None
    if lines and lines[0].rstrip() == "---":
        for end in range(1, len(lines)):
            if lines[end].rstrip() in _FRONT_MATTER_END:
                for line in lines[1:end]:
                    key, sep, value = line.partition(":")
                    if sep and key.strip().lower() == "title" and value.strip():
                        title = _yaml_scalar(value.strip())
                lines = lines[end + 1:]
                break
        else:
            raise ValueError("its front matter (a first line ---) has no closing --- line")
    if title is None:
        for i, line in enumerate(lines):
            if line.startswith("# ") and line[2:].strip():
                title = line[2:].strip().rstrip("#").strip() or line[2:].strip()
                lines = lines[:i] + lines[i + 1:]
                break
    body = "\n".join(lines).strip("\n")
    if is_blank(body):
        raise ValueError("it has no content%s" % (" below its title" if title else ""))
    return title if title is not None else fallback_title, body


def _yaml_scalar(value):
    """A one-line YAML scalar: quotes removed ('' and \\" unescaped), a trailing comment dropped."""
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return json.loads(value) if "\\" in value else value[1:-1]
    return value.split(" #", 1)[0].strip()


def read_markdown_folder(directory, progress=None):
    """Every ``*.md`` file below ``directory`` as SourceDocuments, sorted by path.

    Reads and checks them all before anything is written, so a bad file stops an import
    before it starts. Raises InvalidArgument naming the folder or file and what is wrong.
    """
    if not os.path.isdir(directory):
        raise InvalidArgument("%s is not a folder" % directory, argument="directory",
                              path=str(directory))
    failures = []

    def walk_error(exc):
        failures.append(exc)

    paths = []
    for root, dirs, files in os.walk(directory, onerror=walk_error):
        dirs.sort()
        paths.extend(os.path.join(root, name) for name in sorted(files) if name.endswith(".md"))
    if failures:
        exc = failures[0]
        raise InvalidArgument("cannot read the folder %s: %s" % (exc.filename, exc.strerror),
                              argument="directory", path=str(exc.filename))
    documents = []
    for done, path in enumerate(paths, 1):
        source = os.path.relpath(path, directory).replace(os.sep, "/")
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except OSError as exc:
            raise InvalidArgument("cannot read %s: %s" % (path, exc.strerror),
                                  argument="directory", path=path) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidArgument("%s is not UTF-8 text (byte %d is 0x%02x); save it as UTF-8"
                                  % (path, exc.start, raw[exc.start]), argument="directory",
                                  path=path) from None
        try:
            title, content = parse_markdown(text, os.path.splitext(os.path.basename(path))[0])
            _check_new_article(title, content, "title", "content")
        except (ValueError, ToolError) as exc:
            raise InvalidArgument("%s cannot be imported: %s" % (
                path, exc.message if isinstance(exc, ToolError) else exc),
                argument="directory", path=path) from None
        documents.append(SourceDocument(source, title, content))
        if progress is not None:
            progress("read", done, len(paths))
    return documents


def _conflict(kb, row, expected_version):
    """The version_conflict for an article whose current row is ``row``."""
    return VersionConflict(
        "article %r in knowledge base %r has changed: the current version is %s, not %s. "
        "Re-read it with read_knowledge_article, re-apply your change to the current content, "
        "and retry with expected_version %s and a new idempotency_key."
        % (row["article_id"], kb["kb_id"], row["updated_at"], expected_version,
           row["updated_at"]),
        knowledge_base_id=kb["kb_id"],
        article_id=row["article_id"],
        expected_version=expected_version,
        current_version=row["updated_at"],
    )


def _gap(kb, missing, head):
    """The store_damaged error for an event log missing sequence ``missing`` below ``head``."""
    return StoreDamaged(
        "the event log of knowledge base %r is damaged: event %d is missing (the head is %d), "
        "so a poll cannot go on from here. A retry will not help; the store's operator must "
        "run the audit and restore from a backup. Re-read cited articles by ID meanwhile."
        % (kb["kb_id"], missing, head),
        knowledge_base_id=kb["kb_id"], missing_sequence=missing, head_sequence=head,
        retryable=False)


def _granted(granted):
    """The granted knowledge-base IDs as a set; a lone string is a mistake, not a set of letters."""
    if isinstance(granted, str):
        raise TypeError("granted must be a collection of knowledge-base IDs, not a string")
    return frozenset(granted)


def _system_clock():
    return datetime.now(timezone.utc)


# SQLite's primary result codes that say who is at fault (sqlite3.Error.sqlite_errorcode exists
# from Python 3.11; older ones are told by the message text instead).
_SQLITE_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
_SQLITE_DAMAGE_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB


def store_error(exc, where="the knowledge-base database"):
    """The ToolError for a database failure ``exc``: busy, damaged, or failed, with what to do."""
    text = str(exc)
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    if primary in _SQLITE_BUSY_CODES or (primary is None and ("locked" in text or "busy" in text)):
        return StoreBusy(
            "%s is busy: another writer held it past the wait (%s). Nothing was written; "
            "retry the same call (an edit resent with the same idempotency_key is applied at "
            "most once)." % (where, text), retryable=True)
    if primary in _SQLITE_DAMAGE_CODES or (
            primary is None and ("malformed" in text or "not a database" in text)):
        return StoreDamaged(
            "%s is damaged (%s). A retry will not help: stop writing to it, run the audit and "
            "restore it from a backup." % (where, text), retryable=False)
    return StoreFailed(
        "%s failed (%s). Each write is all or nothing, so nothing was half done: retry the same "
        "call once the cause (a full disk, say) is fixed; an edit resent with the same "
        "idempotency_key returns the stored result if it was written." % (where, text),
        retryable=True)


def _sqlite_uri(path, create):
    """A ``file:`` URI for ``path`` that opens it read-write, creating it only if ``create``."""
    if path.startswith("file:"):
        return path  # the caller's own URI, with whatever mode it names
    quoted = urllib.request.pathname2url(os.path.abspath(path))
    return "file:%s?mode=%s" % (quoted, "rwc" if create else "rw")


@contextlib.contextmanager
def _tool_errors(name):
    """Make every failure inside a tool call a ToolError, so callers need catch one family."""
    try:
        yield
    except ToolError:
        raise
    except sqlite3.ProgrammingError:
        raise  # a closed store or a misuse by the host program, not the call's fault
    except sqlite3.Error as exc:
        raise store_error(exc) from exc
    except Exception as exc:
        log.exception("%s failed", name)
        raise InternalError(
            "%s failed inside the store (%s: %s); the transaction was rolled back, so nothing "
            "was half done. This is a fault in the store, not in the call: report it."
            % (name, type(exc).__name__, _clip(str(exc))), retryable=False) from exc



class KBStore:
    """Knowledge bases, their articles, their event logs and the four agent tools, in SQLite."""

    _upgrading = False  # set only by upgrade(), which opens an older schema to migrate it

    def __init__(self, path=":memory:", *, clock=None, create=False, timeout=BUSY_TIMEOUT_S):
        """Open the store at ``path``; only with ``create=True`` is a missing or empty file made one.

        Opening an existing store reads its header and takes no lock a writer could hold up,
        and a file that is not a store is refused (``NotAStore``) without a byte of it changed.
        A write waits up to ``timeout`` seconds for another process's transaction.
        """
        self.path = path
        self.timeout = timeout
        self._clock = clock or _system_clock
        memory = path == ":memory:" or str(path).startswith("file::memory:")
        try:
            self._conn = sqlite3.connect(
                path if memory else _sqlite_uri(str(path), create), uri=not memory,
                isolation_level=None, timeout=timeout, check_same_thread=False)
        except sqlite3.Error as exc:
            if create:
                folder = os.path.dirname(os.path.abspath(str(path)))
                raise StoreFailed("cannot create a store at %s (%s): %s" % (
                    path, exc, "its folder %s does not exist" % folder
                    if not os.path.isdir(folder) else "is the folder writable?"),
                    path=str(path), retryable=False) from None
            raise NotAStore("no knowledge-base store at %s (%s); create one with: kb init --db "
                            "%s KB" % (path, exc, path), path=str(path)) from None
        self._conn.row_factory = sqlite3.Row
        self._handlers = {
            "search_knowledge_base": self._search,
            "read_knowledge_article": self._read,
            "edit_knowledge_article": self._edit,
            "poll_resource_events": self._poll,
        }
        self._schemas = {tool["name"]: tool["inputSchema"] for tool in TOOLS}
        self._snippets = {}  # insertion-ordered: the first key is the least recently used
        try:
            self._conn.execute("PRAGMA foreign_keys = ON")
            # Identify the file before anything could write to it: a file that is not ours is
            # refused with its bytes (journal mode included) as they were.
            if not self._is_store():
                if not (create or memory):
                    raise NotAStore(
                        "%s is an empty database, not a knowledge-base store; create one with: "
                        "kb init --db %s KB" % (path, path), path=str(path))
                self._create_schema(memory)
            if not memory:
                # NORMAL sync is crash-safe in WAL (a killed process loses nothing committed;
                # power loss may drop the last ones). A connection setting: nothing is written.
                self._conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            self._conn.close()
            raise

    # -- connection ---------------------------------------------------------------------------

    def close(self):
        """Close the database connection."""
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextlib.contextmanager
    def transaction(self, mode="IMMEDIATE"):
        """One transaction: ``BEGIN IMMEDIATE`` (or ``DEFERRED`` for a consistent read).

        Rolls back on any exception; a database failure comes out as a ToolError.
        """
        conn = self._conn
        try:
            conn.execute("BEGIN " + mode)
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
        except sqlite3.ProgrammingError:
            raise  # a closed store, a misuse: the caller's bug, not the database's
        except sqlite3.Error as exc:
            raise store_error(exc) from exc

    def _header(self):
        """``(application_id, user_version, table names)`` of the open file, read without a lock."""
        try:
            app_id = self._conn.execute("PRAGMA application_id").fetchone()[0]
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {row[0] for row in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise NotAStore("%s is not a knowledge-base store: %s" % (self.path, exc),
                            path=str(self.path)) from None
        return app_id, version, tables

    def _is_store(self):
        """True for a store of our schema, False for an empty database; refuses anything else."""
        app_id, version, tables = self._header()
        if app_id == 0 and version == 0 and not tables:
            return False
        ours = app_id == APPLICATION_ID or (app_id == 0 and STORE_TABLES <= tables)
        if not ours:
            raise NotAStore(
                "%s is not a knowledge-base store: it is another application's SQLite database "
                "(application_id %d, user_version %d, tables %s); nothing was changed"
                % (self.path, app_id, version, ", ".join(sorted(tables)[:5]) or "none"),
                path=str(self.path))
        if version < SCHEMA_VERSION and not self._upgrading:
            raise NotAStore(
                "%s is a knowledge-base store of schema %d, older than this program's %d; "
                "upgrade it with: kb upgrade --db %s (copy the file first to keep a backup)"
                % (self.path, version, SCHEMA_VERSION, self.path), path=str(self.path),
                schema=version)
        if version > SCHEMA_VERSION:
            raise NotAStore(
                "%s is a knowledge-base store of schema %d, newer than this program's %d; "
                "install a newer kb-citations to open it" % (self.path, version, SCHEMA_VERSION),
                path=str(self.path), schema=version)
        return True

    @classmethod
    def upgrade(cls, path):
        """Bring an older store at ``path`` up to this schema in one transaction; returns
        ``(old schema, new schema)``."""
        store = cls.__new__(cls)
        store._upgrading = True
        cls.__init__(store, path)
        try:
            with store.transaction():
                found = store._conn.execute("PRAGMA user_version").fetchone()[0]
                for version in range(found, SCHEMA_VERSION):
                    for statement in _MIGRATIONS[version]:
                        store._conn.execute(statement)
                store._conn.execute("PRAGMA application_id = %d" % APPLICATION_ID)
                store._conn.execute("PRAGMA user_version = %d" % SCHEMA_VERSION)
        finally:
            store.close()
        return found, SCHEMA_VERSION

    def _create_schema(self, memory):
        """Make the empty database a store, unless another process just did (checked under lock)."""
        if not memory:
            # WAL lets readers run beside the one writer; it stays set in the file.
            self._conn.execute("PRAGMA journal_mode = WAL")
        with self.transaction() as conn:
            if self._is_store():
                return
            for statement in _SCHEMA_SQL.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("PRAGMA application_id = %d" % APPLICATION_ID)
            conn.execute("PRAGMA user_version = %d" % SCHEMA_VERSION)

    def _now_us(self):
        return datetime_to_us(self._clock())

    def _next_version(self, previous_us):
        """Strictly greater than ``previous_us`` even when the clock stands still or steps back."""
        now = self._now_us()
        if previous_us is not None:
            now = max(now, previous_us + VERSION_STEP_US)
        return now

    # -- lookups ------------------------------------------------------------------------------

    def _kb(self, kb_id, granted=None):
        """The knowledge base row, or the one ``not_found`` that hides ungranted from missing."""
        row = None
        if granted is None or kb_id in granted:
            row = self._conn.execute(
                "SELECT pk, kb_id, head_sequence, published_count FROM knowledge_bases "
                "WHERE kb_id = ?", (kb_id,)
            ).fetchone()
        if row is None and granted is None:  # the people's side: no grants to hide behind
            raise NotFound("there is no knowledge base %r in this store" % (kb_id,),
                           knowledge_base_id=kb_id)
        if row is None:
            raise NotFound(
                "knowledge base %r was not found or is not granted to this client; "
                "use the ID of a granted knowledge base" % (kb_id,),
                knowledge_base_id=kb_id,
            )
        return row

    def _article(self, kb, article_id, published_only):
        """The article's row with its content; a draft is ``not_found`` when ``published_only``.

        Visibility is decided on the small columns before the content is read, so a large
        draft and a missing article cost a caller the same, and time tells them nothing.
        """
        row = self._conn.execute(
            "SELECT pk, published FROM articles WHERE kb_pk = ? AND article_id = ?",
            (kb["pk"], article_id),
        ).fetchone()
        if row is not None and (row["published"] or not published_only):
            row = self._conn.execute(
                "SELECT pk, article_id, title, content, published, version_us, updated_at, "
                "source FROM articles WHERE pk = ?", (row["pk"],)).fetchone()
        if row is None and not published_only:  # the people's side sees drafts too
            raise NotFound("there is no article %r in knowledge base %r"
                           % (article_id, kb["kb_id"]), knowledge_base_id=kb["kb_id"],
                           article_id=article_id)
        if row is None or (published_only and not row["published"]):
            raise NotFound(
                "article %r is not a published article of knowledge base %r; it may have been "
                "unpublished: search again for the current article"
                % (article_id, kb["kb_id"]),
                knowledge_base_id=kb["kb_id"],
                article_id=article_id,
            )
        return row

    def knowledge_base_exists(self, kb_id):
        """Whether a knowledge base with this ID exists."""
        row = self._conn.execute(
            "SELECT 1 FROM knowledge_bases WHERE kb_id = ?", (kb_id,)
        ).fetchone()
        return row is not None

    def list_knowledge_bases(self):
        """Every knowledge base as a dict: ID, name, article counts and event head."""
        with self.transaction("DEFERRED") as conn:
            rows = conn.execute(
                "SELECT kb_id, name, published_count AS published, articles_created AS articles, "
                "head_sequence FROM knowledge_bases ORDER BY kb_id").fetchall()
        return [dict(row) for row in rows]

    def list_articles(self, kb_id):
        """Every article of a knowledge base, drafts included, as dicts (no content)."""
        with self.transaction("DEFERRED"):
            kb = self._kb(kb_id)
            rows = self._conn.execute(
                "SELECT article_id, title, published, updated_at, length(content) AS chars, "
                "source FROM articles WHERE kb_pk = ? ORDER BY pk",
                (kb["pk"],),
            ).fetchall()
        return [dict(row) for row in rows]

    def get_article(self, kb_id, article_id):
        """One article as the editor sees it, draft or not (the people's side)."""
        with self.transaction("DEFERRED"):
            row = self._article(self._kb(kb_id), article_id, published_only=False)
        return dict(row)

    def head_sequence(self, kb_id):
        """The sequence of the newest event of a knowledge base (0 before any event)."""
        return self._kb(kb_id)["head_sequence"]

    # -- writes shared by both sides ------------------------------------------------------------

    def _event(self, kb, type_, article_id, updated_at):
        """Append one event in the caller's transaction; returns it."""
        sequence = self._bump(kb["pk"], "head_sequence")
        self._conn.execute(
            "INSERT INTO events (kb_pk, sequence, type, article_id, updated_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (kb["pk"], sequence, type_, article_id, updated_at),
        )
        return {"sequence": sequence, "type": type_, "article_id": article_id,
                "updated_at": updated_at}

    def _bump(self, kb_pk, counter):
        """Add one to a knowledge base's counter in the caller's transaction; returns it."""
        # Two statements, not UPDATE ... RETURNING, which SQLite before 3.35 lacks.
        self._conn.execute(
            "UPDATE knowledge_bases SET {0} = {0} + 1 WHERE pk = ?".format(counter), (kb_pk,)
        )
        return self._conn.execute(
            "SELECT {0} FROM knowledge_bases WHERE pk = ?".format(counter), (kb_pk,)
        ).fetchone()[0]

    def _count_published(self, kb, delta):
        self._conn.execute(
            "UPDATE knowledge_bases SET published_count = published_count + ? WHERE pk = ?",
            (delta, kb["pk"]))

    def _fts_add(self, kb_pk, pk, title, content):
        self._conn.execute(
            "INSERT INTO fts_%d (rowid, title, content) VALUES (?, ?, ?)" % kb_pk,
            (pk, title, content),
        )

    def _fts_remove(self, kb_pk, pk, title, content):
        # An external-content index is told the old text to forget; it must be exactly the
        # text it indexed, which the caller reads inside the same transaction.
        self._conn.execute(
            "INSERT INTO fts_%d (fts_%d, rowid, title, content) VALUES ('delete', ?, ?, ?)"
            % (kb_pk, kb_pk),
            (pk, title, content),
        )

    def _write(self, kb, row, *, content, title, published):
        """Save new text and visibility for one article; index, version and event follow."""
        version_us = self._next_version(row["version_us"])
        updated_at = format_version(version_us)
        # The compare-and-swap: the row changes only if it still holds the version (and the
        # visibility) this transaction read; the event and index below rely on that.
        written = self._conn.execute(
            "UPDATE articles SET title = ?, content = ?, published = ?, version_us = ?, "
            "updated_at = ? WHERE pk = ? AND version_us = ? AND published = ?",
            (title, content, int(published), version_us, updated_at, row["pk"],
             row["version_us"], row["published"]),
        ).rowcount
        if written != 1:
            current = self._article(kb, row["article_id"], published_only=False)
            raise _conflict(kb, current, row["updated_at"])
        if row["published"]:
            self._fts_remove(kb["pk"], row["pk"], row["title"], row["content"])
        if published:
            self._fts_add(kb["pk"], row["pk"], title, content)
        if bool(published) != bool(row["published"]):
            self._count_published(kb, 1 if published else -1)
        event = None
        if published and row["published"]:
            event = self._event(kb, EVENT_UPDATED, row["article_id"], updated_at)
        elif published:
            event = self._event(kb, EVENT_PUBLISHED, row["article_id"], updated_at)
        elif row["published"]:
            event = self._event(kb, EVENT_UNPUBLISHED, row["article_id"], updated_at)
        return updated_at, event

    # -- people's side --------------------------------------------------------------------------

    def create_knowledge_base(self, kb_id, name=None):
        """Create an empty knowledge base."""
        _check_people_string(kb_id, "kb_id", ID_MAX)
        if name is not None:
            _check_people_string(name, "name", TITLE_MAX)
        with self.transaction() as conn:
            if self.knowledge_base_exists(kb_id):
                raise InvalidArgument(
                    "knowledge base %r already exists" % (kb_id,), argument="kb_id"
                )
            pk = conn.execute(
                "INSERT INTO knowledge_bases (kb_id, name) VALUES (?, ?)", (kb_id, name)
            ).lastrowid
            conn.execute(_FTS_SQL.format(pk=pk))
            for option, value in _FTS_TUNING:
                conn.execute("INSERT INTO fts_{0} (fts_{0}, rank) VALUES (?, ?)".format(pk),
                             (option, value))

    def create_article(self, kb_id, title, content, *, published=True, source=None):
        """Add an article (published, or a draft); returns its new article ID."""
        _check_new_article(title, content, "title", "content")
        with self.transaction():
            return self._insert(self._kb(kb_id), title, content, published, source)

    def create_articles(self, kb_id, articles, *, published=True):
        """Add many ``(title, content)`` articles in one transaction; returns their IDs.

        A bulk load: one commit and one search-index segment for the lot, instead of one
        each. All are checked before any is written, so a bad one adds none.
        """
        articles = list(articles)
        for i, article in enumerate(articles):
            if not isinstance(article, (tuple, list)) or len(article) != 2:
                raise InvalidArgument("articles[%d] must be a (title, content) pair" % i,
                                      argument="articles")
            _check_new_article(article[0], article[1], "articles[%d] title" % i,
                               "articles[%d] content" % i)
        with self.transaction():
            kb = self._kb(kb_id)
            return [self._insert(kb, title, content, published, None)
                    for title, content in articles]

    def _insert(self, kb, title, content, published, source):
        """Insert one new article in the caller's transaction; returns its ID."""
        number = self._bump(kb["pk"], "articles_created")
        if number > MAX_ARTICLES_PER_KB:
            raise InvalidArgument(
                "knowledge base %r is full: it has had %d articles, the most one can hold"
                % (kb["kb_id"], MAX_ARTICLES_PER_KB), argument="kb_id")
        article_id = "art-%06d" % number
        version_us = self._next_version(None)
        updated_at = format_version(version_us)
        pk = self._conn.execute(
            "INSERT INTO articles (kb_pk, article_id, title, content, published, version_us, "
            "updated_at, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (kb["pk"], article_id, title, content, int(published), version_us, updated_at,
             source),
        ).lastrowid
        if published:
            self._fts_add(kb["pk"], pk, title, content)
            self._count_published(kb, 1)
            self._event(kb, EVENT_PUBLISHED, article_id, updated_at)
        return article_id

    def save_article(self, kb_id, article_id, *, content=None, title=None):
        """A person's save (last writer wins); returns the new ``updated_at``.

        Saving a draft keeps it a draft and writes no event; saving a published article
        writes ``article.updated``.
        """
        if content is None and title is None:
            raise InvalidArgument("nothing to save: give content, title or both",
                                  argument="content")
        if content is not None:
            _check_people_string(content, "content", None)
            _check_content(content)
        if title is not None:
            _check_people_string(title, "title", TITLE_MAX)
            _check_title(title)
        with self.transaction():
            kb = self._kb(kb_id)
            row = self._article(kb, article_id, published_only=False)
            updated_at, _ = self._write(
                kb,
                row,
                content=row["content"] if content is None else content,
                title=row["title"] if title is None else title,
                published=bool(row["published"]),
            )
        return updated_at

    def publish(self, kb_id, article_id):
        """Make an article visible to agents; returns its ``updated_at`` (unchanged if it was)."""
        return self._set_published(kb_id, article_id, True)

    def unpublish(self, kb_id, article_id):
        """Hide an article from agents; returns its ``updated_at`` (unchanged if it was hidden)."""
        return self._set_published(kb_id, article_id, False)

    def _set_published(self, kb_id, article_id, published):
        with self.transaction():
            kb = self._kb(kb_id)
            row = self._article(kb, article_id, published_only=False)
            if bool(row["published"]) == published:
                return row["updated_at"]
            updated_at, _ = self._write(
                kb, row, content=row["content"], title=row["title"], published=published
            )
        return updated_at

    def optimize(self, kb_id):
        """Merge a knowledge base's search index into one segment; worth it after bulk loads."""
        with self.transaction():
            kb = self._kb(kb_id)
            self._conn.execute("INSERT INTO fts_{0} (fts_{0}) VALUES ('optimize')".format(kb["pk"]))

    def import_directory(self, kb_id, directory, *, prune=False, force=False, dry_run=False,
                         progress=None):
        """Sync a folder of Markdown files into a knowledge base; returns the plan it carried out.

        See ``sync_articles``; the files are all read and checked first (``read_markdown_folder``).
        """
        self._kb(kb_id)
        documents = read_markdown_folder(directory, progress)
        return self.sync_articles(kb_id, documents, prune=prune, force=force, dry_run=dry_run,
                                  progress=progress)

    def sync_articles(self, kb_id, documents, *, prune=False, force=False, dry_run=False,
                      progress=None):
        """Make the articles imported from ``documents`` match them, honouring later edits.

        Each imported article remembers its source path and the version the import wrote.
        An article whose version is still that one is updated to its file; one edited since
        (by a person or an agent) is left alone and reported as a ``conflict``, unless
        ``force``. A new path whose text equals an article whose file is gone is a rename.
        With ``prune``, articles whose file is gone are unpublished (their text is kept).
        One transaction: all of it is written, or none. ``dry_run`` writes nothing.
        Returns ``{"actions": [...], "counts": {action: n}}``; actions are ``create``,
        ``update``, ``unchanged``, ``conflict``, ``rename``, ``unpublish`` and ``orphan``
        (file gone, article kept: no ``prune``).
        """
        documents = list(documents)
        seen = set()
        for doc in documents:
            _check_people_string(doc.source, "source", None)
            _check_new_article(doc.title, doc.content, "title of %s" % doc.source,
                               "content of %s" % doc.source)
            if doc.source in seen:
                raise InvalidArgument("source %r appears twice" % doc.source, argument="source")
            seen.add(doc.source)
        with self.transaction() as conn:
            kb = self._kb(kb_id)
            rows = {row["source"]: row for row in conn.execute(
                "SELECT pk, article_id, title, content, published, version_us, updated_at, "
                "source, import_version FROM articles WHERE kb_pk = ? AND source IS NOT NULL",
                (kb["pk"],))}
            actions = self._sync_plan(rows, documents, prune, force)
            if not dry_run:
                for done, action in enumerate(actions, 1):
                    self._sync_apply(kb, rows, action)
                    if progress is not None:
                        progress("write", done, len(actions))
            for action in actions:
                action.pop("document", None)
        counts = collections.Counter(action["action"] for action in actions)
        if not dry_run and (counts["create"] + counts["update"]) > 0:
            self.optimize(kb_id)
        return {"actions": actions, "counts": {name: counts[name] for name in SYNC_ACTIONS},
                "dry_run": dry_run}

    @staticmethod
    def _sync_plan(rows, documents, prune, force):
        """What a sync would do, as a list of action dicts (pure: reads nothing, writes nothing)."""
        by_path = {doc.source: doc for doc in documents}
        gone = {source: row for source, row in rows.items() if source not in by_path}
        # A file moved without a change: same title and text as an article whose file is gone.
        by_text = {}
        for source, row in sorted(gone.items()):
            by_text.setdefault((row["title"], row["content"]), source)
        actions = []
        for doc in documents:
            row = rows.get(doc.source)
            action = {"source": doc.source, "title": doc.title, "document": doc}
            if row is None:
                old = by_text.pop((doc.title, doc.content), None)
                if old is not None and old in gone:
                    row = gone.pop(old)
                    action.update(action="rename", previous_source=old)
                else:
                    action["action"] = "create"
                    actions.append(action)
                    continue
            action.update(article_id=row["article_id"], current_version=row["updated_at"],
                          import_version=row["import_version"])
            owned = row["import_version"] == row["updated_at"]
            if row["published"] and (row["title"], row["content"]) == (doc.title, doc.content):
                action.setdefault("action", "unchanged")
            elif owned or force:
                action["action"] = "update" if action.get("action") != "rename" else "rename"
                action["write"] = True
            else:
                action["action"] = "conflict"
            actions.append(action)
        for source, row in sorted(gone.items()):
            if not row["published"]:
                continue
            actions.append({"source": source, "title": row["title"],
                            "article_id": row["article_id"],
                            "current_version": row["updated_at"],
                            "import_version": row["import_version"],
                            "action": "unpublish" if prune else "orphan"})
        return actions

    def _sync_apply(self, kb, rows, action):
        """Carry out one planned action in the caller's transaction."""
        kind, doc = action["action"], action.get("document")
        if kind == "create":
            article_id = self._insert(kb, doc.title, doc.content, True, doc.source)
            action["article_id"] = article_id
            pk = None
        elif kind in ("conflict", "orphan"):
            return
        else:
            row = rows.get(action.get("previous_source", action["source"]))
            pk = row["pk"]
            if kind == "rename":
                self._conn.execute("UPDATE articles SET source = ? WHERE pk = ?",
                                   (doc.source, pk))
            if kind == "unpublish":
                self._write(kb, row, content=row["content"], title=row["title"], published=False)
            elif action.get("write"):
                self._write(kb, row, content=doc.content, title=doc.title, published=True)
        if pk is None:
            where, key = "kb_pk = ? AND article_id = ?", (kb["pk"], action["article_id"])
        else:
            where, key = "pk = ?", (pk,)
        # What the import wrote, or found equal to its file: later edits are told apart by it.
        self._conn.execute("UPDATE articles SET import_version = updated_at WHERE " + where, key)
        action["version"] = self._conn.execute(
            "SELECT updated_at FROM articles WHERE " + where, key).fetchone()[0]

    # -- agent's side ---------------------------------------------------------------------------

    def call_tool(self, name, arguments, *, granted):
        """Validate ``arguments`` against tool ``name``'s schema and run it; returns the result."""
        handler = self._handlers.get(name)
        if handler is None:
            raise InvalidArgument(
                "unknown tool %s; tools: %s" % (_shown(name), ", ".join(self._handlers)),
                argument="name"
            )
        granted = _granted(granted)
        with _tool_errors(name):
            return handler(validate_arguments(self._schemas[name], arguments), granted)

    def _search(self, args, granted):
        limit = args.get("limit", SEARCH_LIMIT_DEFAULT)
        with self.transaction("DEFERRED") as conn:
            kb = self._kb(args["knowledge_base_id"], granted)
            rows = self._ranked(conn, kb, args["query"], limit)
        kb_id = kb["kb_id"]
        return {
            "knowledge_base_id": kb_id,
            "query": args["query"],
            "results": [
                {
                    "article_id": row["article_id"],
                    "title": row["title"],
                    "snippet": row["snippet"],
                    "updated_at": row["updated_at"],
                    "citation": _citation(kb_id, row["article_id"], row["updated_at"]),
                }
                for row in rows
            ],
            "head_sequence": kb["head_sequence"],
        }

    def _ranked(self, conn, kb, text, limit):
        """The top hits of a query: every word first, then all words but one, then any word.

        bm25 orders the hits within each of the three tiers, and the article ID breaks ties.
        """
        terms = query_terms(text)
        if not terms:
            return []
        words = [fts_literal(term) for term in terms]
        ranked = ("SELECT rowid, bm25(fts_{pk}, {tw}, {bw}) AS score FROM fts_{pk} "
                  "WHERE fts_{pk} MATCH ?").format(pk=kb["pk"], tw=TITLE_WEIGHT, bw=BODY_WEIGHT)
        if kb["published_count"] <= ONE_PASS_MAX_ARTICLES:
            hits = self._ranked_in_one_pass(conn, kb["pk"], ranked, words, limit)
        else:
            hits = self._ranked_in_tiers(conn, ranked, words, limit)
        if not hits:
            return []
        top = [hit[0] for hit in hits]
        rows = {row["pk"]: row for row in conn.execute(
            "SELECT pk, article_id, title, updated_at, content FROM articles WHERE pk IN (%s)"
            % ",".join("?" * len(top)), top,
        )}
        if len(rows) != len(top):
            raise StoreDamaged(
                "the search index of knowledge base %r lists %d article(s) that are not in the "
                "articles table. A retry will not help; the store's operator must run the audit "
                "and rebuild the index (kb reindex %s)." % (kb["kb_id"], len(set(top) - set(rows)),
                                                           kb["kb_id"]),
                knowledge_base_id=kb["kb_id"], retryable=False)
        terms = tuple(terms)
        return [dict(rows[pk], snippet=self._snippet(rows[pk], terms)) for pk in top]

    @staticmethod
    def _ranked_in_one_pass(conn, kb_pk, ranked, words, limit):
        """Score every article holding any word, count the words each holds, sort: small bases."""
        hits = conn.execute(ranked, (" OR ".join(words),)).fetchall()
        if len(words) == 1:
            return heapq.nsmallest(limit, hits, key=lambda h: (h[1], h[0]))
        held = collections.Counter()
        select = "SELECT rowid FROM fts_%d WHERE fts_%d MATCH ?" % (kb_pk, kb_pk)
        for word in words:
            held.update(map(operator.itemgetter(0), conn.execute(select, (word,)).fetchall()))
        most = len(words)
        # The few best, not a sort of every article holding a word; the key is unique (rowid).
        return heapq.nsmallest(limit, hits, key=lambda h: (min(most - held[h[0]], 2), h[1], h[0]))

    @staticmethod
    def _ranked_in_tiers(conn, ranked, words, limit):
        """The same hits, one tier at a time until ``limit`` are found: large bases.

        The first two tiers are intersections, small however large the knowledge base; only
        when they fall short is every article holding any word scored.
        """
        # rowid order is article ID order within a knowledge base (both follow creation), so
        # ties fall to the article ID without reading the articles table for every match.
        ranked += " ORDER BY score, rowid LIMIT ?"
        hits = conn.execute(ranked, (" AND ".join(words), limit)).fetchall()
        if len(hits) < limit and len(words) > 1:
            tier = []
            for i, missing in enumerate(words):
                others = " AND ".join(words[:i] + words[i + 1:])
                tier += conn.execute(ranked, (others + " NOT " + missing, limit)).fetchall()
            tier.sort(key=lambda hit: (hit[1], hit[0]))
            hits += tier[:limit - len(hits)]
        if len(hits) < limit and len(words) > 2:
            # Every hit of the tiers above is known here (each query above returned all it had),
            # so skipping them leaves exactly the articles missing two words or more.
            found = {hit[0] for hit in hits}
            rest = conn.execute(ranked, (" OR ".join(words), limit - len(hits) + len(found)))
            hits += [hit for hit in rest if hit[0] not in found][:limit - len(hits)]
        return hits

    def _snippet(self, row, terms):
        """The snippet of one hit, cached by article version: a version never changes text."""
        # FTS5's snippet() re-runs the whole query for each hit; ours reads the text once, and
        # agents repeat queries (checking citations by title does so every hour).
        key = (row["pk"], row["updated_at"], terms)
        snippet = self._snippets.pop(key, None)
        if snippet is None:
            snippet = make_snippet(row["content"], terms)
            if len(self._snippets) >= SNIPPET_CACHE_SIZE:
                del self._snippets[next(iter(self._snippets))]
        self._snippets[key] = snippet
        return snippet

    def _read(self, args, granted):
        with self.transaction("DEFERRED"):
            kb = self._kb(args["knowledge_base_id"], granted)
            row = self._article(kb, args["article_id"], published_only=True)
        kb_id = kb["kb_id"]
        return {
            "knowledge_base_id": kb_id,
            "article_id": row["article_id"],
            "title": row["title"],
            "content": row["content"],
            "updated_at": row["updated_at"],
            "citation": _citation(kb_id, row["article_id"], row["updated_at"]),
            "head_sequence": kb["head_sequence"],
        }

    def _edit_checks(self, args, granted):
        """Everything an edit decides before writing: replay, key reuse, article, version.

        Runs inside the caller's transaction. Returns ``(kb, row, fingerprint, stored)``
        where ``stored`` is the first result of an exact replay, else ``None``.
        """
        _check_content(args["content"])
        if "title" in args:
            _check_title(args["title"])
        expected_us = parse_version(args["expected_version"])
        kb = self._kb(args["knowledge_base_id"], granted)
        fingerprint = _fingerprint(
            kb["kb_id"], args["article_id"], args["content"], args.get("title"), expected_us
        )
        horizon = self._now_us() - IDEMPOTENCY_TTL // timedelta(microseconds=1)
        stored = self._conn.execute(
            "SELECT fingerprint, result FROM idempotency WHERE kb_pk = ? AND key = ? "
            "AND created_us >= ?",
            (kb["pk"], args["idempotency_key"], horizon),
        ).fetchone()
        if stored is not None:
            if stored["fingerprint"] != fingerprint:
                raise IdempotencyKeyReused(
                    "idempotency_key %r was already used in knowledge base %r for a different "
                    "edit; use a new key for a new change" % (args["idempotency_key"],
                                                              kb["kb_id"]),
                    argument="idempotency_key",
                    idempotency_key=args["idempotency_key"],
                )
            result = json.loads(stored["result"])
            result["replayed"] = True
            return kb, None, fingerprint, result
        row = self._article(kb, args["article_id"], published_only=True)
        if expected_us != row["version_us"]:
            raise _conflict(kb, row, args["expected_version"])
        return kb, row, fingerprint, None

    def _edit(self, args, granted):
        with self.transaction() as conn:
            kb, row, fingerprint, stored = self._edit_checks(args, granted)
            if stored is not None:
                return stored
            title = args.get("title", row["title"])
            updated_at, event = self._write(
                kb, row, content=args["content"], title=title, published=True
            )
            kb_id = kb["kb_id"]
            result = {
                "knowledge_base_id": kb_id,
                "article_id": row["article_id"],
                "title": title,
                "updated_at": updated_at,
                "previous_version": row["updated_at"],
                "citation": _citation(kb_id, row["article_id"], updated_at),
                "event": event,
                "replayed": False,
            }
            now_us = self._now_us()
            conn.execute(
                "DELETE FROM idempotency WHERE created_us < ?",
                (now_us - IDEMPOTENCY_TTL // timedelta(microseconds=1),),
            )
            conn.execute(
                "INSERT OR REPLACE INTO idempotency (kb_pk, key, fingerprint, result, created_us) "
                "VALUES (?, ?, ?, ?, ?)",
                (kb["pk"], args["idempotency_key"], fingerprint,
                 json.dumps(result, ensure_ascii=False), now_us),
            )
        return result

    def preview_edit(self, arguments, *, granted):
        """What an edit would do now, for an approval prompt; raises what the edit would raise."""
        granted = _granted(granted)
        with _tool_errors("edit_knowledge_article"):
            args = validate_arguments(self._schemas["edit_knowledge_article"], arguments)
            with self.transaction("DEFERRED"):
                kb, row, _, stored = self._edit_checks(args, granted)
        if stored is not None:
            return {"replay": True, "result": stored}
        return {
            "replay": False,
            "knowledge_base_id": kb["kb_id"],
            "article_id": row["article_id"],
            "title": row["title"],
            "new_title": args.get("title"),
            "current_version": row["updated_at"],
            "current_bytes": len(row["content"].encode("utf-8")),
            "new_bytes": len(args["content"].encode("utf-8")),
        }

    def _poll(self, args, granted):
        resource_type = args["resource_type"]
        if resource_type != "knowledge_base":
            raise InvalidArgument(
                "resource_type %r has no event log in this store; it keeps events for "
                "knowledge_base only" % resource_type,
                argument="resource_type",
            )
        after = args.get("after_sequence", 0)
        limit = args.get("limit", EVENTS_LIMIT_DEFAULT)
        with self.transaction("DEFERRED") as conn:
            kb = self._kb(args["resource_id"], granted)
            head = kb["head_sequence"]
            if after > head:
                raise InvalidArgument(
                    "after_sequence %s is beyond the head of knowledge base %r, which is %d; "
                    "resume from %d or less" % (_int_text(after), kb["kb_id"], head, head),
                    argument="after_sequence",
                    head_sequence=head,
                )
            rows = conn.execute(
                "SELECT sequence, type, article_id, updated_at FROM events "
                "WHERE kb_pk = ? AND sequence > ? ORDER BY sequence LIMIT ?",
                (kb["pk"], after, limit),
            ).fetchall()
        events = [dict(row) for row in rows]
        # The log is gapless by construction, so a page is exactly the next sequences up to the
        # head. Anything else is damage; answering it with has_more would send a client that
        # follows has_more round forever (Kubernetes answers a cursor it cannot serve 410 Gone).
        wanted = min(after + limit, head)
        for expected, event in enumerate(events, after + 1):
            if event["sequence"] != expected:
                raise _gap(kb, expected, head)
        if len(events) != wanted - after:
            raise _gap(kb, after + len(events) + 1, head)
        cursor = events[-1]["sequence"] if events else after
        return {
            "resource_type": resource_type,
            "resource_id": kb["kb_id"],
            "events": events,
            "next_after_sequence": cursor,
            "has_more": cursor < head,
            "head_sequence": head,
        }

    # -- audit --------------------------------------------------------------------------------

    def audit(self):
        """Problems found in the stored data (an empty list when all is consistent)."""
        problems = []
        conn = self._conn
        with self.transaction("DEFERRED"):
            check = conn.execute("PRAGMA integrity_check").fetchone()[0]
            if check != "ok":
                problems.append("integrity_check: %s" % check)
            for kb in conn.execute(
                    "SELECT pk, kb_id, head_sequence, published_count FROM knowledge_bases"):
                seqs = [r[0] for r in conn.execute(
                    "SELECT sequence FROM events WHERE kb_pk = ? ORDER BY sequence", (kb["pk"],))]
                if seqs != list(range(1, kb["head_sequence"] + 1)):
                    missing = sorted(set(range(1, kb["head_sequence"] + 1)) - set(seqs))
                    extra = [s for s in seqs if not 1 <= s <= kb["head_sequence"]]
                    problems.append(
                        "knowledge base %r: event log damaged: head %d, missing sequence(s) %s%s"
                        % (kb["kb_id"], kb["head_sequence"],
                           ", ".join(map(str, missing[:10])) or "none",
                           "; beyond the head: %s" % ", ".join(map(str, extra[:10]))
                           if extra else ""))
                last = {r["article_id"]: r for r in conn.execute(
                    "SELECT article_id, type, updated_at FROM events WHERE kb_pk = ? "
                    "ORDER BY sequence", (kb["pk"],))}
                for art in conn.execute(
                    "SELECT article_id, published, updated_at FROM articles WHERE kb_pk = ?",
                    (kb["pk"],),
                ):
                    ev = last.get(art["article_id"])
                    if art["published"] and (ev is None or ev["updated_at"] != art["updated_at"]
                                             or ev["type"] == EVENT_UNPUBLISHED):
                        problems.append("article %r of %r: updated_at %s but last event %s"
                                        % (art["article_id"], kb["kb_id"], art["updated_at"],
                                           dict(ev) if ev else None))
                    if not art["published"] and ev is not None and ev["type"] != \
                            EVENT_UNPUBLISHED:
                        problems.append("draft %r of %r: last event is %s"
                                        % (art["article_id"], kb["kb_id"], ev["type"]))
                # A scan of an external-content table reads the articles table itself, drafts
                # and other knowledge bases included; the docsize table lists what is indexed.
                indexed = [r[0] for r in conn.execute(
                    "SELECT id FROM fts_%d_docsize ORDER BY id" % kb["pk"])]
                published = [r[0] for r in conn.execute(
                    "SELECT pk FROM articles WHERE kb_pk = ? AND published ORDER BY pk",
                    (kb["pk"],))]
                if indexed != published:
                    problems.append("knowledge base %r: %d indexed, %d published"
                                    % (kb["kb_id"], len(indexed), len(published)))
                if kb["published_count"] != len(published):
                    problems.append("knowledge base %r: counts %d published, holds %d"
                                    % (kb["kb_id"], kb["published_count"], len(published)))
        return problems



if __name__ == "__main__":
    # The admin command line lives in kb_cli (which imports this module); this keeps
    # ``python kb_store.py ...`` and ``python -m kb_store ...`` working.
    import kb_cli

    sys.exit(kb_cli.main())
