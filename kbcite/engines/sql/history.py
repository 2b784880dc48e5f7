"""Every version an article has had: appended with each change, read back, pruned."""

from ._table import Table

# A version's row, without its text.
VERSION_COLUMNS = ("article_pk", "version_us", "updated_at", "action", "sequence", "event",
                   "published", "title", "text_pk", "bytes", "actor", "summary", "approver",
                   "actor_issuer")


class HistorySQL(Table):
    """The ``versions`` table."""

    def insert(self, kb_pk, rows):
        """Append version rows (dicts keyed by ``VERSION_COLUMNS``) to the history."""
        self.db.execute_many(
            "INSERT INTO versions (kb_pk, %s) VALUES (?, %s)"
            % (", ".join(VERSION_COLUMNS), ", ".join("?" * len(VERSION_COLUMNS))),
            [(kb_pk,) + tuple(row[c] for c in VERSION_COLUMNS) for row in rows])

    def version(self, article_pk, version_us):
        """One version's row (without its text), or None."""
        return self.db.row("SELECT %s FROM versions WHERE article_pk = ? AND version_us = ?"
                        % ", ".join(VERSION_COLUMNS), (article_pk, version_us))

    def at(self, pairs):
        """``{(article_pk, version_us): row}`` of the versions named by ``pairs``."""
        pairs, found = sorted(set(pairs)), {}
        # A hundred keys a statement keeps the OR chain well inside SQLite's expression depth.
        for start in range(0, len(pairs), 100):
            chunk = pairs[start:start + 100]
            where = " OR ".join(["(article_pk = ? AND version_us = ?)"] * len(chunk))
            for row in self.db.rows("SELECT %s FROM versions WHERE %s"
                                 % (", ".join(VERSION_COLUMNS), where),
                                 [value for pair in chunk for value in pair]):
                found[(row["article_pk"], row["version_us"])] = row
        return found

    def of(self, article_pk):
        """Every version of an article, oldest first, without texts."""
        return self.db.rows("SELECT %s FROM versions WHERE article_pk = ? ORDER BY version_us"
                         % ", ".join(VERSION_COLUMNS), (article_pk,))

    def prunable(self, kb_pk, before_us):
        """How many versions ``versions_prune`` would prune."""
        return self.db.value(
            "SELECT count(*) FROM versions WHERE kb_pk = ? AND version_us < ? AND "
            "text_pk IS NOT NULL AND NOT EXISTS (SELECT 1 FROM articles AS a WHERE "
            "a.pk = versions.article_pk AND (a.version_us = versions.version_us OR "
            "a.import_version = versions.updated_at))",
            (kb_pk, before_us))

    def prune(self, kb_pk, before_us):
        """Drop the texts of a knowledge base's versions older than ``before_us``, never an
        article's current one nor the one its import record names (the base an export and
        an import compare a file with); the rows stay, marked pruned. Returns how many."""
        pruned = self.db.execute(
            "UPDATE versions SET text_pk = NULL WHERE kb_pk = ? AND version_us < ? AND "
            "text_pk IS NOT NULL AND NOT EXISTS (SELECT 1 FROM articles AS a WHERE "
            "a.pk = versions.article_pk AND (a.version_us = versions.version_us OR "
            "a.import_version = versions.updated_at))",
            (kb_pk, before_us)).rowcount
        # A text goes once nothing holds it: neither a version kept nor an article's current.
        held = {row["text_pk"] for row in self.db.rows(
            "SELECT text_pk FROM versions WHERE kb_pk = ? AND text_pk IS NOT NULL UNION "
            "SELECT text_pk FROM articles WHERE kb_pk = ?", (kb_pk, kb_pk))}
        loose = [row["pk"] for row in self.db.rows("SELECT pk FROM texts WHERE kb_pk = ?",
                                                (kb_pk,)) if row["pk"] not in held]
        self.db.execute_many("DELETE FROM texts WHERE pk = ?", [(pk,) for pk in loose])
        return pruned
