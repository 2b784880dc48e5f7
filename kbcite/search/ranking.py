"""BM25F ranking: what search keeps of an article, and the score of one article for a query.

Nothing here touches a database: the engines store ``SearchDoc``'s stored forms (the title's
tokens as text, the body's counts as bytes keyed by the knowledge base's term IDs), and the
tiers (``kbcite.search.tiers``) score the candidates the index finds.
"""

import math
from collections import Counter
from dataclasses import dataclass
from functools import cached_property, lru_cache

from .text import STOPWORDS, tokens

# BM25F (Robertson and Zaragoza): each field's term frequency is normalised by that field's own
# length against its own average (B), the title's counting TITLE_WEIGHT times the body's, and
# the sum saturated once (K1), so a word said in both fields is not counted as two words. On
# the judged collections of bench/search_quality.py a weight of 2 ranked best (4, the weight of
# separately saturated fields before, lost to plain BM25 there).
BM25_K1, BM25_B = 1.2, 0.75

TITLE_WEIGHT = 2.0

# A title that the query says whole, as a phrase ("tar" in "extract a tar archive"), adds
# this many times its words' idf: a page named by the question outranks pages that only
# share a word of it with their title.
TITLE_PHRASE_WEIGHT = 3.0

# A question's score counts at most this many of its words (the rarest): a 200-character
# question has about thirty.
SCORED_TERMS_MAX = 32

# At most this many candidates per index query: the work of a search is bounded by
# (queries x this), never by how many articles hold a common word.
CANDIDATES_PER_QUERY = 50

# A stored body is, for each distinct term, its ID in the knowledge base's term table and its
# count, in base-64 digits, most significant first, each byte's top two bits saying what it
# is: an ID digit with more to come (MORE), an ID's last digit where the count is 1 (ONE: most
# terms of a body are said once, and their count takes no byte), an ID's last digit where
# count digits follow (MANY), a count digit (COUNT). An entry starts at the start or after a
# ONE or COUNT byte, so ``bytes.find`` of an ID's two forms tells its entry from a longer ID's
# tail by the byte before it, and scoring reads a query term's count without parsing the
# rest: about 2 bytes a term, where ``\nterm\tcount`` text took 9 and a regular expression
# over all of it per candidate.
MORE, ONE, MANY, COUNT = 0x00, 0x40, 0x80, 0xC0
KIND, VALUE = 0xC0, 0x3F

# A body with its MANY bytes made ONE bytes (``body.translate``): an ID's last digit looks the
# same whatever follows it, so scoring finds a query term's entry with one ``bytes.find``,
# not one for each form, and reads the form from the body itself.
_ONE_FORM = bytes(b - (MANY - ONE) if MANY <= b < COUNT else b for b in range(256))

# The term IDs whose two forms are kept made: every write encodes each of its article's
# terms, and the most common terms (the smallest IDs) are in nearly every article. About
# 200 bytes an ID.
TERM_KEYS_CACHED = 8192

# A count of one base-64 digit (nearly every count above one), made once.
_ONE_DIGIT_COUNTS = [bytes((COUNT | n,)) for n in range(VALUE + 1)]


@lru_cache(maxsize=TERM_KEYS_CACHED)
def term_key(term_id):
    """The two forms an ID takes in a body, ``(count 1, count digits follow)``: what
    scoring looks for."""
    digits = _digits(term_id)
    head = bytes(MORE | d for d in digits[:-1])
    return head + bytes([ONE | digits[-1]]), head + bytes([MANY | digits[-1]])


def _digits(n):
    out = [n & VALUE]
    n >>= 6
    while n:
        out.append(n & VALUE)
        n >>= 6
    return out[::-1]


def _entry(term_id, count):
    one, many = term_key(term_id)
    if count == 1:
        return one
    if count <= VALUE:
        return many + _ONE_DIGIT_COUNTS[count]
    return many + bytes(COUNT | d for d in _digits(count))


def body_count(body, key):
    """The count stored in ``body`` for the term whose ``term_key`` is ``key``, or 0."""
    return count_in(body, body.translate(_ONE_FORM), key[0])


def count_in(body, one_form, one):
    """The count stored in ``body`` for the term whose ID's first form (``term_key``'s) is
    ``one``, or 0; ``one_form`` is ``body.translate(_ONE_FORM)``, made once a body."""
    find = one_form.find
    start = find(one)
    # A whole ID: at the start, or after an entry's last byte (not an ID digit).
    while start > 0 and one_form[start - 1] < ONE:
        start = find(one, start + 1)
    if start < 0:
        return 0
    end = start + len(one)
    if body[end - 1] < MANY:
        return 1
    count, size = 0, len(body)
    while end < size and body[end] >= COUNT:
        count = (count << 6) | (body[end] & VALUE)
        end += 1
    return count


def decode_body(body):
    """A stored body's ``(term ID, count)`` pairs, in stored order."""
    pairs, number, pending, count, in_id = [], 0, None, 0, False
    for byte in body:
        kind, digit = byte & KIND, byte & VALUE
        if kind == COUNT:
            if pending is None:
                raise ValueError("a stored body has a count without its term ID")
            count = (count << 6) | digit
            continue
        if pending is not None:
            if not count:
                raise ValueError("a stored body has a term ID without its count")
            pairs.append((pending, count))
            pending, count = None, 0
        number = (number << 6) | digit
        in_id = kind == MORE
        if kind == ONE:
            pairs.append((number, 1))
        elif kind == MANY:
            pending = number
        if not in_id:
            number = 0
    if in_id:
        raise ValueError("a stored body ends inside a term ID")
    if pending is not None:
        if not count:
            raise ValueError("a stored body has a term ID without its count")
        pairs.append((pending, count))
    return pairs


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
    def stored(cls, row, names, pairs=None):
        """The SearchDoc of a stored ``search_docs`` row; ``names`` maps the knowledge base's
        term IDs to their terms (a KeyError names an ID it lacks); ``pairs`` is the row's
        ``decode_body``, where the caller decoded it already (to read the names)."""
        if pairs is None:
            pairs = decode_body(bytes(row["body"]))
        counts = {names[term_id]: count for term_id, count in pairs}
        return cls(tuple(row["title_terms"].split()), counts, row["title_len"], row["body_len"])

    @property
    def title_text(self):
        """The title's tokens as stored: space-separated, in order."""
        return " ".join(self.title_tokens)

    def body_bytes(self, ids):
        """The body's counts as stored (``MORE``'s comment), by the term IDs ``ids``."""
        return b"".join(_entry(ids[term], count) for term, count in
                        sorted(self.body_counts.items(), key=lambda item: ids[item[0]]))

    def terms(self):
        """Every distinct token of the title and the body."""
        return set(self.title_tokens) | self.body_counts.keys()

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
    totals: dict[str, tuple[int, int]] = {}
    for doc in docs:
        for term, (in_title, in_body) in doc.term_presence().items():
            t0, b0 = totals.get(term, (0, 0))
            totals[term] = (t0 + in_title, b0 + in_body)
    return totals


def score_needles(terms, stats):
    """What ``score`` looks for, built once per query, not per article: for each term, the
    term, the form its ID (``stats["ids"]``) takes in a body whose MANY bytes are made ONE
    bytes (``_ONE_FORM``; ``term_key``'s first), its factor ``weight x idf x (K1 + 1)`` and
    its bit (``1 << its place in terms``)."""
    ids, idfs, weights = stats["ids"], stats["idf"], stats["weight"]
    return [(term, term_key(ids[term])[0], weights[term] * idfs[term] * (BM25_K1 + 1.0), 1 << i)
            for i, term in enumerate(terms)]


def score(doc_row, needles, stats):
    """``(terms held, BM25F score, the bits of the terms its body holds)`` of one stored
    ``search_docs`` row for a query's terms (the bits tell its snippet which to look for).

    ``needles`` come from ``score_needles``; ``stats`` holds the knowledge base's average
    field lengths ``avg_title`` and ``avg_body``, each term's ``idf`` and its ``weight`` (how
    often the query says it), and ``phrase`` (``phrase_bonus``'s query part).
    """
    title = doc_row["title_terms"].split()
    body = doc_row["body"]
    # A field's length norm is the same for every term, so it is computed once.
    avg_title, avg_body = stats["avg_title"], stats["avg_body"]
    title_norm = 1.0 - BM25_B + BM25_B * (doc_row["title_len"] / avg_title if avg_title else 1.0)
    body_norm = 1.0 - BM25_B + BM25_B * (doc_row["body_len"] / avg_body if avg_body else 1.0)
    # Only the query's terms are looked up, in one pass and one ``find`` a term (``_ONE_FORM``):
    # this runs for every candidate of every search, and most of a question's words are not
    # in most candidates.
    # (``count_in``'s lines, inlined: a call a term of a candidate cost a tenth of a search.)
    one_form = body.translate(_ONE_FORM)
    find = one_form.find
    total, held, titled, in_body = 0.0, 0, False, 0
    for term, one, factor, bit in needles:
        start = find(one)
        while start > 0 and one_form[start - 1] < ONE:
            start = find(one, start + 1)
        if start < 0:
            count = 0
        else:
            end = start + len(one)
            if body[end - 1] < MANY:
                count = 1
            else:
                count, size = 0, len(body)
                while end < size and body[end] >= COUNT:
                    count = (count << 6) | (body[end] & VALUE)
                    end += 1
            if count:
                in_body |= bit
        in_title = title.count(term)  # a title is a few words: one pass in C
        if in_title:
            titled = True
        elif not count:
            continue
        held += 1
        tf = TITLE_WEIGHT * in_title / title_norm + count / body_norm
        total += factor * tf / (tf + BM25_K1)
    if titled and stats["phrase"]:
        total += phrase_bonus(title, stats)
    return held, total, in_body


def phrase_bonus(title, stats):
    """``TITLE_PHRASE_WEIGHT`` x the idf of a title's words when the query says the whole
    title as a phrase (its words in order, the query's function words skipped alike), else 0.

    ``stats["phrase"]`` is the query's words in order (``content_words``) joined by spaces,
    between spaces; ``stats["idf"]`` has every term's idf.
    """
    words = content_words(title)
    if not words or " %s " % " ".join(words) not in stats["phrase"]:
        return 0.0
    idfs = stats["idf"]
    return TITLE_PHRASE_WEIGHT * sum(idfs.get(word, 0.0) for word in set(words))


def content_words(token_list):
    """The tokens that are not function words, in order (all of them if none is left)."""
    words = [t for t in token_list if t not in STOPWORDS]
    return words or list(token_list)
