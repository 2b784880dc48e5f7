"""The ground floor of the knowledge-base store: what every engine and every caller shares.

Limits, the error family, versions (RFC 3339 text and microseconds), argument validation,
the text rules of search (tokens, query terms, BM25F ranking, snippets) and Markdown reading.
Nothing here touches a database: ``kb_engine`` and the engines stand on this module, the
store (``kb_store``) stands on them, and the command line, the server and the simulation
stand on the store.
"""

import hashlib
import json
import logging
import math
import os
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from datetime import datetime, timedelta, timezone

# Bumped whenever the schema changes; a file written by another schema is refused, not guessed at.
SCHEMA_VERSION = 3
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
# Article IDs are art-000001 up to art-999999: six digits keep their text order equal to their
# creation order, which search relies on to break ties by article ID.
MAX_ARTICLES_PER_KB = 999999
KEY_MAX = 255
TITLE_MAX = 200
CONTENT_MAX_BYTES = 1024 * 1024
VERSION_MAX = 64
# Longest piece of a caller's own text that an error message quotes back.
SHOWN_MAX = 80

# -- search ---------------------------------------------------------------------------------
# BM25 per field (Robertson and Zaragoza's BM25F family, as Lucene and tantivy score fields):
# each field's term frequency is saturated (K1) and normalised by that field's own length
# against its own average (B), so a long body cannot drown a short exact title. The title's
# score counts TITLE_WEIGHT times the body's: a query made of an article's title words should
# find that article first, as a person searching a help centre expects.
BM25_K1, BM25_B = 1.2, 0.75
TITLE_WEIGHT, BODY_WEIGHT = 4.0, 1.0
# A query keeps at most this many words (its rarest): each word costs the tiers a query, and
# ten words already pin an article down.
QUERY_TERMS_MAX = 10
# At most this many candidates per index query: the work of a search is bounded by
# (queries x this), never by how many articles hold a common word.
CANDIDATES_PER_QUERY = 50
SNIPPET_WORDS = 16
SNIPPET_MAX_MATCHES = 12
# A snippet is looked for in the first this-many characters of the body: its cost is bounded by
# this window, not by an article of a megabyte.
SNIPPET_SCAN_CHARS = 20000
# Recent snippets kept per store, keyed by article version and query words: a few hundred KB.
SNIPPET_CACHE_SIZE = 4096

# Words that match nearly every article: left in a query they add nothing to the ranking and
# make every tier large, so they are dropped from queries (unless nothing else is left).
STOPWORDS = frozenset("""
a an and are as at be by can do does for from how i if in into is it its my not of on or our
so than that the their then there these this to was we what when where which who why will
with you your
""".split())

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


# -- versions ----------------------------------------------------------------------------------


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


# -- arguments ---------------------------------------------------------------------------------


def check_text(value, argument):
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
                "argument names must be strings, got %s %s" % (json_type(name), shown(name)),
                argument="arguments",
            )
        if name not in properties:
            raise InvalidArgument(
                "unknown argument %s; this tool takes %s" % (shown(name), ", ".join(properties)),
                argument=clip(name),
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
                    "%s must be a string, got %s" % (name, json_type(value)), argument=name
                )
            check_text(value, name)
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
                    "%s must be one of %s, got %s" % (name, ", ".join(rule["enum"]), shown(value)),
                    argument=name,
                )
        elif rule["type"] == "integer":
            # JSON Schema counts 3.0 as an integer; a bool is not a number.
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidArgument(
                    "%s must be an integer, got %s" % (name, json_type(value)), argument=name
                )
            if value < rule.get("minimum", value):
                raise InvalidArgument(
                    "%s must be at least %d, got %s" % (name, rule["minimum"], int_text(value)),
                    argument=name,
                )
            if value > rule.get("maximum", value):
                raise InvalidArgument(
                    "%s must be at most %d, got %s" % (name, rule["maximum"], int_text(value)),
                    argument=name,
                )
        clean[name] = value
    return clean


def clip(text):
    """A caller's string cut to a length fit for an error message."""
    return text if len(text) <= SHOWN_MAX else text[:SHOWN_MAX] + "…"


def shown(value):
    """``repr`` of a caller's value for an error message, cut short: errors never echo megabytes."""
    if isinstance(value, str):
        return repr(clip(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return int_text(value)
    return repr(value)[:SHOWN_MAX]


def int_text(value):
    """An integer for an error message; past 18 digits only its size (str() refuses huge ones)."""
    if abs(value) < 10 ** 18:
        return "%d" % value
    return "%san integer of about %d digits" % ("-" if value < 0 else "",
                                                  int(value.bit_length() * 0.30103) + 1)


def json_type(value):
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


def check_content(content, argument="content"):
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


def check_title(title, argument="title"):
    if is_blank(title):
        raise InvalidArgument(
            "%s must not be blank: it needs a visible character, not only spaces, controls or "
            "zero-width characters" % argument, argument=argument)


def check_people_string(value, argument, max_length):
    if not isinstance(value, str):
        raise InvalidArgument("%s must be a string, got %s" % (argument, json_type(value)),
                              argument=argument)
    check_text(value, argument)
    if not value:
        raise InvalidArgument("%s must not be empty" % argument, argument=argument)
    if max_length is not None and len(value) > max_length:
        raise InvalidArgument("%s must be at most %d characters, got %d"
                              % (argument, max_length, len(value)), argument=argument)


def check_new_article(title, content, title_argument, content_argument):
    check_people_string(title, title_argument, TITLE_MAX)
    check_title(title, title_argument)
    check_people_string(content, content_argument, None)
    check_content(content, content_argument)


def citation(kb_id, article_id, updated_at):
    return {"knowledge_base_id": kb_id, "article_id": article_id, "updated_at": updated_at}


def fingerprint(kb_id, article_id, content, title, expected_us):
    """SHA-256 of the request as the store understands it, so a respelled version still matches."""
    canonical = json.dumps(
        [kb_id, article_id, content, title, expected_us], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def granted_set(granted):
    """The granted knowledge-base IDs as a set; a lone string is a mistake, not a set of letters."""
    if isinstance(granted, str):
        raise TypeError("granted must be a collection of knowledge-base IDs, not a string")
    return frozenset(granted)


# -- text: tokens, query terms, ranking, snippets ----------------------------------------------

# Latin, Greek and Cyrillic diacritics (the combining marks NFKD splits off): dropped, so that
# "cafe" finds "Café". Marks of other scripts (Devanagari's vowel signs) are part of the word.
_DIACRITICS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_ASCII_WORD = re.compile(r"[a-z0-9]+")
_word_re = None  # compiled on first use of non-ASCII text: it costs a few milliseconds


def _word_pattern():
    """Letters and digits (not "_") and every combining mark, as one regular expression."""
    global _word_re
    if _word_re is None:
        marks, start = [], None
        for code in range(0x0300, 0x10000):
            if unicodedata.category(chr(code))[0] == "M":
                if start is None:
                    start = code
            elif start is not None:
                marks.append((start, code - 1))
                start = None
        spans = "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "")
                        for a, b in marks)
        _word_re = re.compile(r"(?:[^\W_]|[%s])+" % spans)
    return _word_re


def _is_cjk(ch):
    """Han ideographs and Japanese kana: scripts written without spaces between words."""
    code = ord(ch)
    return (0x3400 <= code <= 0x4DBF or 0x4E00 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF
            or 0x3040 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF or 0x20000 <= code <= 0x2FFFF)


def normalize(text):
    """``text`` as search compares it: case folded, compatibility forms unified, Latin
    diacritics removed (NFKD, drop the marks, NFC)."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize(
        "NFC", _DIACRITICS.sub("", unicodedata.normalize("NFKD", text.casefold())))


def _cjk_tokens(word, out):
    """Append the tokens of a word holding Chinese or Japanese characters: each run of them as
    overlapping pairs (a lone character as itself), anything else in the word as words."""
    run, other = [], []
    for ch in word + " ":
        if _is_cjk(ch):
            if other:
                out.append("".join(other))
                other = []
            run.append(ch)
        elif run and unicodedata.category(ch)[0] == "M":
            run[-1] += ch
        else:
            if run:
                out.extend([run[0]] if len(run) == 1 else
                           [run[i] + run[i + 1] for i in range(len(run) - 1)])
                run = []
            if ch != " ":
                other.append(ch)
    if other:
        out.append("".join(other))


def tokens(text):
    """The search tokens of ``text``, in order: normalized words, Chinese and Japanese as
    overlapping character pairs. The same function tokenizes articles and queries."""
    text = normalize(text)
    if text.isascii():
        return _ASCII_WORD.findall(text)
    out = []
    for word in _word_pattern().findall(text):
        if word.isascii() or not any(_is_cjk(ch) for ch in word):
            out.append(word)
        else:
            _cjk_tokens(word, out)
    return out


def query_terms(text):
    """The distinct search tokens of a query, in order, common English function words dropped
    (unless nothing else is left)."""
    found = list(dict.fromkeys(tokens(text)))
    content = [term for term in found if term not in STOPWORDS]
    return content or found


def idf(df, n):
    """BM25's inverse document frequency, never negative (Lucene's form)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class SearchDoc:
    """What search keeps of a published article: its title's tokens in order, its body's
    distinct tokens with their counts, and both lengths in tokens."""

    title_tokens: tuple
    body_counts: dict
    title_len: int
    body_len: int

    @classmethod
    def of(cls, title, content):
        """The SearchDoc of an article's text."""
        title_tokens = tuple(tokens(title))
        body = tokens(content)
        return cls(title_tokens, dict(Counter(body)), len(title_tokens), len(body))

    @classmethod
    def stored(cls, row):
        """The SearchDoc of a stored ``search_docs`` row."""
        counts = {term: int(count) for term, count in
                  (line.split("\t") for line in row["body_terms"][1:-1].split("\n") if line)}
        return cls(tuple(row["title_terms"].split()), counts, row["title_len"], row["body_len"])

    @property
    def title_text(self):
        """The title's tokens as stored: space-separated, in order."""
        return " ".join(self.title_tokens)

    @cached_property
    def body_text(self):
        """The body's counts as stored: a line ``term<TAB>count`` each, between newlines."""
        return "\n" + "".join("%s\t%d\n" % item for item in sorted(self.body_counts.items()))

    @cached_property
    def body_terms(self):
        """The body's distinct tokens, sorted, space-separated (what a full-text index holds)."""
        return " ".join(sorted(self.body_counts))

    def term_presence(self):
        """``{term: (in title, in body)}`` as 0/1 pairs: what it adds to the term counts."""
        presence = {term: (0, 1) for term in self.body_counts}
        for term in set(self.title_tokens):
            presence[term] = (1, presence.get(term, (0, 0))[1])
        return presence


def presence_delta(old, new):
    """``{term: (title delta, body delta)}`` of replacing SearchDoc ``old`` by ``new`` (either
    may be None: added or removed)."""
    old_title = set(old.title_tokens) if old is not None else set()
    new_title = set(new.title_tokens) if new is not None else set()
    old_body = old.body_counts.keys() if old is not None else set()
    new_body = new.body_counts.keys() if new is not None else set()
    # Only the terms whose presence changed in a field: set differences, not a walk of both.
    return {term: ((term in new_title) - (term in old_title),
                   (term in new_body) - (term in old_body))
            for term in (old_title ^ new_title) | (old_body ^ new_body)}


def presence_totals(docs):
    """``{term: (articles holding it in the title, in the body)}`` over SearchDocs ``docs``."""
    totals = {}
    for doc in docs:
        for term, (in_title, in_body) in doc.term_presence().items():
            t0, b0 = totals.get(term, (0, 0))
            totals[term] = (t0 + in_title, b0 + in_body)
    return totals


def score_needles(terms):
    """``(term, body needle)`` pairs for ``score``: built once per query, not per article."""
    return [(term, "\n%s\t" % term) for term in terms]


def score(doc_row, needles, stats):
    """``(terms held, BM25F score)`` of one stored ``search_docs`` row for a query's terms.

    ``needles`` come from ``score_needles``; ``stats`` holds the knowledge base's average
    field lengths ``avg_title`` and ``avg_body`` and each term's ``(idf in titles, in bodies)``.
    """
    title = doc_row["title_terms"].split()
    body = doc_row["body_terms"]
    idfs = stats["idf"]
    # BM25 for each field written out inline: this runs for every candidate of every
    # search. A field's length norm is the same for every term, so it is computed once.
    avg_title, avg_body = stats["avg_title"], stats["avg_body"]
    title_norm = 1.0 - BM25_B + BM25_B * (doc_row["title_len"] / avg_title if avg_title else 1.0)
    body_norm = 1.0 - BM25_B + BM25_B * (doc_row["body_len"] / avg_body if avg_body else 1.0)
    held, total = 0, 0.0
    for term, needle in needles:
        tf_title = title.count(term)
        at = body.find(needle)
        if at < 0:
            if not tf_title:
                continue
            tf_body = 0
        else:
            start = at + len(needle)
            tf_body = int(body[start:body.index("\n", start)])
        held += 1
        idf_title, idf_body = idfs[term]
        if tf_title:
            total += TITLE_WEIGHT * (idf_title * tf_title * (BM25_K1 + 1.0)
                                     / (tf_title + BM25_K1 * title_norm))
        if tf_body:
            total += BODY_WEIGHT * (idf_body * tf_body * (BM25_K1 + 1.0)
                                    / (tf_body + BM25_K1 * body_norm))
    return held, total


def _joins_word(ch):
    """Whether ``ch`` continues a word (so a match beside it is only part of a word)."""
    if ch < "\x80":
        return ch.isalnum()
    return ch.isalnum() or unicodedata.category(ch)[0] == "M"


def _find_ascii(text, terms):
    """``(start, end, term)`` of whole-word, case-insensitive matches of ASCII ``terms``."""
    lowered, size, hits = text.lower(), len(text), []
    for term in terms:
        at, found = lowered.find(term), 0
        # A snippet shows one window; a dozen matches of a word are plenty to place it.
        while at >= 0 and found < SNIPPET_MAX_MATCHES:
            stop = at + len(term)
            # ``_joins_word`` of an ASCII character, written out: this loop runs per match.
            if ((at == 0 or not lowered[at - 1].isalnum())
                    and (stop == size or not lowered[stop].isalnum())):
                hits.append((at, stop, term))
                found += 1
            at = lowered.find(term, stop)
    return hits


def _find_words(text, terms):
    """``(start, end, term)`` of words of any script whose tokens are among ``terms``."""
    hits, found = [], {}
    for match in _word_pattern().finditer(text):
        word = match.group()
        if word.isascii():
            key = word.lower()
            if key in terms and found.get(key, 0) < SNIPPET_MAX_MATCHES:
                hits.append((match.start(), match.end(), key))
                found[key] = found.get(key, 0) + 1
            continue
        for token in tokens(word):
            if token in terms and found.get(token, 0) < SNIPPET_MAX_MATCHES:
                hits.append((match.start(), match.end(), token))
                found[token] = found.get(token, 0) + 1
                break
    return hits


def make_snippet(text, terms, words=SNIPPET_WORDS):
    """About ``words`` words of ``text`` around its densest cluster of ``terms``, marked **.

    ``terms`` are search tokens (``query_terms``); a word is marked when one of its tokens is
    a term, so "Café" is marked for "cafe". Only the first ``SNIPPET_SCAN_CHARS`` characters
    are looked at: the cost is bounded whatever the article's length.
    """
    text = text[:SNIPPET_SCAN_CHARS]
    terms = frozenset(terms)
    if text.isascii() and all(term.isascii() for term in terms):
        hits = _find_ascii(text, sorted(terms, key=len, reverse=True))
    else:
        hits = _find_words(text, terms)
    hits.sort(key=lambda hit: (hit[0], -hit[1]))
    kept, reach = [], 0
    for hit in hits:
        if hit[0] >= reach:
            kept.append(hit)
            reach = hit[1]
    hits = kept
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


# -- Markdown ----------------------------------------------------------------------------------


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


def read_utf8_file(path, label, argument):
    """The text of a UTF-8 file; InvalidArgument naming it (as ``label``) when it cannot be
    read or is not UTF-8."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise InvalidArgument("cannot read %s: %s" % (label, exc.strerror), argument=argument,
                              path=str(path)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument("%s is not UTF-8 text (byte %d is 0x%02x); save it as UTF-8"
                              % (label, exc.start, raw[exc.start]), argument=argument,
                              path=str(path)) from None


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
        text = read_utf8_file(path, path, "directory")
        try:
            title, content = parse_markdown(text, os.path.splitext(os.path.basename(path))[0])
            check_new_article(title, content, "title", "content")
        except (ValueError, ToolError) as exc:
            raise InvalidArgument("%s cannot be imported: %s" % (
                path, exc.message if isinstance(exc, ToolError) else exc),
                argument="directory", path=path) from None
        documents.append(SourceDocument(source, title, content))
        if progress is not None:
            progress("read", done, len(paths))
    return documents
