"""The HTTP server's bearer tokens: the table (the same on every engine) and its statements."""

from ._table import Table

# Bearer tokens for the HTTP server, the same on every engine: only a SHA-256 of each is kept,
# with what it grants.
TOKENS_SQL = """
CREATE TABLE tokens (
    name TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    grants TEXT NOT NULL,
    writes TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    review INTEGER NOT NULL DEFAULT 0
)
"""

# The table as schemas 2 to 5 made it (schema 6 added the right to review proposals).
TOKENS_SQL_5 = TOKENS_SQL.replace("    revoked_at TEXT,\n    review INTEGER NOT NULL DEFAULT 0\n",
                                  "    revoked_at TEXT\n")
TOKENS_REVIEW_SQL = "ALTER TABLE tokens ADD COLUMN review INTEGER NOT NULL DEFAULT 0"


class TokenSQL(Table):
    """The ``tokens`` table."""

    def insert(self, name, token_hash, grants, writes, created_at, review=False):
        """Record a new token (its hash only)."""
        self.db.execute("INSERT INTO tokens (name, token_hash, grants, writes, created_at, review) "
                     "VALUES (?, ?, ?, ?, ?, ?)", (name, token_hash, grants, writes, created_at,
                                                   int(review)))

    def by_name(self, name):
        """A token's row by its name, or None."""
        return self.db.row("SELECT name, grants, writes, created_at, revoked_at, review FROM "
                        "tokens WHERE name = ?", (name,))

    def by_hash(self, token_hash):
        """The live (not revoked) token with this hash, or None."""
        return self.db.row("SELECT name, grants, writes, review FROM tokens WHERE token_hash = ? "
                        "AND revoked_at IS NULL", (token_hash,))

    def any_by_hash(self, token_hash):
        """The token with this hash, revoked or not (to say why it was refused), or None."""
        return self.db.row("SELECT name, revoked_at FROM tokens WHERE token_hash = ?",
                           (token_hash,))

    def list(self):
        """Every token, by name (no hashes)."""
        return self.db.rows("SELECT name, grants, writes, created_at, revoked_at, review FROM "
                         "tokens ORDER BY name")

    def revoke(self, name, revoked_at):
        """Mark a token revoked; returns whether it was live."""
        return self.db.execute("UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at "
                            "IS NULL", (revoked_at, name)).rowcount == 1
