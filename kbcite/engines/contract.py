"""What a storage engine of the knowledge-base store must keep: its primitives, each with its
promise, its dialect and its capabilities as data.

The store's concepts (``kbcite.edits``, ``kbcite.events``, ``kbcite.articles``, search)
hold the semantics; the shared SQL (``kbcite.engines.sql``, a module a table) holds the
statements, written once with ``?`` placeholders; an engine (``kbcite.engines.sqlite``,
``kbcite.engines.postgres``) holds a connection and keeps these primitives, each the way
that engine does it best:

- ``read()``: a context in which every statement sees one snapshot; it takes no lock a
  writer waits for.
- ``write()``: a context of one transaction: all of it commits, or none of it.
- ``lock_kb(kb_id)``: inside ``write()``, the knowledge base's row, locked to the commit, so
  that two writers of one knowledge base take turns and its events commit in sequence order.
- ``lock_new_kb()``: inside ``write()``, creations of knowledge bases take turns.
- ``new_text_pks(count)``: inside ``write()``, fresh increasing pks no other writer takes.
- ``execute(sql, params)``, ``execute_many(sql, rows)``: one statement, in the caller's
  transaction, every value bound.
- ``create_kb_index``, ``index_add``, ``index_remove``, ``index_replace``, ``index_clear``,
  ``optimize``: the full-text index, in the caller's transaction.
- ``match(kb_pk, queries, limit)``, ``match_docs(...)``: ranked candidates for boolean queries
  of terms, bounded by ``limit``, one round trip; ``indexed_pks``, ``title_indexed_pks``: what
  the index holds, for the audit.
- ``events_notify(kb_pk, sequence)``: inside ``write()``, watchers hear of it at commit.
- ``store_error(exc)``: the ToolError for one of the driver's exceptions, or ``None``.
- ``interrupt()``, ``clear_interrupt()``: from another thread, end the running call; a write
  that was interrupted never commits: the interruption is looked at once the write holds its
  lock and again just before its commit (``stop_if_interrupted``), and the call ends in
  ``CallCancelled``, rolled back.
- ``waits``: whether ``write()`` waits for the lock; where ``local_reads``, False makes a held
  lock raise ``WouldWait`` at once.
- ``upgrade_schema()``, ``integrity_problems()``, ``dump()``, ``foreign_keys(on)``, ``close()``.

Capabilities (``capabilities``, a frozenset of ``CAPABILITIES``) say what an engine offers
beyond them, so that nobody asks which engine it is: ``change_waiter()`` where it can
``listen``, ``image()`` and ``load_image()`` where it has an ``image``; ``local_reads`` where a
read never waits on a network or a lock; ``data_version()`` where it can tell cheaply whether
anything was committed since it last asked. Where the engines
differ only in how SQL is spelled, the difference is data (``placeholder``, ``arrays``,
``search_doc_extra``); where they differ in behaviour, each has its own primitive.
"""

import contextlib
import re
import threading

from ..errors import CallCancelled

# What an engine may offer beyond the primitives: ``listen``, a connection that wakes at the
# commits that wrote events (``change_waiter``); ``image``, the whole store copied to bytes
# and back (``image``, ``load_image``), which spares a simulation rebuilding each morning;
# ``local_reads``, reads that wait for no network and no lock (a file on this machine, WAL),
# so that a server may run a short one where it stands instead of handing it to a thread;
# ``data_version``, a value that moves at every commit to the store (``data_version``), so
# that what a connection read may be kept until it does.
CAPABILITIES = frozenset({"listen", "image", "local_reads", "data_version"})

# A ``?`` placeholder, or a literal ``%`` that a driver of ``%s`` placeholders needs doubled.
_QMARK_OR_PERCENT = re.compile(r"\?|%")


def spelled_for(sql, placeholder):
    """``sql``, written with ``?`` placeholders, spelled for a driver that takes
    ``placeholder`` (``%s``: psycopg's, where a literal ``%`` is doubled)."""
    if placeholder == "?":
        return sql
    return _QMARK_OR_PERCENT.sub(lambda m: placeholder if m.group() == "?" else "%%", sql)


class Engine:
    """The primitives an engine keeps; the shared SQL (``kbcite.engines.sql``) stands on it."""

    name = "engine"
    # What the engine offers beyond the primitives (a subset of CAPABILITIES).
    capabilities: frozenset[str] = frozenset()
    # Dialect, as data: the placeholder its driver takes (statements are written with ``?``
    # and converted once), and whether it binds a list as one array (``= ANY(?)``) instead
    # of one placeholder a value.
    placeholder = "?"
    arrays = False
    # More columns an engine keeps per search_docs row, as (column, placeholder), and their
    # values come from ``_search_doc_extra``: PostgreSQL's tsvectors.
    search_doc_extra: tuple[tuple[str, str], ...] = ()
    # Whether ``write()`` waits for the write lock (up to the store's timeout). An engine with
    # ``local_reads`` also honours False: a write that finds the lock held raises WouldWait at
    # once, before it writes anything, so a server may try an edit where it stands.
    waits = True
    # Set by ``interrupt`` (from another thread), cleared by ``clear_interrupt``: each engine
    # makes its own ``threading.Event`` when it connects.
    interrupted: threading.Event

    # -- the connection and its transactions -----------------------------------------------------

    def close(self):
        """Close the connection."""
        raise NotImplementedError

    def execute(self, sql, params=()):
        """Run one statement (written with ``?``) in the caller's transaction; returns a
        cursor (rows as dicts or sqlite3.Row)."""
        raise NotImplementedError

    def execute_many(self, sql, rows):
        """Run one statement for each parameter tuple of ``rows``, in the caller's transaction."""
        raise NotImplementedError

    @contextlib.contextmanager
    def read(self):
        """A consistent read: every statement inside sees one snapshot; it never takes a lock
        a writer holds, and no writer waits for it."""
        raise NotImplementedError
        yield  # pragma: no cover

    @contextlib.contextmanager
    def write(self):
        """One write transaction: everything done inside commits together or not at all, and
        a failure inside rolls it all back (the driver's failure raised as ``store_error``
        makes it)."""
        raise NotImplementedError
        yield  # pragma: no cover

    def lock_kb(self, kb_id):
        """Inside ``write()``: the knowledge base's row, locked until the commit, or None; two
        writers of one knowledge base take turns, so its event sequence commits in order."""
        raise NotImplementedError

    def lock_new_kb(self):
        """Inside ``write()``: make creations of knowledge bases take turns, where the write
        transaction does not already serialise them."""

    def new_text_pks(self, count):
        """Inside ``write()``: ``count`` fresh, increasing pks for new texts, which no other
        writer can take."""
        raise NotImplementedError

    def foreign_keys(self, enabled):
        """Outside a transaction: check foreign keys on every statement, or not (a migration
        that rebuilds a table)."""

    def interrupt(self):
        """From another thread: stop the call running on this connection; a wait for another
        writer ends, and a write transaction rolls back instead of committing."""
        self.interrupted.set()
        self._stop_statement()

    def clear_interrupt(self):
        """Ready the connection for a new call after an ``interrupt``."""
        self.interrupted.clear()

    def _stop_statement(self):
        """From another thread: end the statement running now, a wait for a lock included."""

    def stop_if_interrupted(self):
        """Inside a write, once it holds its lock and just before it commits: ``CallCancelled``
        (the transaction then rolls back) if the call was interrupted meanwhile. A cancel that
        comes while a write waits for its lock, or after the lock is taken, so never commits;
        one that comes later is too late, and the caller is told what was written."""
        if self.interrupted.is_set():
            raise CallCancelled("the call was cancelled before it was written: its transaction "
                                "was rolled back and nothing was written")

    def store_error(self, exc):
        """The ToolError for a driver exception (busy, damaged, failed), or None when it is
        not the driver's."""
        return None

    # -- the schema ------------------------------------------------------------------------------

    def upgrade_schema(self):
        """Inside ``write()``: migrate an older schema, all of it in that transaction; returns
        ``(the schema found, the knowledge-base pks to index anew)``."""
        raise NotImplementedError

    def integrity_problems(self):
        """What the database's own consistency check reports (empty when it has none)."""
        return []

    def dump(self):
        """Every stored row, as comparable text (tests compare dumps before and after)."""
        raise NotImplementedError

    # -- the full-text index, in the caller's transaction ----------------------------------------

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

    def index_clear(self, kb_pk):
        """Empty a knowledge base's full-text index."""
        raise NotImplementedError

    def optimize(self, kb_pk):
        """Compact a knowledge base's full-text index after a bulk load."""

    def match(self, kb_pk, queries, limit):
        """For each query ``(terms, title_only, spare)``: the article pks, lowest first,
        holding every term of ``terms`` but at most ``spare`` (0 or 1; in the title, with
        ``title_only``), as ``query_tree`` writes it; at most ``limit`` each, the work bounded
        by the limit, not by how many articles hold a word. One round trip for all of them."""
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

    def _search_doc_extra(self, kb_pk, doc):
        """The values of ``search_doc_extra``'s columns for one article."""
        return ()

    # -- watchers of the event log ---------------------------------------------------------------

    def events_notify(self, kb_pk, sequence):
        """Inside ``write()``: tell watchers, at commit, that a knowledge base's log reached
        ``sequence``; nothing where the engine cannot ``listen`` (its watchers poll)."""

    def change_waiter(self):
        """With ``listen``: a connection of its own whose ``wait(timeout)`` returns early once
        a commit wrote events; StoreFailed where it cannot listen after all (a standby)."""
        raise NotImplementedError

    # -- with ``image`` --------------------------------------------------------------------------

    def image(self):
        """With ``image``: the whole store as bytes."""
        raise NotImplementedError

    def load_image(self, data):
        """With ``image``: replace this store by a copy of ``image()`` bytes."""
        raise NotImplementedError

    # -- with ``data_version`` -------------------------------------------------------------------

    def data_version(self):
        """With ``data_version``: a value that differs from every earlier one this connection
        gave once anything was committed to the store since (by it, or by another connection
        in any process), and is equal to the last one otherwise."""
        raise NotImplementedError

    # -- shared helpers: a query's rows, in the caller's transaction -----------------------------

    def rows(self, sql, params=()):
        """Every row of a query, as dicts."""
        return [dict(row) for row in self.execute(sql, params).fetchall()]

    def tuples(self, sql, params=()):
        """Every row of a query, as tuples of its columns in order: no dict a row, for the
        queries that bring hundreds (a body's term IDs)."""
        return [tuple(row.values()) if isinstance(row, dict) else tuple(row)
                for row in self.execute(sql, params).fetchall()]

    def first(self, sql, params=()):
        """The first row of a query as the driver gives it, or None; the statement is closed
        at once, never left running (SQLite keeps one that is not finished active, and an
        ``interrupt`` then stops every statement after it, not only that one)."""
        cursor = self.execute(sql, params)
        try:
            return cursor.fetchone()
        finally:
            cursor.close()

    def row(self, sql, params=()):
        """The first row of a query as a dict, or None."""
        found = self.first(sql, params)
        return None if found is None else dict(found)

    def value(self, sql, params=()):
        """The first column of the first row, or None."""
        found = self.first(sql, params)
        if found is None:
            return None
        return next(iter(found.values())) if isinstance(found, dict) else found[0]

    def in_list(self, column, values):
        """``(SQL, params)`` testing ``column`` against a list of values: one array where the
        engine binds ``arrays`` (one plan whatever their number), else ``IN (?, ...)``."""
        if self.arrays:
            return "%s = ANY(?)" % column, [list(values)]
        return "%s IN (%s)" % (column, ",".join("?" * len(values))), list(values)
