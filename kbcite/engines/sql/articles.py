"""Articles and their texts: the rows every read and write of an article goes through."""

from ._table import Table

# The columns every read of an article's full row selects, and the join that brings its text.
ARTICLE_COLUMNS = ("a.pk, a.article_id, a.title, t.content, a.published, a.version_us, "
                   "a.updated_at, a.source, a.import_version, a.text_pk")

ARTICLE_FROM = "articles AS a JOIN texts AS t ON t.pk = a.text_pk"

# The web pages list a knowledge base's articles newest change first, a page at a time: walked
# in this index's order, a page reads its rows only (schema 6).
ARTICLES_CHANGED_SQL = "CREATE INDEX articles_changed ON articles (kb_pk, version_us, pk)"


class ArticleSQL(Table):
    """The ``articles`` and ``texts`` tables."""

    def visibility(self, kb_pk, article_id):
        """``{pk, published}`` of an article, read without its content, or None."""
        return self.db.row("SELECT pk, published FROM articles WHERE kb_pk = ? AND article_id = ?",
                        (kb_pk, article_id))

    def get(self, pk):
        """An article's whole row, its current text with it."""
        return self.db.row("SELECT %s FROM %s WHERE a.pk = ?" % (ARTICLE_COLUMNS, ARTICLE_FROM),
                        (pk,))

    def by_id(self, kb_pk, article_id):
        """An article's whole row by its ID, or None."""
        return self.db.row("SELECT %s FROM %s WHERE a.kb_pk = ? AND a.article_id = ?"
                        % (ARTICLE_COLUMNS, ARTICLE_FROM), (kb_pk, article_id))

    def of_kb(self, kb_pk):
        """Every article of a knowledge base with its text, in creation order."""
        return self.db.rows("SELECT %s FROM %s WHERE a.kb_pk = ? ORDER BY a.pk"
                         % (ARTICLE_COLUMNS, ARTICLE_FROM), (kb_pk,))

    def by_ids(self, kb_pk, article_ids):
        """``{article_id: whole row}`` of those of ``article_ids`` that exist, drafts too."""
        where, params = self.db.in_list("a.article_id", article_ids)
        return {row["article_id"]: row for row in self.db.rows(
            "SELECT %s FROM %s WHERE a.kb_pk = ? AND %s" % (ARTICLE_COLUMNS, ARTICLE_FROM, where),
            [kb_pk] + params)}

    def published(self, kb_pk, article_ids):
        """``{article_id: whole row}`` of those of ``article_ids`` that are published: the
        others' texts are never read."""
        where, params = self.db.in_list("a.article_id", article_ids)
        return {row["article_id"]: row for row in self.db.rows(
            "SELECT %s FROM %s WHERE a.kb_pk = ? AND a.published = 1 AND %s"
            % (ARTICLE_COLUMNS, ARTICLE_FROM, where), [kb_pk] + params)}

    def visibility_of(self, kb_pk, article_ids):
        """``{article_id: {pk, published}}`` of those of ``article_ids`` that exist, read
        without their text."""
        where, params = self.db.in_list("article_id", article_ids)
        return {row["article_id"]: row for row in self.db.rows(
            "SELECT pk, article_id, published FROM articles WHERE kb_pk = ? AND %s" % where,
            [kb_pk] + params)}

    def insert(self, kb_pk, rows):
        """New articles from ``(article_id, title, text_pk, published, version_us, updated_at,
        source)`` rows, their IDs consecutive; returns their pks in the same order."""
        self.db.execute_many(
            "INSERT INTO articles (kb_pk, article_id, title, text_pk, published, version_us, "
            "updated_at, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(kb_pk, a, t, x, int(p), v, u, s) for a, t, x, p, v, u, s in rows])
        # Article IDs have a fixed width, so their text order is their number order.
        pks = {r["article_id"]: r["pk"] for r in self.db.rows(
            "SELECT pk, article_id FROM articles WHERE kb_pk = ? AND article_id >= ? "
            "AND article_id <= ?", (kb_pk, rows[0][0], rows[-1][0]))}
        return [pks[row[0]] for row in rows]

    def swap(self, row, title, text_pk, published, version_us, updated_at):
        """The compare-and-swap: write only if the article still holds ``row``'s version and
        visibility; returns the number of rows written (0 or 1)."""
        return self.db.execute(
            "UPDATE articles SET title = ?, text_pk = ?, published = ?, version_us = ?, "
            "updated_at = ? WHERE pk = ? AND version_us = ? AND published = ?",
            (title, text_pk, int(published), version_us, updated_at, row["pk"],
             row["version_us"], row["published"])).rowcount

    def listing(self, kb_pk):
        """Every article of a knowledge base without its content, in creation order."""
        return self.db.rows(
            "SELECT a.article_id, a.title, a.published, a.updated_at, length(t.content) AS "
            "chars, a.source FROM %s WHERE a.kb_pk = ? ORDER BY a.pk" % ARTICLE_FROM, (kb_pk,))

    def published_recent(self, kb_pk, offset, limit):
        """A page of a knowledge base's published articles, the newest change first, without
        their content: ``article_id, title, updated_at``."""
        return self.db.rows(
            "SELECT article_id, title, updated_at FROM articles WHERE kb_pk = ? AND "
            "published = 1 ORDER BY version_us DESC, pk DESC LIMIT ? OFFSET ?",
            (kb_pk, limit, offset))

    def published_page(self, kb_pk, after, limit):
        """Up to ``limit`` published articles of a knowledge base whose IDs sort after
        ``after``, by ID, without their content: ``article_id, title, updated_at, bytes``."""
        return self.db.rows(
            "SELECT a.article_id, a.title, a.updated_at, t.bytes FROM %s WHERE a.kb_pk = ? "
            "AND a.published = 1 AND a.article_id > ? ORDER BY a.article_id LIMIT ?"
            % ARTICLE_FROM, (kb_pk, after, limit))

    def published_ids_with_prefix(self, kb_pk, prefix, limit):
        """Up to ``limit`` published article IDs of a knowledge base that start with
        ``prefix``, by ID (compared exactly, whatever the engine's collation)."""
        return [r["article_id"] for r in self.db.rows(
            "SELECT article_id FROM articles WHERE kb_pk = ? AND published = 1 AND "
            "substr(article_id, 1, ?) = ? ORDER BY article_id LIMIT ?",
            (kb_pk, len(prefix), prefix, limit))]

    def ids_with_prefix(self, kb_pk, prefix, limit):
        """Up to ``limit`` ``(article_id, title)`` of a knowledge base's articles, drafts
        too, whose IDs start with ``prefix``, by ID: what the command line completes."""
        return [(r["article_id"], r["title"]) for r in self.db.rows(
            "SELECT article_id, title FROM articles WHERE kb_pk = ? AND "
            "substr(article_id, 1, ?) = ? ORDER BY article_id LIMIT ?",
            (kb_pk, len(prefix), prefix, limit))]

    def title_prefix_ids(self, kb_pk, prefix, limit):
        """Up to ``limit`` IDs of published articles with a title word (a search token) that
        starts with ``prefix``, shortest titles first: a range of the title-terms key, each
        match checked exactly."""
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return [r["article_id"] for r in self.db.rows(
            "SELECT a.article_id, min(t.title_len) AS title_len FROM title_terms AS t JOIN "
            "articles AS a ON a.pk = t.pk WHERE t.kb_pk = ? AND t.term >= ? AND t.term < ? "
            "AND substr(t.term, 1, ?) = ? AND a.published = 1 GROUP BY a.article_id "
            "ORDER BY min(t.title_len), a.article_id LIMIT ?",
            (kb_pk, prefix, upper, len(prefix), prefix, limit))]

    def published_texts(self, kb_pk):
        """Every published article's pk, title and content, in creation order (to index anew)."""
        return self.db.rows("SELECT a.pk, a.title, t.content FROM %s WHERE a.kb_pk = ? AND "
                         "a.published = 1 ORDER BY a.pk" % ARTICLE_FROM, (kb_pk,))

    def hits(self, pks, chars):
        """Search hits' rows: the first ``chars`` characters of the content only."""
        marks = ",".join("?" * len(pks))
        # A text of at most ``chars`` bytes has at most ``chars`` characters: it is taken
        # whole, not counted through character by character. The rows as the driver gives
        # them (mappings both), as ``search_docs`` gives its own.
        return self.db.execute(
            "SELECT a.pk, a.article_id, a.title, a.updated_at, a.source, CASE WHEN t.bytes "
            "<= ? THEN t.content ELSE substr(t.content, 1, ?) END AS content FROM %s WHERE "
            "a.pk IN (%s)" % (ARTICLE_FROM, marks), [chars, chars] + list(pks)).fetchall()

    def imported(self, kb_pk):
        """The articles an import made, with their content, keyed by nothing (a list)."""
        return self.db.rows("SELECT %s FROM %s WHERE a.kb_pk = ? AND a.source IS NOT NULL"
                         % (ARTICLE_COLUMNS, ARTICLE_FROM), (kb_pk,))

    def texts_insert(self, kb_pk, contents):
        """Store new texts; returns their pks in order (``new_text_pks`` allocates them)."""
        pks = self.db.new_text_pks(len(contents))
        self.db.execute_many("INSERT INTO texts (pk, kb_pk, bytes, content) VALUES (?, ?, ?, ?)",
                          [(pk, kb_pk, len(content.encode("utf-8")), content)
                           for pk, content in zip(pks, contents)])
        return pks

    def texts(self, pks):
        """``{pk: content}`` of the given texts."""
        pks = sorted(set(pks))
        if not pks:
            return {}
        where, params = self.db.in_list("pk", pks)
        return {row["pk"]: row["content"] for row in self.db.rows(
            "SELECT pk, content FROM texts WHERE %s" % where, params)}

    def delete(self, kb_pk, pk):
        """Remove an article and its whole history, texts included (its search rows are the
        caller's to remove first)."""
        held = [row["text_pk"] for row in self.db.rows(
            "SELECT text_pk FROM versions WHERE article_pk = ? AND text_pk IS NOT NULL UNION "
            "SELECT text_pk FROM articles WHERE pk = ?", (pk, pk))]
        self.db.execute("DELETE FROM versions WHERE article_pk = ?", (pk,))
        self.db.execute("DELETE FROM articles WHERE pk = ?", (pk,))
        self.db.execute_many("DELETE FROM texts WHERE pk = ?", [(text_pk,) for text_pk in held])

    def set_source(self, pk, source):
        """Point an imported article at another file (a rename)."""
        self.db.execute("UPDATE articles SET source = ? WHERE pk = ?", (source, pk))

    def set_import_version(self, pk, version):
        """Record ``version`` as the one an import wrote (a restore carries it over)."""
        self.db.execute("UPDATE articles SET import_version = ? WHERE pk = ?", (version, pk))

    def mark_imported(self, pk):
        """Record the article's current version as the one an import wrote (or found equal)."""
        self.db.execute("UPDATE articles SET import_version = updated_at WHERE pk = ?", (pk,))
