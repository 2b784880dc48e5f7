"""What the audit reads of every table, to check each invariant against the data."""

from ..errors import kb_damaged_error
from ._table import Table
from .history import VERSION_COLUMNS
from .knowledge_bases import KB_COLUMNS
from .search import SEARCH_DOC_COLUMNS


class AuditSQL(Table):
    """The audit's reads."""

    def kbs(self):
        """Every knowledge base's row."""
        return self.db.rows("SELECT %s FROM knowledge_bases ORDER BY pk" % KB_COLUMNS)

    def sequences(self, kb_pk):
        """Every event sequence of a knowledge base, in order."""
        return [r["sequence"] for r in self.db.rows(
            "SELECT sequence FROM events WHERE kb_pk = ? ORDER BY sequence", (kb_pk,))]

    def last_events(self, kb_pk):
        """Each article's last event."""
        last = {}
        # A proposal's events say nothing of the article's state: they are left out.
        for r in self.db.rows("SELECT article_id, type, updated_at FROM events WHERE kb_pk = ? "
                           "AND type NOT LIKE 'proposal.%' ORDER BY sequence", (kb_pk,)):
            last[r["article_id"]] = r
        return last

    def articles(self, kb_pk):
        """Every article's pk, ID, visibility and version."""
        return self.db.rows("SELECT pk, article_id, published, updated_at FROM articles "
                         "WHERE kb_pk = ? ORDER BY pk", (kb_pk,))

    def history(self, kb_pk):
        """What the history holds: every version (without texts) in order, the articles'
        current rows, and the pks of the knowledge base's texts."""
        versions = self.db.rows("SELECT %s FROM versions WHERE kb_pk = ? ORDER BY article_pk, "
                             "version_us" % ", ".join(VERSION_COLUMNS), (kb_pk,))
        articles = self.db.rows("SELECT pk, article_id, title, published, version_us, text_pk "
                             "FROM articles WHERE kb_pk = ? ORDER BY pk", (kb_pk,))
        texts = {r["pk"] for r in self.db.rows("SELECT pk FROM texts WHERE kb_pk = ?", (kb_pk,))}
        events = {r["sequence"]: r for r in self.db.rows(
            "SELECT sequence, type, article_id, updated_at FROM events WHERE kb_pk = ?",
            (kb_pk,))}
        return versions, articles, texts, events

    def search(self, kb_pk):
        """What the search statistics hold: docs, title rows, term rows (``{term: (df_title,
        df_body)}``) and the term IDs (``{ID: term}``)."""
        docs = self.db.rows("SELECT %s FROM search_docs WHERE kb_pk = ? ORDER BY pk"
                         % ", ".join(SEARCH_DOC_COLUMNS), (kb_pk,))
        titles = self.db.rows("SELECT term, title_len, pk FROM title_terms WHERE kb_pk = ? "
                           "ORDER BY pk, term", (kb_pk,))
        terms, names = {}, {}
        for r in self.db.rows("SELECT term, df_title, df_body, term_id FROM search_terms "
                           "WHERE kb_pk = ?", (kb_pk,)):
            terms[r["term"]] = (r["df_title"], r["df_body"])
            names[r["term_id"]] = r["term"]
        return docs, titles, terms, names

    def damaged(self, kb, what):
        """The store_damaged error for a knowledge base whose ``what`` is inconsistent."""
        return kb_damaged_error(kb["kb_id"], what)
