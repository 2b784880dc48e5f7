"""The knowledge bases' rows: their counters, their token totals, the import's folder."""

from ._table import Table

KB_COLUMNS = ("pk, kb_id, head_sequence, published_count, title_tokens, body_tokens, "
              "import_root, vectors_written")


class KnowledgeBaseSQL(Table):
    """The ``knowledge_bases`` table."""

    def row(self, kb_id):
        """A knowledge base's row by ID, or None."""
        return self.db.row("SELECT %s FROM knowledge_bases WHERE kb_id = ?" % KB_COLUMNS, (kb_id,))

    def by_pk(self, pk):
        """A knowledge base's row by its pk."""
        return self.db.row("SELECT %s FROM knowledge_bases WHERE pk = ?" % KB_COLUMNS, (pk,))

    def list(self):
        """Every knowledge base with its counts, by ID."""
        return self.db.rows(
            "SELECT kb_id AS knowledge_base_id, name, published_count AS published, "
            "articles_created AS articles, head_sequence FROM knowledge_bases ORDER BY kb_id")

    def dump_row(self, kb_pk):
        """What a dump keeps of a knowledge base's row besides ``kb_row``'s: its name and how
        many articles it has had."""
        return self.db.row("SELECT name, articles_created FROM knowledge_bases WHERE pk = ?",
                        (kb_pk,))

    def insert(self, kb_id, name):
        """A new knowledge base; returns its pk."""
        self.db.execute("INSERT INTO knowledge_bases (kb_id, name) VALUES (?, ?)", (kb_id, name))
        pk = self.db.value("SELECT pk FROM knowledge_bases WHERE kb_id = ?", (kb_id,))
        self.db.create_kb_index(pk)
        return pk

    def next(self, kb_pk, counter, count=1):
        """Advance a knowledge base's counter (``head_sequence``, ``articles_created``) by
        ``count``; returns the first of the numbers taken."""
        # Two statements, not UPDATE ... RETURNING, which SQLite before 3.35 lacks.
        self.db.execute("UPDATE knowledge_bases SET {0} = {0} + ? WHERE pk = ?".format(counter),
                     (count, kb_pk))
        return self.db.value("SELECT {} FROM knowledge_bases WHERE pk = ?".format(counter),
                             (kb_pk,)) - count + 1

    def add_published(self, kb_pk, count, title_tokens, body_tokens):
        """Move a knowledge base's published count and token totals (BM25's averages)."""
        self.db.execute(
            "UPDATE knowledge_bases SET published_count = published_count + ?, "
            "title_tokens = title_tokens + ?, body_tokens = body_tokens + ? WHERE pk = ?",
            (count, title_tokens, body_tokens, kb_pk))

    def set_import_root(self, kb_pk, root):
        """Remember the folder a knowledge base was last imported from."""
        self.db.execute("UPDATE knowledge_bases SET import_root = ? WHERE pk = ?", (root, kb_pk))
