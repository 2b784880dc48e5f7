"""What a store's connection last wrote to the search index, article by article, so that the
next edit of one neither tokenizes its text before again nor looks up the IDs of the terms
the edit leaves as they were.

An edit tells the index what it held before (``index.reindex``): the old text's tokens, each
by its term ID. Made again from the text, that took as long as the new text's own, and the
IDs of every term of both (a lookup of some 150 terms a typical article) were the largest
part of an edit. Agents edit the same few articles again and again; the entry a write leaves
here answers the next one, once it is shown to be what the index still holds.

An entry is trusted only while the article's text and title are the ones it was made from,
and the stored row (title tokens, lengths and the body's bytes) is exactly what it wrote: a
write by another connection or process, a rolled-back one, a rebuild that numbered the terms
again, each leaves a row that differs, and the edit looks everything up as before. Even where
a rebuild gave the same bytes (terms with equal counts trading IDs), the IDs taken from an
entry are those of terms whose counts the edit keeps, whose pairs in the new body are the
same either way; every term whose count changes is looked up.
"""

import collections

# Articles remembered per connection: the few an agent or a team is working on. Each entry
# holds an article's text and its tokens, some ten times the text's size in all: the texts of
# the entries together are kept under TEXT_CHARS (a megabyte article is not remembered).
ENTRIES = 64
TEXT_CHARS = 512 * 1024


class WrittenDocs:
    """The last ``size`` search rows this connection wrote (their texts within ``chars``
    characters in all): for each article, the text it was made from, the SearchDoc, its
    terms' IDs and the body's bytes."""

    def __init__(self, size=ENTRIES, chars=TEXT_CHARS):
        self.size = size
        self.chars = chars
        self._entries = collections.OrderedDict()
        self._held = 0  # the characters of the entries' texts

    def put(self, kb_pk, pk, text, doc, ids, body):
        """Remember what was written for article ``pk``: its ``(title, content)``, SearchDoc,
        ``{term: ID}`` of the doc's terms, and the stored body's bytes."""
        self.forget(kb_pk, pk)
        size = len(text[0]) + len(text[1])
        if size > self.chars:
            return
        self._entries[(kb_pk, pk)] = (tuple(text), doc, ids, body)
        self._held += size
        while len(self._entries) > self.size or self._held > self.chars:
            self.forget(*next(iter(self._entries)))  # the oldest

    def get(self, kb_pk, pk, text, stored):
        """``(SearchDoc, {term: ID})`` of article ``pk``'s text ``(title, content)`` where the
        stored search row ``stored`` is exactly what was written from that text, else None
        (and the entry is forgotten)."""
        key = (kb_pk, pk)
        entry = self._entries.get(key)
        if entry is None:
            return None
        was, doc, ids, body = entry
        if (was == tuple(text) and doc.title_len == stored["title_len"]
                and doc.body_len == stored["body_len"]
                and doc.title_text == stored["title_terms"] and body == bytes(stored["body"])):
            return doc, ids
        self.forget(kb_pk, pk)
        return None

    def forget(self, kb_pk, pk):
        """Drop article ``pk``'s entry (its row changed, or left the index)."""
        entry = self._entries.pop((kb_pk, pk), None)
        if entry is not None:
            self._held -= len(entry[0][0]) + len(entry[0][1])
