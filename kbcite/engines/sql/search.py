"""The search statistics: each published article's stored tokens, its title's terms, and
the per-term article counts BM25 reads."""

from ._table import Table

# What search keeps of an article, as ranking reads it (``search.ranking.score``,
# ``SearchDoc.stored``).
SEARCH_DOC_COLUMNS = ("pk", "title_terms", "title_len", "body", "body_len")

# Terms per statement where a write looks up or adds its terms' IDs: under every engine's
# limit of bound values.
TERMS_PER_STATEMENT = 500


class SearchSQL(Table):
    """The ``search_docs``, ``title_terms`` and ``search_terms`` tables."""

    def doc(self, pk):
        """An indexed article's stored tokens, or None if it is not indexed."""
        return self.db.row("SELECT %s FROM search_docs WHERE pk = ?"
                           % ", ".join(SEARCH_DOC_COLUMNS), (pk,))

    def docs(self, pks):
        """The stored tokens of the given articles (those indexed), as mappings."""
        marks = ",".join("?" * len(pks))
        # The rows as the driver gives them (mappings both): search reads many, per query.
        return self.db.execute("SELECT %s FROM search_docs WHERE pk IN (%s)"
                            % (", ".join(SEARCH_DOC_COLUMNS), marks), list(pks)).fetchall()

    def docs_put(self, kb_pk, items, bodies):
        """Store published articles' tokens: ``(pk, SearchDoc)`` items, and in the same order
        their bodies' counts encoded (``SearchDoc.body_bytes``) (with ``index_add``)."""
        extra = self.db.search_doc_extra
        self.db.execute_many(
            "INSERT INTO search_docs (pk, kb_pk, title_terms, title_len, body, body_len%s) "
            "VALUES (?, ?, ?, ?, ?, ?%s)" % ("".join(", " + c for c, _ in extra),
                                             "".join(", " + m for _, m in extra)),
            [(pk, kb_pk, doc.title_text, doc.title_len, body, doc.body_len)
             + self.db._search_doc_extra(kb_pk, doc) for (pk, doc), body in zip(items, bodies)])
        self._title_terms_put(kb_pk, items)

    def doc_delete(self, kb_pk, pk, doc):
        """Forget an article's tokens (with ``index_remove``); ``doc`` is what was stored."""
        self.db.execute("DELETE FROM search_docs WHERE pk = ?", (pk,))
        self._title_terms_delete(kb_pk, pk, doc)

    def doc_replace(self, kb_pk, pk, old, new, body):
        """Replace a published article's stored tokens by ``new``, its body's counts encoded
        as ``body`` (``SearchDoc.body_bytes``) (with ``index_replace``); its title's terms are
        rewritten only when the title's tokens changed."""
        self.db.execute(
            "UPDATE search_docs SET title_terms = ?, title_len = ?, body = ?, "
            "body_len = ?%s WHERE pk = ?"
            % "".join(", %s = %s" % e for e in self.db.search_doc_extra),
            (new.title_text, new.title_len, body, new.body_len)
            + self.db._search_doc_extra(kb_pk, new) + (pk,))
        if old.title_tokens != new.title_tokens:
            self._title_terms_delete(kb_pk, pk, old)
            self._title_terms_put(kb_pk, [(pk, new)])

    def _title_terms_put(self, kb_pk, items):
        self.db.execute_many("INSERT INTO title_terms (kb_pk, term, title_len, pk) "
                          "VALUES (?, ?, ?, ?)", [(kb_pk, term, doc.title_len, pk)
                                                  for pk, doc in items
                                                  for term in sorted(set(doc.title_tokens))])

    def _title_terms_delete(self, kb_pk, pk, doc):
        # By the whole key: title_terms is ordered for reading by term, not by article.
        self.db.execute_many("DELETE FROM title_terms WHERE kb_pk = ? AND term = ? AND "
                          "title_len = ? AND pk = ?", [(kb_pk, term, doc.title_len, pk)
                                                       for term in sorted(set(doc.title_tokens))])

    def clear(self, kb_pk):
        """Empty a knowledge base's search index and statistics (to index it anew)."""
        self.db.index_clear(kb_pk)
        for table in ("search_docs", "title_terms", "search_terms"):
            self.db.execute("DELETE FROM %s WHERE kb_pk = ?" % table, (kb_pk,))
        self.db.execute("UPDATE knowledge_bases SET published_count = 0, title_tokens = 0, "
                     "body_tokens = 0 WHERE pk = ?", (kb_pk,))

    def term_counts(self, kb_pk, terms):
        """``({term: (articles with it in the title, in the body)}, {term: its ID})`` for the
        terms any article holds."""
        marks = ",".join("?" * len(terms))
        counts, ids = {}, {}
        for r in self.db.rows("SELECT term, df_title, df_body, term_id FROM search_terms WHERE "
                           "kb_pk = ? AND term IN (%s)" % marks, [kb_pk] + list(terms)):
            counts[r["term"]] = (r["df_title"], r["df_body"])
            ids[r["term"]] = r["term_id"]
        return counts, ids

    def term_ids(self, kb_pk, terms):
        """``{term: ID}`` for ``terms`` (an ordered sequence), each term the knowledge base has
        no row for given one, the next free IDs in that order (its counts follow with
        ``term_counts_add``). Writes hold the knowledge base's lock, so IDs never clash."""
        terms = list(dict.fromkeys(terms))
        ids = self.term_ids_known(kb_pk, terms)
        missing = [term for term in terms if term not in ids]
        if missing:
            top = self.db.row("SELECT max(term_id) AS top FROM search_terms WHERE kb_pk = ?",
                           (kb_pk,))["top"]
            first = 0 if top is None else top + 1
            ids.update((term, first + n) for n, term in enumerate(missing))
            self.db.execute_many("INSERT INTO search_terms (kb_pk, term, df_title, df_body, "
                              "term_id) VALUES (?, ?, 0, 0, ?)",
                              [(kb_pk, term, ids[term]) for term in missing])
        return ids

    def term_ids_known(self, kb_pk, terms):
        """``{term: ID}`` for those of ``terms`` the knowledge base has a row for (none is
        added)."""
        return dict(self._term_rows(kb_pk, "term", "term_id", list(terms)))

    def term_names(self, kb_pk, term_ids):
        """``{ID: term}`` for the knowledge base's term IDs ``term_ids`` (those it has)."""
        return dict(self._term_rows(kb_pk, "term_id", "term", sorted(set(term_ids))))

    def _term_rows(self, kb_pk, column, other, values):
        # The (column, other) pairs of the rows whose ``column`` is one of ``values``, a
        # statement a TERMS_PER_STATEMENT of them; tuples, not dicts: a body has hundreds.
        for start in range(0, len(values), TERMS_PER_STATEMENT):
            chunk = values[start:start + TERMS_PER_STATEMENT]
            yield from self.db.tuples("SELECT %s, %s FROM search_terms WHERE kb_pk = ? AND "
                                   "%s IN (%s)" % (column, other, column,
                                                   ",".join("?" * len(chunk))),
                                   [kb_pk] + chunk)

    def term_counts_add(self, kb_pk, deltas):
        """Move the per-term article counts by ``{term: (title delta, body delta)}`` (every
        term has its row: ``term_ids`` made those of new terms); a term no article holds any
        more loses its row, and its ID."""
        changes = [(d_title, d_body, kb_pk, term)
                   for term, (d_title, d_body) in sorted(deltas.items()) if d_title or d_body]
        if not changes:
            return
        self.db.execute_many("UPDATE search_terms SET df_title = df_title + ?, "
                             "df_body = df_body + ? WHERE kb_pk = ? AND term = ?", changes)
        gone = [(kb_pk, term) for d_title, d_body, _, term in changes if d_title < 0 or d_body < 0]
        if gone:
            self.db.execute_many("DELETE FROM search_terms WHERE kb_pk = ? AND term = ? AND "
                              "df_title = 0 AND df_body = 0", gone)

    def title_candidates(self, kb_pk, terms, limit):
        """For each term, the articles holding it in their title, shortest titles first (the
        best title score for it), at most ``limit`` each; one round trip for all."""
        parts, params = [], []
        for i, term in enumerate(terms):
            parts.append("SELECT %d AS q, pk FROM (SELECT pk FROM title_terms WHERE kb_pk = ? "
                         "AND term = ? ORDER BY title_len, pk LIMIT ?) AS t%d" % (i, i))
            params += [kb_pk, term, limit]
        found: list[list[int]] = [[] for _ in terms]
        for row in self.db.execute(" UNION ALL ".join(parts), params).fetchall():
            found[row["q"]].append(row["pk"])  # sqlite3.Row and psycopg's dicts alike
        return found
