"""The PostgreSQL engine's full-text index: each ``search_docs`` row's two tsvectors (titles
and bodies; titles), in GIN, of lexemes made from the store's own tokens, each prefixed with its
knowledge base's key."""

from typing import Any

from ..search.query import query_tree, render_query
from .contract import Engine
from .sql.search import SEARCH_DOC_COLUMNS


def _lexeme(kb_pk, term, suffix=""):
    """A quoted tsvector/tsquery lexeme: the knowledge base's key, the term, a suffix."""
    return "'%d:%s'%s" % (int(kb_pk), term.replace("'", "''").replace("\\", "\\\\"), suffix)


def tsvector_text(kb_pk, doc, title_only=False):
    """An article's tsvector as text: the distinct terms of its title and body, or of its
    title alone."""
    terms = set(doc.title_tokens) if title_only else set(doc.title_tokens) | set(doc.body_counts)
    return " ".join(_lexeme(kb_pk, term) for term in sorted(terms))


def tsquery_text(kb_pk, terms, spare):
    """A tsquery of quoted lexemes: every term of ``terms`` but at most ``spare``; text that
    PostgreSQL's parser reads as lexemes, never as syntax."""
    return render_query(query_tree(terms, spare), lambda term: _lexeme(kb_pk, term), " & ",
                        " | ")


class TsvectorIndex(Engine):
    """The full-text index of a PostgreSQL store: each search_docs row's two tsvectors, in GIN."""

    _conn: Any  # psycopg.Connection, where the [postgres] extra is installed

    def index_add(self, kb_pk, items):
        """Nothing apart: ``search_docs_put`` wrote the tsvectors with the rows
        (``search_doc_extra``)."""

    def index_remove(self, kb_pk, pk, doc):
        """Nothing apart: the tsvector goes with the search_docs row."""

    def index_replace(self, kb_pk, pk, old, new):
        """Nothing apart: ``search_doc_replace`` rewrote the tsvector with the row."""

    def _search_doc_extra(self, kb_pk, doc):
        """The article's tsvectors, written with its search_docs row."""
        return tsvector_text(kb_pk, doc), tsvector_text(kb_pk, doc, title_only=True)

    def index_clear(self, kb_pk):
        """Nothing apart: the tsvectors go with the knowledge base's search_docs rows."""

    def match(self, kb_pk, queries, limit):
        """Pks in order for tsqueries of quoted lexemes, all in one statement.

        Each query's matches come from the GIN index (a materialised CTE, so the planner cannot
        walk the primary key instead and test every row's tsvector), then the first ``limit``
        by pk: the same rows, in the same order, that SQLite's index gives.
        """
        found: list[list[int]] = [[] for _ in queries]
        for row in self._match_rows(kb_pk, queries, limit, ""):
            found[row["q"]].append(row["pk"])
        return found

    def match_docs(self, kb_pk, queries, limit):
        """``match``, with the stored tokens of every article found, in the same statement."""
        found: list[list[int]] = [[] for _ in queries]
        docs: dict[int, Any] = {}
        for row in self._match_rows(kb_pk, queries, limit, (
                "SELECT h.q, %s FROM hits AS h JOIN search_docs AS d ON d.pk = h.pk"
                % ", ".join("d." + column for column in SEARCH_DOC_COLUMNS))):
            found[row["q"]].append(row["pk"])
            docs[row["pk"]] = row
        return found, docs

    def _match_rows(self, kb_pk, queries, limit, outer):
        ctes, parts, params = [], [], []
        for i, (terms, title_only, spare) in enumerate(queries):
            ctes.append("m%d AS MATERIALIZED (SELECT pk FROM search_docs WHERE %s @@ "
                        "%%s::tsquery)" % (i, "title_tsv" if title_only else "tsv"))
            params.append(tsquery_text(kb_pk, terms, spare))
        for i in range(len(queries)):
            parts.append("SELECT %d AS q, pk FROM (SELECT pk FROM m%d ORDER BY pk LIMIT %%s) AS l%d"
                         % (i, i, i))
            params.append(limit)
        union = " UNION ALL ".join(parts)
        sql = ("WITH %s, hits AS (%s) %s" % (", ".join(ctes), union, outer) if outer
               else "WITH %s %s" % (", ".join(ctes), union))
        # A small table looks cheaper to scan whole, but every row's tsvector is out of line
        # (TOAST): the index is always the cheaper way.
        self._conn.execute("SET LOCAL enable_seqscan = off")
        return self._conn.execute(sql, params).fetchall()

    def indexed_pks(self, kb_pk):
        """Every article whose tsvector holds a lexeme (the GIN index lists it by each)."""
        return [row["pk"] for row in self.rows(
            "SELECT pk FROM search_docs WHERE kb_pk = ? AND length(tsv) > 0 ORDER BY pk",
            (kb_pk,))]

    def title_indexed_pks(self, kb_pk):
        """Every article whose title tsvector holds a lexeme."""
        return [row["pk"] for row in self.rows(
            "SELECT pk FROM search_docs WHERE kb_pk = ? AND length(title_tsv) > 0 ORDER BY pk",
            (kb_pk,))]

    def optimize(self, kb_pk):
        """Refresh the planner's statistics after a bulk load, of the tables searches and
        citation checks read (VACUUM cannot run inside a transaction)."""
        self.execute("ANALYZE search_docs, articles, texts, versions")
