"""What a storage engine of the knowledge-base store provides, and the SQL both engines share.

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

from ..errors import NotAStore, StoreBusy, StoreDamaged, StoreFailed
from ..limits import SCHEMA_VERSION
from .proposals_sql import ProposalSQL

# The columns every read of an article's full row selects, and the join that brings its text.
ARTICLE_COLUMNS = ("a.pk, a.article_id, a.title, t.content, a.published, a.version_us, "
                   "a.updated_at, a.source, a.import_version, a.text_pk")
ARTICLE_FROM = "articles AS a JOIN texts AS t ON t.pk = a.text_pk"
# A version's row, without its text.
VERSION_COLUMNS = ("article_pk", "version_us", "updated_at", "action", "sequence", "event",
                   "published", "title", "text_pk", "bytes", "actor", "summary", "approver")

KB_COLUMNS = ("pk, kb_id, head_sequence, published_count, title_tokens, body_tokens, "
              "import_root")

# What search keeps of an article, as ranking reads it (``search.ranking.score``,
# ``SearchDoc.stored``).
SEARCH_DOC_COLUMNS = ("pk", "title_terms", "title_len", "body_terms", "body_len")

# Bearer tokens for the HTTP server, the same on every engine: only a SHA-256 of each is kept,
# with what it grants.
TOKENS_SQL = """
CREATE TABLE tokens (
    name TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    grants TEXT NOT NULL,
    writes TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
)
"""

# The HTTP server's handshake sessions (MCP 2025-11-25 and earlier), the same on every engine,
# kept here so that every server process on the store serves each (kbcite.sessions); and what
# a client sends to a request another process holds (its answer to a question, a
# cancellation), left for that process to collect.
SESSIONS_SQL = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    token_name TEXT NOT NULL REFERENCES tokens(name),
    protocol_version TEXT NOT NULL,
    capabilities TEXT NOT NULL,
    initialized INTEGER NOT NULL DEFAULT 0,
    created_us BIGINT NOT NULL,
    seen_us BIGINT NOT NULL
);
CREATE INDEX sessions_token ON sessions (token_name, seen_us);
CREATE INDEX sessions_seen ON sessions (seen_us);
CREATE TABLE session_messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    body TEXT NOT NULL,
    created_us BIGINT NOT NULL
);
CREATE INDEX session_messages_session ON session_messages (session_id, created_us)
"""

SESSION_COLUMNS = ("id, token_name, protocol_version, capabilities, initialized, created_us, "
                   "seen_us")


class Engine(ProposalSQL):
    """The shared SQL steps; a subclass supplies the connection, transactions and index."""

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

    # -- shared: one statement or a few, in the caller's transaction ----------------------------

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

    def kb_row(self, kb_id):
        """A knowledge base's row by ID, or None."""
        return self.row("SELECT %s FROM knowledge_bases WHERE kb_id = ?" % KB_COLUMNS, (kb_id,))

    def kb_by_pk(self, pk):
        """A knowledge base's row by its pk."""
        return self.row("SELECT %s FROM knowledge_bases WHERE pk = ?" % KB_COLUMNS, (pk,))

    def kb_list(self):
        """Every knowledge base with its counts, by ID."""
        return self.rows(
            "SELECT kb_id AS knowledge_base_id, name, published_count AS published, "
            "articles_created AS articles, head_sequence FROM knowledge_bases ORDER BY kb_id")

    def kb_insert(self, kb_id, name):
        """A new knowledge base; returns its pk."""
        self.execute("INSERT INTO knowledge_bases (kb_id, name) VALUES (?, ?)", (kb_id, name))
        pk = self.value("SELECT pk FROM knowledge_bases WHERE kb_id = ?", (kb_id,))
        self.create_kb_index(pk)
        return pk

    def kb_next(self, kb_pk, counter, count=1):
        """Advance a knowledge base's counter (``head_sequence``, ``articles_created``) by
        ``count``; returns the first of the numbers taken."""
        # Two statements, not UPDATE ... RETURNING, which SQLite before 3.35 lacks.
        self.execute("UPDATE knowledge_bases SET {0} = {0} + ? WHERE pk = ?".format(counter),
                     (count, kb_pk))
        return self.value("SELECT {0} FROM knowledge_bases WHERE pk = ?".format(counter),
                          (kb_pk,)) - count + 1

    def kb_add_published(self, kb_pk, count, title_tokens, body_tokens):
        """Move a knowledge base's published count and token totals (BM25's averages)."""
        self.execute(
            "UPDATE knowledge_bases SET published_count = published_count + ?, "
            "title_tokens = title_tokens + ?, body_tokens = body_tokens + ? WHERE pk = ?",
            (count, title_tokens, body_tokens, kb_pk))

    def article_visibility(self, kb_pk, article_id):
        """``{pk, published}`` of an article, read without its content, or None."""
        return self.row("SELECT pk, published FROM articles WHERE kb_pk = ? AND article_id = ?",
                        (kb_pk, article_id))

    def article(self, pk):
        """An article's whole row, its current text with it."""
        return self.row("SELECT %s FROM %s WHERE a.pk = ?" % (ARTICLE_COLUMNS, ARTICLE_FROM),
                        (pk,))

    def article_by_id(self, kb_pk, article_id):
        """An article's whole row by its ID, or None."""
        return self.row("SELECT %s FROM %s WHERE a.kb_pk = ? AND a.article_id = ?"
                        % (ARTICLE_COLUMNS, ARTICLE_FROM), (kb_pk, article_id))

    def in_list(self, column, values):
        """``(SQL, params)`` testing ``column`` against a list of values: ``IN (?, ...)``
        here; an engine with arrays binds one array instead."""
        return "%s IN (%s)" % (column, ",".join("?" * len(values))), list(values)

    def articles_of(self, kb_pk):
        """Every article of a knowledge base with its text, in creation order."""
        return self.rows("SELECT %s FROM %s WHERE a.kb_pk = ? ORDER BY a.pk"
                         % (ARTICLE_COLUMNS, ARTICLE_FROM), (kb_pk,))

    def articles_by_ids(self, kb_pk, article_ids):
        """``{article_id: whole row}`` of those of ``article_ids`` that exist, drafts too."""
        where, params = self.in_list("a.article_id", article_ids)
        return {row["article_id"]: row for row in self.rows(
            "SELECT %s FROM %s WHERE a.kb_pk = ? AND %s" % (ARTICLE_COLUMNS, ARTICLE_FROM, where),
            [kb_pk] + params)}

    def articles_published(self, kb_pk, article_ids):
        """``{article_id: whole row}`` of those of ``article_ids`` that are published: the
        others' texts are never read."""
        where, params = self.in_list("a.article_id", article_ids)
        return {row["article_id"]: row for row in self.rows(
            "SELECT %s FROM %s WHERE a.kb_pk = ? AND a.published = 1 AND %s"
            % (ARTICLE_COLUMNS, ARTICLE_FROM, where), [kb_pk] + params)}

    def articles_visibility(self, kb_pk, article_ids):
        """``{article_id: {pk, published}}`` of those of ``article_ids`` that exist, read
        without their text."""
        where, params = self.in_list("article_id", article_ids)
        return {row["article_id"]: row for row in self.rows(
            "SELECT pk, article_id, published FROM articles WHERE kb_pk = ? AND %s" % where,
            [kb_pk] + params)}

    def articles_insert(self, kb_pk, rows):
        """New articles from ``(article_id, title, text_pk, published, version_us, updated_at,
        source)`` rows, their IDs consecutive; returns their pks in the same order."""
        self.execute_many(
            "INSERT INTO articles (kb_pk, article_id, title, text_pk, published, version_us, "
            "updated_at, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(kb_pk, a, t, x, int(p), v, u, s) for a, t, x, p, v, u, s in rows])
        # Article IDs have a fixed width, so their text order is their number order.
        pks = {r["article_id"]: r["pk"] for r in self.rows(
            "SELECT pk, article_id FROM articles WHERE kb_pk = ? AND article_id >= ? "
            "AND article_id <= ?", (kb_pk, rows[0][0], rows[-1][0]))}
        return [pks[row[0]] for row in rows]

    def article_swap(self, row, title, text_pk, published, version_us, updated_at):
        """The compare-and-swap: write only if the article still holds ``row``'s version and
        visibility; returns the number of rows written (0 or 1)."""
        return self.execute(
            "UPDATE articles SET title = ?, text_pk = ?, published = ?, version_us = ?, "
            "updated_at = ? WHERE pk = ? AND version_us = ? AND published = ?",
            (title, text_pk, int(published), version_us, updated_at, row["pk"],
             row["version_us"], row["published"])).rowcount

    def article_list(self, kb_pk):
        """Every article of a knowledge base without its content, in creation order."""
        return self.rows(
            "SELECT a.article_id, a.title, a.published, a.updated_at, length(t.content) AS "
            "chars, a.source FROM %s WHERE a.kb_pk = ? ORDER BY a.pk" % ARTICLE_FROM, (kb_pk,))

    def published_page(self, kb_pk, after, limit):
        """Up to ``limit`` published articles of a knowledge base whose IDs sort after
        ``after``, by ID, without their content: ``article_id, title, updated_at, bytes``."""
        return self.rows(
            "SELECT a.article_id, a.title, a.updated_at, t.bytes FROM %s WHERE a.kb_pk = ? "
            "AND a.published = 1 AND a.article_id > ? ORDER BY a.article_id LIMIT ?"
            % ARTICLE_FROM, (kb_pk, after, limit))

    def published_ids_with_prefix(self, kb_pk, prefix, limit):
        """Up to ``limit`` published article IDs of a knowledge base that start with
        ``prefix``, by ID (compared exactly, whatever the engine's collation)."""
        return [r["article_id"] for r in self.rows(
            "SELECT article_id FROM articles WHERE kb_pk = ? AND published = 1 AND "
            "substr(article_id, 1, ?) = ? ORDER BY article_id LIMIT ?",
            (kb_pk, len(prefix), prefix, limit))]

    def title_prefix_ids(self, kb_pk, prefix, limit):
        """Up to ``limit`` IDs of published articles with a title word (a search token) that
        starts with ``prefix``, shortest titles first: a range of the title-terms key, each
        match checked exactly."""
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return [r["article_id"] for r in self.rows(
            "SELECT a.article_id, min(t.title_len) AS title_len FROM title_terms AS t JOIN "
            "articles AS a ON a.pk = t.pk WHERE t.kb_pk = ? AND t.term >= ? AND t.term < ? "
            "AND substr(t.term, 1, ?) = ? AND a.published = 1 GROUP BY a.article_id "
            "ORDER BY min(t.title_len), a.article_id LIMIT ?",
            (kb_pk, prefix, upper, len(prefix), prefix, limit))]

    def published_texts(self, kb_pk):
        """Every published article's pk, title and content, in creation order (to index anew)."""
        return self.rows("SELECT a.pk, a.title, t.content FROM %s WHERE a.kb_pk = ? AND "
                         "a.published = 1 ORDER BY a.pk" % ARTICLE_FROM, (kb_pk,))

    def article_hits(self, pks, chars):
        """Search hits' rows: the first ``chars`` characters of the content only."""
        marks = ",".join("?" * len(pks))
        return self.rows(
            "SELECT a.pk, a.article_id, a.title, a.updated_at, substr(t.content, 1, ?) AS "
            "content FROM %s WHERE a.pk IN (%s)" % (ARTICLE_FROM, marks), [chars] + list(pks))

    def articles_imported(self, kb_pk):
        """The articles an import made, with their content, keyed by nothing (a list)."""
        return self.rows("SELECT %s FROM %s WHERE a.kb_pk = ? AND a.source IS NOT NULL"
                         % (ARTICLE_COLUMNS, ARTICLE_FROM), (kb_pk,))

    # -- shared: texts and versions --------------------------------------------------------------

    def texts_insert(self, kb_pk, contents):
        """Store new texts; returns their pks in order (``new_text_pks`` allocates them)."""
        pks = self.new_text_pks(len(contents))
        self.execute_many("INSERT INTO texts (pk, kb_pk, bytes, content) VALUES (?, ?, ?, ?)",
                          [(pk, kb_pk, len(content.encode("utf-8")), content)
                           for pk, content in zip(pks, contents)])
        return pks

    def texts(self, pks):
        """``{pk: content}`` of the given texts."""
        pks = sorted(set(pks))
        if not pks:
            return {}
        where, params = self.in_list("pk", pks)
        return {row["pk"]: row["content"] for row in self.rows(
            "SELECT pk, content FROM texts WHERE %s" % where, params)}

    def versions_insert(self, kb_pk, rows):
        """Append version rows (dicts keyed by ``VERSION_COLUMNS``) to the history."""
        self.execute_many(
            "INSERT INTO versions (kb_pk, %s) VALUES (?, %s)"
            % (", ".join(VERSION_COLUMNS), ", ".join("?" * len(VERSION_COLUMNS))),
            [(kb_pk,) + tuple(row[c] for c in VERSION_COLUMNS) for row in rows])

    def version(self, article_pk, version_us):
        """One version's row (without its text), or None."""
        return self.row("SELECT %s FROM versions WHERE article_pk = ? AND version_us = ?"
                        % ", ".join(VERSION_COLUMNS), (article_pk, version_us))

    def versions_at(self, pairs):
        """``{(article_pk, version_us): row}`` of the versions named by ``pairs``."""
        pairs, found = sorted(set(pairs)), {}
        # A hundred keys a statement keeps the OR chain well inside SQLite's expression depth.
        for start in range(0, len(pairs), 100):
            chunk = pairs[start:start + 100]
            where = " OR ".join(["(article_pk = ? AND version_us = ?)"] * len(chunk))
            for row in self.rows("SELECT %s FROM versions WHERE %s"
                                 % (", ".join(VERSION_COLUMNS), where),
                                 [value for pair in chunk for value in pair]):
                found[(row["article_pk"], row["version_us"])] = row
        return found

    def versions_of(self, article_pk):
        """Every version of an article, oldest first, without texts."""
        return self.rows("SELECT %s FROM versions WHERE article_pk = ? ORDER BY version_us"
                         % ", ".join(VERSION_COLUMNS), (article_pk,))

    def versions_prunable(self, kb_pk, before_us):
        """How many versions ``versions_prune`` would prune."""
        return self.value(
            "SELECT count(*) FROM versions WHERE kb_pk = ? AND version_us < ? AND "
            "text_pk IS NOT NULL AND NOT EXISTS (SELECT 1 FROM articles AS a WHERE "
            "a.pk = versions.article_pk AND (a.version_us = versions.version_us OR "
            "a.import_version = versions.updated_at))",
            (kb_pk, before_us))

    def versions_prune(self, kb_pk, before_us):
        """Drop the texts of a knowledge base's versions older than ``before_us``, never an
        article's current one nor the one its import record names (the base an export and
        an import compare a file with); the rows stay, marked pruned. Returns how many."""
        pruned = self.execute(
            "UPDATE versions SET text_pk = NULL WHERE kb_pk = ? AND version_us < ? AND "
            "text_pk IS NOT NULL AND NOT EXISTS (SELECT 1 FROM articles AS a WHERE "
            "a.pk = versions.article_pk AND (a.version_us = versions.version_us OR "
            "a.import_version = versions.updated_at))",
            (kb_pk, before_us)).rowcount
        # A text goes once nothing holds it: neither a version kept nor an article's current.
        held = {row["text_pk"] for row in self.rows(
            "SELECT text_pk FROM versions WHERE kb_pk = ? AND text_pk IS NOT NULL UNION "
            "SELECT text_pk FROM articles WHERE kb_pk = ?", (kb_pk, kb_pk))}
        loose = [row["pk"] for row in self.rows("SELECT pk FROM texts WHERE kb_pk = ?",
                                                (kb_pk,)) if row["pk"] not in held]
        self.execute_many("DELETE FROM texts WHERE pk = ?", [(pk,) for pk in loose])
        return pruned

    def kb_set_import_root(self, kb_pk, root):
        """Remember the folder a knowledge base was last imported from."""
        self.execute("UPDATE knowledge_bases SET import_root = ? WHERE pk = ?", (root, kb_pk))

    def article_delete(self, kb_pk, pk):
        """Remove an article and its whole history, texts included (its search rows are the
        caller's to remove first)."""
        held = [row["text_pk"] for row in self.rows(
            "SELECT text_pk FROM versions WHERE article_pk = ? AND text_pk IS NOT NULL UNION "
            "SELECT text_pk FROM articles WHERE pk = ?", (pk, pk))]
        self.execute("DELETE FROM versions WHERE article_pk = ?", (pk,))
        self.execute("DELETE FROM articles WHERE pk = ?", (pk,))
        self.execute_many("DELETE FROM texts WHERE pk = ?", [(text_pk,) for text_pk in held])

    def article_set_source(self, pk, source):
        """Point an imported article at another file (a rename)."""
        self.execute("UPDATE articles SET source = ? WHERE pk = ?", (source, pk))

    def article_mark_imported(self, pk):
        """Record the article's current version as the one an import wrote (or found equal)."""
        self.execute("UPDATE articles SET import_version = updated_at WHERE pk = ?", (pk,))

    def events_insert(self, kb_pk, events):
        """Append event dicts (sequence, type, article_id, updated_at) to the log."""
        self.execute_many("INSERT INTO events (kb_pk, sequence, type, article_id, updated_at) "
                          "VALUES (?, ?, ?, ?, ?)", [(kb_pk, e["sequence"], e["type"],
                                                      e["article_id"], e["updated_at"])
                                                     for e in events])

    def events_notify(self, kb_pk, sequence):
        """Tell watchers, at commit, that a knowledge base's log reached ``sequence``: nothing
        here (a SQLite store's watchers look at the heads); PostgreSQL sends a NOTIFY."""

    def change_waiter(self):
        """A connection of its own whose ``wait(timeout)`` returns early once a commit wrote
        events, or None where the engine has none (its watchers poll)."""
        return None

    def events_after(self, kb_pk, after, limit):
        """Up to ``limit`` events after sequence ``after``, in order."""
        return self.rows(
            "SELECT sequence, type, article_id, updated_at FROM events "
            "WHERE kb_pk = ? AND sequence > ? ORDER BY sequence LIMIT ?", (kb_pk, after, limit))

    def idempotency_get(self, kb_pk, key, since_us):
        """The stored ``{fingerprint, result}`` of a key used since ``since_us``, or None."""
        return self.row("SELECT fingerprint, result FROM idempotency WHERE kb_pk = ? AND key = ? "
                        "AND created_us >= ?", (kb_pk, key, since_us))

    def idempotency_put(self, kb_pk, key, fingerprint, result, now_us, expire_before_us):
        """Record a successful edit under its key, and forget keys older than their TTL."""
        # Only this knowledge base's keys: its row lock covers them, so writers of different
        # knowledge bases never wait on each other's expired keys.
        self.execute("DELETE FROM idempotency WHERE kb_pk = ? AND created_us < ?",
                     (kb_pk, expire_before_us))
        self.execute(
            "INSERT INTO idempotency (kb_pk, key, fingerprint, result, created_us) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (kb_pk, key) DO UPDATE SET "
            "fingerprint = excluded.fingerprint, result = excluded.result, "
            "created_us = excluded.created_us",
            (kb_pk, key, fingerprint, result, now_us))

    # -- shared: the search statistics ------------------------------------------------------------

    def search_doc(self, pk):
        """An indexed article's stored tokens, or None if it is not indexed."""
        return self.row("SELECT %s FROM search_docs WHERE pk = ?" % ", ".join(SEARCH_DOC_COLUMNS),
                        (pk,))

    def search_docs(self, pks):
        """The stored tokens of the given articles (those indexed), as mappings."""
        marks = ",".join("?" * len(pks))
        # The rows as the driver gives them (mappings both): search reads many, per query.
        return self.execute("SELECT %s FROM search_docs WHERE pk IN (%s)"
                            % (", ".join(SEARCH_DOC_COLUMNS), marks), list(pks)).fetchall()

    def search_docs_put(self, kb_pk, items):
        """Store published articles' tokens: ``(pk, SearchDoc)`` items (with ``index_add``)."""
        extra = self.search_doc_extra
        self.execute_many(
            "INSERT INTO search_docs (pk, kb_pk, title_terms, title_len, body_terms, body_len%s) "
            "VALUES (?, ?, ?, ?, ?, ?%s)" % ("".join(", " + c for c, _ in extra),
                                             "".join(", " + m for _, m in extra)),
            [(pk, kb_pk, doc.title_text, doc.title_len, doc.body_text, doc.body_len)
             + self._search_doc_extra(kb_pk, doc) for pk, doc in items])
        self._title_terms_put(kb_pk, items)

    def search_doc_delete(self, kb_pk, pk, doc):
        """Forget an article's tokens (with ``index_remove``); ``doc`` is what was stored."""
        self.execute("DELETE FROM search_docs WHERE pk = ?", (pk,))
        self._title_terms_delete(kb_pk, pk, doc)

    def search_doc_replace(self, kb_pk, pk, old, new):
        """Replace a published article's stored tokens by ``new`` (with ``index_replace``);
        its title's terms are rewritten only when the title's tokens changed."""
        self.execute(
            "UPDATE search_docs SET title_terms = ?, title_len = ?, body_terms = ?, "
            "body_len = ?%s WHERE pk = ?" % "".join(", %s = %s" % e for e in self.search_doc_extra),
            (new.title_text, new.title_len, new.body_text, new.body_len)
            + self._search_doc_extra(kb_pk, new) + (pk,))
        if old.title_tokens != new.title_tokens:
            self._title_terms_delete(kb_pk, pk, old)
            self._title_terms_put(kb_pk, [(pk, new)])

    def _search_doc_extra(self, kb_pk, doc):
        """The values of ``search_doc_extra``'s columns for one article."""
        return ()

    def _title_terms_put(self, kb_pk, items):
        self.execute_many("INSERT INTO title_terms (kb_pk, term, title_len, pk) "
                          "VALUES (?, ?, ?, ?)", [(kb_pk, term, doc.title_len, pk)
                                                  for pk, doc in items
                                                  for term in sorted(set(doc.title_tokens))])

    def _title_terms_delete(self, kb_pk, pk, doc):
        # By the whole key: title_terms is ordered for reading by term, not by article.
        self.execute_many("DELETE FROM title_terms WHERE kb_pk = ? AND term = ? AND "
                          "title_len = ? AND pk = ?", [(kb_pk, term, doc.title_len, pk)
                                                       for term in sorted(set(doc.title_tokens))])

    def search_clear(self, kb_pk):
        """Empty a knowledge base's search index and statistics (to index it anew)."""
        self.index_clear(kb_pk)
        for table in ("search_docs", "title_terms", "search_terms"):
            self.execute("DELETE FROM %s WHERE kb_pk = ?" % table, (kb_pk,))
        self.execute("UPDATE knowledge_bases SET published_count = 0, title_tokens = 0, "
                     "body_tokens = 0 WHERE pk = ?", (kb_pk,))

    def term_counts(self, kb_pk, terms):
        """``{term: (articles with it in the title, in the body)}`` for the terms any hold."""
        marks = ",".join("?" * len(terms))
        return {r["term"]: (r["df_title"], r["df_body"]) for r in self.rows(
            "SELECT term, df_title, df_body FROM search_terms WHERE kb_pk = ? AND term IN (%s)"
            % marks, [kb_pk] + list(terms))}

    def term_counts_add(self, kb_pk, deltas):
        """Move the per-term article counts by ``{term: (title delta, body delta)}``."""
        changes = [(kb_pk, term, d_title, d_body)
                   for term, (d_title, d_body) in sorted(deltas.items()) if d_title or d_body]
        if not changes:
            return
        self.execute_many(
            "INSERT INTO search_terms (kb_pk, term, df_title, df_body) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (kb_pk, term) DO UPDATE SET df_title = search_terms.df_title + "
            "excluded.df_title, df_body = search_terms.df_body + excluded.df_body", changes)
        gone = [(kb_pk, term) for _, term, d_title, d_body in changes if d_title < 0 or d_body < 0]
        if gone:
            self.execute_many("DELETE FROM search_terms WHERE kb_pk = ? AND term = ? AND "
                              "df_title = 0 AND df_body = 0", gone)

    def title_candidates(self, kb_pk, terms, limit):
        """For each term, the articles holding it in their title, shortest titles first (the
        best title score for it), at most ``limit`` each; one round trip for all."""
        parts, params = [], []
        for i, term in enumerate(terms):
            parts.append("SELECT %d AS q, pk FROM (SELECT pk FROM title_terms WHERE kb_pk = ? "
                         "AND term = ? ORDER BY title_len, pk LIMIT ?) AS t%d" % (i, i))
            params += [kb_pk, term, limit]
        found = [[] for _ in terms]
        for row in self.execute(" UNION ALL ".join(parts), params).fetchall():
            found[row["q"]].append(row["pk"])  # sqlite3.Row and psycopg's dicts alike
        return found

    # -- shared: bearer tokens ------------------------------------------------------------------

    def token_insert(self, name, token_hash, grants, writes, created_at):
        """Record a new token (its hash only)."""
        self.execute("INSERT INTO tokens (name, token_hash, grants, writes, created_at) "
                     "VALUES (?, ?, ?, ?, ?)", (name, token_hash, grants, writes, created_at))

    def token_by_name(self, name):
        """A token's row by its name, or None."""
        return self.row("SELECT name, grants, writes, created_at, revoked_at FROM tokens "
                        "WHERE name = ?", (name,))

    def token_by_hash(self, token_hash):
        """The live (not revoked) token with this hash, or None."""
        return self.row("SELECT name, grants, writes FROM tokens WHERE token_hash = ? "
                        "AND revoked_at IS NULL", (token_hash,))

    def token_any_by_hash(self, token_hash):
        """The token with this hash, revoked or not (to say why it was refused), or None."""
        return self.row("SELECT name, revoked_at FROM tokens WHERE token_hash = ?", (token_hash,))

    def token_list(self):
        """Every token, by name (no hashes)."""
        return self.rows("SELECT name, grants, writes, created_at, revoked_at FROM tokens "
                         "ORDER BY name")

    def token_revoke(self, name, revoked_at):
        """Mark a token revoked; returns whether it was live."""
        return self.execute("UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at "
                            "IS NULL", (revoked_at, name)).rowcount == 1

    # -- shared: handshake sessions ---------------------------------------------------------------

    def session_insert(self, session_id, token_name, protocol_version, capabilities, now_us):
        """Record a new session."""
        self.execute("INSERT INTO sessions (%s) VALUES (?, ?, ?, ?, 0, ?, ?)" % SESSION_COLUMNS,
                     (session_id, token_name, protocol_version, capabilities, now_us, now_us))

    def session_row(self, session_id):
        """A session's row by its ID, or None."""
        return self.row("SELECT %s FROM sessions WHERE id = ?" % SESSION_COLUMNS, (session_id,))

    def session_seen(self, session_id, now_us):
        """Note a session's use (never moving it back)."""
        self.execute("UPDATE sessions SET seen_us = ? WHERE id = ? AND seen_us < ?",
                     (now_us, session_id, now_us))

    def session_set_initialized(self, session_id):
        """Mark a session's client initialized; returns whether the session exists."""
        return self.execute("UPDATE sessions SET initialized = 1 WHERE id = ?",
                            (session_id,)).rowcount == 1

    def session_delete(self, session_id, token_name):
        """End a session of this token (its messages go with it); returns whether it was."""
        return self.execute("DELETE FROM sessions WHERE id = ? AND token_name = ?",
                            (session_id, token_name)).rowcount == 1

    def sessions_of_token(self, token_name):
        """A token's session IDs, least recently used first."""
        return [r["id"] for r in self.rows("SELECT id FROM sessions WHERE token_name = ? "
                                           "ORDER BY seen_us, id", (token_name,))]

    def sessions_delete(self, session_ids):
        """End these sessions."""
        self.execute_many("DELETE FROM sessions WHERE id = ?", [(i,) for i in session_ids])

    def sessions_delete_of_token(self, token_name):
        """End every session of a token."""
        self.execute("DELETE FROM sessions WHERE token_name = ?", (token_name,))

    def sessions_expire(self, before_us):
        """End every session last used before ``before_us``; returns how many."""
        return self.execute("DELETE FROM sessions WHERE seen_us < ?", (before_us,)).rowcount

    def sessions_live(self, session_ids):
        """Which of these sessions still exist."""
        marks = ",".join("?" * len(session_ids))
        return {r["id"] for r in self.rows("SELECT id FROM sessions WHERE id IN (%s)" % marks,
                                           list(session_ids))}

    def session_message_insert(self, message_id, session_id, kind, target, body, now_us):
        """Leave a message for the process holding a session's request."""
        self.execute("INSERT INTO session_messages (id, session_id, kind, target, body, "
                     "created_us) VALUES (?, ?, ?, ?, ?, ?)",
                     (message_id, session_id, kind, target, body, now_us))

    def session_messages(self, session_ids):
        """The messages left for these sessions, oldest first."""
        marks = ",".join("?" * len(session_ids))
        return self.rows("SELECT id, session_id, kind, target, body, created_us FROM "
                         "session_messages WHERE session_id IN (%s) AND kind <> 'subscription' "
                         "ORDER BY created_us, id" % marks, list(session_ids))

    def session_messages_delete(self, message_ids):
        """Forget messages (collected)."""
        self.execute_many("DELETE FROM session_messages WHERE id = ?",
                          [(i,) for i in message_ids])

    def session_messages_expire(self, before_us):
        """Forget every message left before ``before_us`` that nobody collected."""
        self.execute("DELETE FROM session_messages WHERE created_us < ? AND kind <> "
                     "'subscription'", (before_us,))

    def session_subscriptions(self, session_id):
        """The URIs a session subscribed to (kept as its messages of kind ``subscription``,
        which last as long as the session), oldest first."""
        return [r["target"] for r in self.rows(
            "SELECT target FROM session_messages WHERE session_id = ? AND kind = "
            "'subscription' ORDER BY created_us, id", (session_id,))]

    def session_subscription_count(self, token_name):
        """How many URIs the sessions of a token subscribe to, all told."""
        return self.value(
            "SELECT count(*) FROM session_messages AS m JOIN sessions AS s ON s.id = "
            "m.session_id WHERE s.token_name = ? AND m.kind = 'subscription'", (token_name,))

    def session_subscription_delete(self, session_id, uri):
        """Forget one URI a session subscribed to; returns whether it had."""
        return self.execute("DELETE FROM session_messages WHERE session_id = ? AND kind = "
                            "'subscription' AND target = ?", (session_id, uri)).rowcount > 0

    # -- shared: the audit ----------------------------------------------------------------------

    def audit_kbs(self):
        """Every knowledge base's row."""
        return self.rows("SELECT %s FROM knowledge_bases ORDER BY pk" % KB_COLUMNS)

    def audit_sequences(self, kb_pk):
        """Every event sequence of a knowledge base, in order."""
        return [r["sequence"] for r in self.rows(
            "SELECT sequence FROM events WHERE kb_pk = ? ORDER BY sequence", (kb_pk,))]

    def audit_last_events(self, kb_pk):
        """Each article's last event."""
        last = {}
        # A proposal's events say nothing of the article's state: they are left out.
        for r in self.rows("SELECT article_id, type, updated_at FROM events WHERE kb_pk = ? "
                           "AND type NOT LIKE 'proposal.%' ORDER BY sequence", (kb_pk,)):
            last[r["article_id"]] = r
        return last

    def audit_articles(self, kb_pk):
        """Every article's pk, ID, visibility and version."""
        return self.rows("SELECT pk, article_id, published, updated_at FROM articles "
                         "WHERE kb_pk = ? ORDER BY pk", (kb_pk,))

    def audit_history(self, kb_pk):
        """What the history holds: every version (without texts) in order, the articles'
        current rows, and the pks of the knowledge base's texts."""
        versions = self.rows("SELECT %s FROM versions WHERE kb_pk = ? ORDER BY article_pk, "
                             "version_us" % ", ".join(VERSION_COLUMNS), (kb_pk,))
        articles = self.rows("SELECT pk, article_id, title, published, version_us, text_pk "
                             "FROM articles WHERE kb_pk = ? ORDER BY pk", (kb_pk,))
        texts = {r["pk"] for r in self.rows("SELECT pk FROM texts WHERE kb_pk = ?", (kb_pk,))}
        events = {r["sequence"]: r for r in self.rows(
            "SELECT sequence, type, article_id, updated_at FROM events WHERE kb_pk = ?",
            (kb_pk,))}
        return versions, articles, texts, events

    def audit_search(self, kb_pk):
        """What the search statistics hold: docs, their token totals, title rows, term rows."""
        docs = self.rows("SELECT %s FROM search_docs WHERE kb_pk = ? ORDER BY pk"
                         % ", ".join(SEARCH_DOC_COLUMNS), (kb_pk,))
        titles = self.rows("SELECT term, title_len, pk FROM title_terms WHERE kb_pk = ? "
                           "ORDER BY pk, term", (kb_pk,))
        terms = {r["term"]: (r["df_title"], r["df_body"]) for r in self.rows(
            "SELECT term, df_title, df_body FROM search_terms WHERE kb_pk = ?", (kb_pk,))}
        return docs, titles, terms

    def damaged(self, kb, what):
        """The store_damaged error for a knowledge base whose ``what`` is inconsistent."""
        return StoreDamaged(
            "the %s of knowledge base %r is damaged. A retry will not help; the store's operator "
            "must run the audit (kb audit) and restore from a backup." % (what, kb["kb_id"]),
            knowledge_base_id=kb["kb_id"], retryable=False)


def check_version(where, version, upgrading):
    """Refuse a store of another schema, naming what to do (older: upgrade; newer: update)."""
    if version < SCHEMA_VERSION and not upgrading:
        raise NotAStore(
            "%s is a knowledge-base store of schema %d, older than this program's %d; "
            "upgrade it with: kb upgrade --db %s (copy it first to keep a backup)"
            % (where, version, SCHEMA_VERSION, where), path=str(where), schema=version)
    if version > SCHEMA_VERSION:
        raise NotAStore(
            "%s is a knowledge-base store of schema %d, newer than this program's %d; "
            "install a newer kbcite to open it" % (where, version, SCHEMA_VERSION),
            path=str(where), schema=version)


def busy_error(text, where="the knowledge-base database"):
    """store_busy: another writer held the lock past the wait; nothing was written."""
    return StoreBusy(
        "%s is busy: another writer held it past the wait (%s). Nothing was written; retry "
        "the same call (an edit resent with the same idempotency_key is applied at most once)."
        % (where, text), retryable=True)


def damaged_error(text, where="the knowledge-base database"):
    """store_damaged: the database itself is corrupt."""
    return StoreDamaged(
        "%s is damaged (%s). A retry will not help: stop writing to it, run the audit and "
        "restore it from a backup." % (where, text), retryable=False)


def failed_error(text, where="the knowledge-base database"):
    """store_failed: any other database failure (a full disk, an I/O error)."""
    return StoreFailed(
        "%s failed (%s). Each write is all or nothing, so nothing was half done: retry the same "
        "call once the cause (a full disk, say) is fixed; an edit resent with the same "
        "idempotency_key returns the stored result if it was written." % (where, text),
        retryable=True)
