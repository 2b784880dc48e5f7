"""The semantic half's vectors: one a published article, written in the transaction of the
version it embeds (``kbcite.search.semantic``), read a knowledge base at a time."""

from ._table import Table

# A published article's vector (schema 8), keyed by knowledge base first so that a search
# reads one knowledge base's vectors as one range; ``model`` names the model that made it,
# and a vector of another is never read. The column types are each engine's.
VECTORS_SQL = """
CREATE TABLE article_vectors (
    kb_pk {big} NOT NULL REFERENCES knowledge_bases(pk),
    pk {big} NOT NULL REFERENCES articles(pk),
    model TEXT NOT NULL,
    vector {blob} NOT NULL,
    PRIMARY KEY (kb_pk, pk)
){rowid}"""

# Every vector write moves this counter of its knowledge base: a process's cached matrix of
# the knowledge base's vectors is current while the counter it was read at is.
VECTORS_COUNTER_SQL = ("ALTER TABLE knowledge_bases ADD COLUMN vectors_written {big} NOT NULL "
                       "DEFAULT 0")


class VectorSQL(Table):
    """The ``article_vectors`` table."""

    def put(self, kb_pk, model, items):
        """Store ``(pk, vector bytes)`` items, replacing what the articles had."""
        if not items:
            return
        self.db.execute_many("INSERT INTO article_vectors (kb_pk, pk, model, vector) "
                          "VALUES (?, ?, ?, ?) ON CONFLICT (kb_pk, pk) DO UPDATE SET "
                          "model = excluded.model, vector = excluded.vector",
                          [(kb_pk, pk, model, vector) for pk, vector in items])
        self._moved(kb_pk)

    def delete(self, kb_pk, pks):
        """Forget the articles' vectors (unpublished, deleted, or written without a model)."""
        if not pks:
            return
        self.db.execute_many("DELETE FROM article_vectors WHERE kb_pk = ? AND pk = ?",
                          [(kb_pk, pk) for pk in pks])
        self._moved(kb_pk)

    def clear(self, kb_pk):
        """Forget every vector of a knowledge base (to embed it anew)."""
        self.db.execute("DELETE FROM article_vectors WHERE kb_pk = ?", (kb_pk,))
        self._moved(kb_pk)

    def of(self, kb_pk, model):
        """``(pks, vector bytes)`` of a knowledge base's vectors made by ``model``, by pk."""
        rows = self.db.execute("SELECT pk, vector FROM article_vectors WHERE kb_pk = ? AND "
                            "model = ? ORDER BY pk", (kb_pk, model)).fetchall()
        return [row[0] if not isinstance(row, dict) else row["pk"] for row in rows], \
            [row[1] if not isinstance(row, dict) else row["vector"] for row in rows]

    def _moved(self, kb_pk):
        self.db.execute("UPDATE knowledge_bases SET vectors_written = vectors_written + 1 "
                     "WHERE pk = ?", (kb_pk,))

    def pks(self, kb_pk):
        """The pks of the articles a knowledge base has vectors of, sorted (the audit)."""
        return [row["pk"] for row in self.db.rows(
            "SELECT pk FROM article_vectors WHERE kb_pk = ? ORDER BY pk", (kb_pk,))]
