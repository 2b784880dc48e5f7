"""What a storage engine of the knowledge-base store provides; ``kbcite.engines.sql`` holds the
SQL both engines share.

The store's concepts (``kbcite.edits``, ``kbcite.events``, ``kbcite.articles``, search)
hold the semantics; an engine holds a connection and the store's atomic steps in SQL. The
steps below are written once, with ``?`` placeholders, and run on either engine; each engine
(``kbcite.engines.sqlite``, ``kbcite.engines.postgres``) adds its connection handling, its
transactions and locks, its schema, and its full-text index.

The interface, with the promise each part makes:

- ``read()``: a context for a consistent read. Every statement inside sees one snapshot;
  it never takes a lock a writer holds, and no writer waits for it.
- ``write()``: a context for one write transaction. Writers of a store are serialised per
  knowledge base by ``lock_kb``; everything done inside commits together or not at all, and
  a failure inside rolls it all back.
- ``lock_kb(kb_id)``: inside ``write()``, the knowledge base's row, locked until commit, so
  that two writers of one knowledge base take turns and its event sequence commits in
  sequence order.
- ``index_add`` / ``index_remove`` / ``index_replace`` / ``match`` / ``match_docs`` /
  ``indexed_pks`` / ``title_indexed_pks`` / ``optimize``: the full-text index of published
  articles, of titles and bodies and of titles alone (``match``
  answers boolean queries on terms, in article order, at most ``limit`` rows: its work is
  bounded by the limit, not by how many articles hold a word; ``match_docs`` brings the
  articles' stored tokens with them).
- ``store_error(exc)``: the ToolError for one of the driver's exceptions, or ``None``.
- the shared steps in this class: plain statements that each do one thing in the caller's
  transaction.
"""

import contextlib


class Engine:
    """What an engine provides; the shared SQL (``kbcite.engines.sql``) stands on it."""

    name = "engine"
    # More columns an engine keeps per search_docs row, as (column, placeholder), and their
    # values come from ``_search_doc_extra``: PostgreSQL's tsvectors.
    search_doc_extra = ()

    # -- provided by an engine -----------------------------------------------------------------

    def close(self):
        """Close the connection."""
        raise NotImplementedError

    def execute(self, sql, params=()):
        """Run one statement; returns a cursor (rows as dicts or sqlite3.Row)."""
        raise NotImplementedError

    def execute_many(self, sql, rows):
        """Run one statement for each parameter tuple of ``rows``."""
        raise NotImplementedError

    @contextlib.contextmanager
    def read(self):
        """A consistent read (see the module docstring)."""
        raise NotImplementedError
        yield  # pragma: no cover

    @contextlib.contextmanager
    def write(self):
        """One write transaction (see the module docstring)."""
        raise NotImplementedError
        yield  # pragma: no cover

    def lock_kb(self, kb_id):
        """The knowledge base row, locked for the rest of the write transaction, or None."""
        raise NotImplementedError

    def new_text_pks(self, count):
        """Inside ``write()``: ``count`` fresh, increasing pks for new texts."""
        raise NotImplementedError

    def foreign_keys(self, enabled):
        """Outside a transaction: check foreign keys on every statement, or not (a migration
        that rebuilds a table)."""

    def lock_new_kb(self):
        """Inside ``write()``: make creations of knowledge bases take turns, where the write
        transaction does not already serialise them."""

    def create_kb_index(self, kb_pk):
        """Whatever the full-text index needs for a new knowledge base."""

    def index_add(self, kb_pk, items):
        """Put published articles' tokens, ``(pk, SearchDoc)`` items, in the full-text index."""
        raise NotImplementedError

    def index_remove(self, kb_pk, pk, doc):
        """Take an article's tokens (as stored when added) out of the full-text index."""
        raise NotImplementedError

    def index_replace(self, kb_pk, pk, old, new):
        """Replace an article's tokens in the full-text index (``old`` as stored when added)."""
        raise NotImplementedError

    def match(self, kb_pk, queries, limit):
        """For each query ``(terms, title_only, spare)``: the article pks, lowest first,
        holding every term of ``terms`` but at most ``spare`` (0 or 1; in the title, with
        ``title_only``), as ``query_tree`` writes it; at most ``limit`` each. One round trip
        for all of them."""
        raise NotImplementedError

    def match_docs(self, kb_pk, queries, limit):
        """``(match's lists, {pk: stored tokens row})``: the rows in the same round trip."""
        raise NotImplementedError

    def indexed_pks(self, kb_pk):
        """Every article pk with a token in a knowledge base's full-text index, sorted (for
        the audit)."""
        raise NotImplementedError

    def title_indexed_pks(self, kb_pk):
        """Every article pk with a title token in the index of titles, sorted (for the audit)."""
        raise NotImplementedError

    def index_clear(self, kb_pk):
        """Empty a knowledge base's full-text index."""
        raise NotImplementedError

    def optimize(self, kb_pk):
        """Compact a knowledge base's full-text index after a bulk load."""

    def integrity_problems(self):
        """What the database's own consistency check reports (empty when it has none)."""
        return []

    def store_error(self, exc):
        """The ToolError for a driver exception, or None when it is not the driver's."""
        return None

    def interrupt(self):
        """From another thread: stop the call running on this connection, if it can be."""

    def clear_interrupt(self):
        """Ready the connection for a new call after an ``interrupt``."""

    # -- shared helpers: a query's rows, in the caller's transaction -----------------------------

    def rows(self, sql, params=()):
        """Every row of a query, as dicts."""
        return [dict(row) for row in self.execute(sql, params).fetchall()]

    def row(self, sql, params=()):
        """The first row of a query as a dict, or None."""
        found = self.execute(sql, params).fetchone()
        return None if found is None else dict(found)

    def value(self, sql, params=()):
        """The first column of the first row, or None."""
        found = self.execute(sql, params).fetchone()
        if found is None:
            return None
        return next(iter(found.values())) if isinstance(found, dict) else found[0]

    def in_list(self, column, values):
        """``(SQL, params)`` testing ``column`` against a list of values: ``IN (?, ...)``
        here; an engine with arrays binds one array instead."""
        return "%s IN (%s)" % (column, ",".join("?" * len(values))), list(values)

    def events_notify(self, kb_pk, sequence):
        """Tell watchers, at commit, that a knowledge base's log reached ``sequence``: nothing
        here (a SQLite store's watchers look at the heads); PostgreSQL sends a NOTIFY."""

    def change_waiter(self):
        """A connection of its own whose ``wait(timeout)`` returns early once a commit wrote
        events, or None where the engine has none (its watchers poll)."""
        return None

    def _search_doc_extra(self, kb_pk, doc):
        """The values of ``search_doc_extra``'s columns for one article."""
        return ()
