"""What a store's calls run on: its engine, its clock, and what search keeps between calls.

``KBStore`` makes one ``Context`` and hands it to the concepts (``kbcite.edits``,
``kbcite.events``, ``kbcite.articles``, search, ...), which need nothing else of the face.
"""

from .search.snippets import SnippetCache
from .search.written import WrittenDocs
from .versions import datetime_to_us


class Context:
    """A store's engine ``db``, its ``clock`` (aware datetimes), its ``semantic`` half
    (``kbcite.search.semantic.Semantic``, or None: lexical), and search's caches."""

    def __init__(self, db, clock, semantic=None):
        self.db = db
        self.clock = clock
        self.semantic = semantic
        self.snippets = SnippetCache()
        # What this connection last wrote to the index, for the next edit of an article.
        self.written = WrittenDocs()
        # The work the last search did, for tests and benchmarks.
        self.last_search = {}

    def now_us(self):
        """The clock's time, in microseconds since the epoch."""
        return datetime_to_us(self.clock())
