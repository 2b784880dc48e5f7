"""The SQLite engine's full-text index: two contentless FTS5 tables a knowledge base (titles
and bodies; titles), fed the store's own tokens (``search.text.tokens``) and told what to forget
from the tokens ``search_docs`` keeps."""

import sqlite3
from typing import Any

from ..search.query import query_tree, render_query
from .contract import Engine
from .sql.search import SEARCH_DOC_COLUMNS
from .sqlite_schema import FTS_SQL, FTS_TITLE_SQL, FTS_TUNING

# ``PRAGMA auto_vacuum``'s value for incremental (set on every new store).
INCREMENTAL = 2


def fts_literal(term):
    """A term as an FTS5 string: searched for as text, never parsed as query syntax."""
    return '"%s"' % term.replace('"', '""')


class FTS5Index(Engine):
    """The full-text index of a SQLite store: two contentless FTS5 tables a knowledge base."""

    _conn: sqlite3.Connection

    def create_kb_index(self, kb_pk):
        """A new knowledge base's FTS5 tables (titles and bodies; titles), with their merge
        settings."""
        self._conn.execute(FTS_SQL.format(pk=int(kb_pk)))
        self._create_title_index(kb_pk)
        self._tune("fts_%d" % int(kb_pk))

    def _create_title_index(self, kb_pk):
        self._conn.execute(FTS_TITLE_SQL.format(pk=int(kb_pk)))
        self._tune("fts_title_%d" % int(kb_pk))

    def _tune(self, table):
        for option, value in FTS_TUNING:
            self._conn.execute("INSERT INTO {0} ({0}, rank) VALUES (?, ?)".format(table),
                               (option, value))

    def _fts_row(self, doc):
        return doc.title_text, doc.body_terms

    def index_add(self, kb_pk, items):
        """Index articles' tokens."""
        self._index_add(kb_pk, items, True, True)

    def index_remove(self, kb_pk, pk, doc):
        """Tell the contentless indexes the tokens to forget: exactly those they were given."""
        self._index_remove(kb_pk, pk, doc, True, True)

    def index_replace(self, kb_pk, pk, old, new):
        """Replace an article's rows in the indexes, where its tokens changed (the index of
        titles and bodies keeps a body's distinct tokens, not their counts)."""
        main = self._fts_row(old) != self._fts_row(new)
        title = old.title_text != new.title_text
        self._index_remove(kb_pk, pk, old, main, title)
        self._index_add(kb_pk, [(pk, new)], main, title)

    def _index_add(self, kb_pk, items, main, title):
        # ``main``: the index of titles and bodies; ``title``: the index of titles.
        if main:
            self._conn.executemany("INSERT INTO fts_%d (rowid, title, body) VALUES (?, ?, ?)"
                                   % int(kb_pk),
                                   [(pk,) + self._fts_row(doc) for pk, doc in items])
        if title:
            self._conn.executemany("INSERT INTO fts_title_%d (rowid, title) VALUES (?, ?)"
                                   % int(kb_pk), [(pk, doc.title_text) for pk, doc in items])

    def _index_remove(self, kb_pk, pk, doc, main, title):
        if main:
            self._conn.execute("INSERT INTO fts_{0} (fts_{0}, rowid, title, body) VALUES "
                               "('delete', ?, ?, ?)".format(int(kb_pk)),
                               (pk,) + self._fts_row(doc))
        if title:
            self._conn.execute("INSERT INTO fts_title_{0} (fts_title_{0}, rowid, title) VALUES "
                               "('delete', ?, ?)".format(int(kb_pk)), (pk, doc.title_text))

    def index_clear(self, kb_pk):
        """Empty a knowledge base's FTS5 tables (to rebuild them)."""
        self._conn.execute("DROP TABLE IF EXISTS fts_%d" % int(kb_pk))
        self._conn.execute("DROP TABLE IF EXISTS fts_title_%d" % int(kb_pk))
        self.create_kb_index(kb_pk)

    def _match_sql(self, kb_pk, queries, limit):
        # FTS5 queries of quoted terms (AND, OR), on the index of titles and bodies or on the
        # one of titles, as rows (q, pk), in order.
        parts, params = [], []
        for i, (terms, title_only, spare) in enumerate(queries):
            table = ("fts_title_%d" if title_only else "fts_%d") % int(kb_pk)
            parts.append("SELECT %d AS q, rowid AS pk FROM (SELECT rowid FROM %s WHERE "
                         "%s MATCH ? ORDER BY rowid LIMIT ?)" % (i, table, table))
            params += [render_query(query_tree(terms, spare), fts_literal, " AND ", " OR "),
                       limit]
        return " UNION ALL ".join(parts), params

    def match(self, kb_pk, queries, limit):
        """Rowids in order for FTS5 queries of quoted terms, all in one statement."""
        found: list[list[int]] = [[] for _ in queries]
        for query, rowid in self._conn.execute(*self._match_sql(kb_pk, queries, limit)):
            found[query].append(rowid)
        return found

    def match_docs(self, kb_pk, queries, limit):
        """``match``, with the stored tokens of every article found, in the same statement."""
        sql, params = self._match_sql(kb_pk, queries, limit)
        found: list[list[int]] = [[] for _ in queries]
        docs: dict[int, Any] = {}
        for row in self._conn.execute(
                "SELECT m.q, %s FROM (%s) AS m JOIN search_docs AS d ON d.pk = m.pk"
                % (", ".join("d." + column for column in SEARCH_DOC_COLUMNS), sql), params):
            found[row[0]].append(row[1])
            docs[row[1]] = row
        return found, docs

    def indexed_pks(self, kb_pk):
        """Every rowid in the knowledge base's index (read through a temporary vocabulary)."""
        return self._vocabulary_rowids("fts_%d" % int(kb_pk))

    def title_indexed_pks(self, kb_pk):
        """Every rowid holding a token in the knowledge base's index of titles."""
        return self._vocabulary_rowids("fts_title_%d" % int(kb_pk))

    def _vocabulary_rowids(self, table):
        self._conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab_{0} USING "
                           "fts5vocab(main, {0}, 'instance')".format(table))
        try:
            return [row[0] for row in self._conn.execute(
                "SELECT DISTINCT doc FROM temp.vocab_%s ORDER BY doc" % table)]
        finally:
            self._conn.execute("DROP TABLE temp.vocab_%s" % table)

    def optimize(self, kb_pk):
        """Merge each of the knowledge base's indexes into one segment, and give the pages
        that freed (and any other free page) back to the file system."""
        for table in ("fts_%d" % int(kb_pk), "fts_title_%d" % int(kb_pk)):
            self._conn.execute("INSERT INTO {0} ({0}) VALUES ('optimize')".format(table))
        # The module steps a statement that returns no rows once, and each step of
        # incremental_vacuum frees one page: one statement a free page. A store made before
        # auto_vacuum was set keeps its free pages (the pragma frees nothing there).
        free = self._conn.execute("PRAGMA freelist_count").fetchall()[0][0]
        if self._conn.execute("PRAGMA auto_vacuum").fetchall()[0][0] == INCREMENTAL:
            for _ in range(free):
                self._conn.execute("PRAGMA incremental_vacuum")

    def fts_problems(self):
        """FTS5's own check of every knowledge base's indexes (it writes to run)."""
        problems = []
        for (pk,) in self._conn.execute("SELECT pk FROM knowledge_bases").fetchall():
            for table in ("fts_%d" % int(pk), "fts_title_%d" % int(pk)):
                try:
                    self._conn.execute("INSERT INTO {0} ({0}) VALUES ('integrity-check')"
                                       .format(table))
                except sqlite3.DatabaseError as exc:
                    problems.append("search index %s of knowledge base pk %d: %s"
                                    % (table, pk, exc))
        return problems
