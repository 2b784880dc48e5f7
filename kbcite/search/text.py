"""Search's text rules: how titles, bodies and queries become tokens.

One function, ``tokens``, cuts articles and queries alike: case folded, compatibility forms
unified, Latin diacritics dropped (so "cafe" finds "Café"), the marks of other scripts kept as
part of the word, Chinese and Japanese as overlapping character pairs. ``query_terms`` adds the
query's rules: distinct tokens, common English function words dropped.
"""

import re
import unicodedata

# Words that match nearly every article: left in a query they add nothing to the ranking and
# make every tier large, so they are dropped from queries (unless nothing else is left).
STOPWORDS = frozenset("""
a an and are as at be by can do does for from how i if in into is it its my not of on or our
so than that the their then there these this to was we what when where which who why will
with you your
""".split())


# Latin, Greek and Cyrillic diacritics (the combining marks NFKD splits off): dropped, so that
# "cafe" finds "Café". Marks of other scripts (Devanagari's vowel signs) are part of the word.
_DIACRITICS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")

_ASCII_WORD = re.compile(r"[a-z0-9]+")

# Letters in square brackets glued to a word mark a command's option inside it, as cheat
# sheets write them ("E[x]tract", "[c]reate", "Lis[t]"): the brackets go, the word stays whole.
_GLUED_BRACKETS = re.compile(r"\[([^\W_]+)\](?=[^\W_])|(?<=[^\W_])\[([^\W_]+)\]")

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
    run: list[str] = []
    other: list[str] = []
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


def _unbracket(match):
    return match.group(1) or match.group(2)


def tokens(text):
    """The search tokens of ``text``, in order: normalized words, Chinese and Japanese as
    overlapping character pairs. The same function tokenizes articles and queries."""
    text = normalize(text)
    if "[" in text:
        text = _GLUED_BRACKETS.sub(_unbracket, text)
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
    return terms_of(tokens(text))


def terms_of(said):
    """``query_terms`` of a query already cut into ``tokens``."""
    found = list(dict.fromkeys(said))
    content = [term for term in found if term not in STOPWORDS]
    return content or found
