"""What a team issuer's people and groups may do here, the same on every engine: the table a
person's token is read with besides its scopes (for an identity provider that cannot mint
``kb:{kb}:{right}`` scopes), and its statements."""

from ._table import Table

# One row a (subject or group, knowledge base): its write mode (``deny``: read only). The same
# SQL on both engines; INTEGER holds a knowledge base's pk on each (BIGSERIAL is a BIGINT, and
# PostgreSQL widens INTEGER to compare).
GRANTS_SQL = """
CREATE TABLE identity_grants (
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    kb_pk BIGINT NOT NULL REFERENCES knowledge_bases(pk),
    writes TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (kind, name, kb_pk)
)
"""


class GrantSQL(Table):
    """The ``identity_grants`` table."""

    def put(self, kind, name, kb_pk, writes, created_at):
        """Record (or change the write mode of) a grant."""
        self.db.execute("INSERT INTO identity_grants (kind, name, kb_pk, writes, created_at) "
                     "VALUES (?, ?, ?, ?, ?) ON CONFLICT (kind, name, kb_pk) DO UPDATE SET "
                     "writes = excluded.writes", (kind, name, kb_pk, writes, created_at))

    def delete(self, kind, name, kb_pk):
        """Remove a grant; returns whether there was one."""
        return self.db.execute("DELETE FROM identity_grants WHERE kind = ? AND name = ? AND "
                            "kb_pk = ?", (kind, name, kb_pk)).rowcount == 1

    def list(self):
        """Every grant, with its knowledge base's ID."""
        return self.db.rows("SELECT g.kind, g.name, k.kb_id AS knowledge_base_id, g.writes, "
                         "g.created_at FROM identity_grants AS g JOIN knowledge_bases AS k ON "
                         "k.pk = g.kb_pk ORDER BY g.kind, g.name, k.kb_id")

    def of(self, subject, groups):
        """The grants of a subject and of any of ``groups``: ``(kb_id, kind, writes)`` rows."""
        groups = list(groups)
        marks = ", ".join("?" for _ in groups)
        where = "(g.kind = 'subject' AND g.name = ?)"
        if groups:
            where += " OR (g.kind = 'group' AND g.name IN (%s))" % marks
        return self.db.rows("SELECT k.kb_id AS knowledge_base_id, g.kind, g.writes FROM "
                         "identity_grants AS g JOIN knowledge_bases AS k ON k.pk = g.kb_pk "
                         "WHERE " + where, [subject] + groups)
