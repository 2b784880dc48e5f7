"""Proposals: edits waiting for a person (writes mode ``review``): the table, its statements.

A proposal keeps what the agent asked for (its knowledge base, article, the version it read,
title and content, who, why, its idempotency key) and, once decided, who decided, when, why,
and the version an approval produced. ``created_sequence`` and ``decided_sequence`` are its
events in the knowledge base's log, so a poll can say which proposal an event is about.
"""

from ._table import Table

# ``{pk}`` and ``{big}`` are each engine's spelling of an increasing key and a 64-bit integer.
PROPOSALS_SQL = """
CREATE TABLE proposals (
    pk {pk},
    kb_pk {big} NOT NULL REFERENCES knowledge_bases(pk),
    article_id TEXT NOT NULL,
    base_version TEXT NOT NULL,
    base_bytes INTEGER NOT NULL,
    title TEXT,
    content TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    actor TEXT,
    summary TEXT,
    idempotency_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_us {big} NOT NULL,
    created_sequence {big} NOT NULL,
    state TEXT NOT NULL,
    decided_at TEXT,
    decided_by TEXT,
    reason TEXT,
    version TEXT,
    decided_sequence {big},
    -- The team issuer that vouched for the actor (schema 9), NULL for a kb token's agent.
    actor_issuer TEXT,
    UNIQUE (kb_pk, idempotency_key)
);
CREATE INDEX proposals_state ON proposals (kb_pk, state, created_us)
"""

# The proposals table as schema 6 made it (schema 9 added the actor's issuer).
PROPOSALS_SQL_6 = "\n".join(line for line in PROPOSALS_SQL.split("\n") if "issuer" not in line)

# What a listing reads of a proposal: everything but its text.
LISTED = ("p.pk, p.article_id, p.base_version, p.base_bytes, p.title, p.bytes, p.actor, "
          "p.summary, p.idempotency_key, p.created_at, p.created_us, p.created_sequence, "
          "p.state, p.decided_at, p.decided_by, p.reason, p.version, p.decided_sequence, "
          "p.actor_issuer")
# What the people's list shows of each (a queue may be long: no more than it needs).
QUEUED = ("p.pk, p.article_id, p.base_version, p.base_bytes, p.title, p.bytes, p.actor, "
          "p.summary, p.created_at, p.state, p.decided_at, p.decided_by, p.reason, p.version, "
          "p.actor_issuer")
# And the article it is about as it is now, beside it (None where it was deleted).
WITH_ARTICLE = ("proposals AS p LEFT JOIN articles AS a ON a.kb_pk = p.kb_pk AND "
                "a.article_id = p.article_id")


class ProposalSQL(Table):
    """The ``proposals`` table's statements, in the caller's transaction."""

    def insert(self, kb_pk, row):
        """Store a new proposal (a dict of its columns); returns its pk."""
        columns = ("article_id", "base_version", "base_bytes", "title", "content", "bytes",
                   "actor", "summary", "idempotency_key", "fingerprint", "created_at",
                   "created_us", "created_sequence", "state", "actor_issuer")
        self.db.execute("INSERT INTO proposals (kb_pk, %s) VALUES (?, %s)"
                     % (", ".join(columns), ", ".join("?" * len(columns))),
                     [kb_pk] + [row[c] for c in columns])
        return self.db.value("SELECT pk FROM proposals WHERE kb_pk = ? AND idempotency_key = ?",
                          (kb_pk, row["idempotency_key"]))

    def by_key(self, kb_pk, key):
        """The proposal made with this idempotency key, or None."""
        return self.db.row("SELECT %s, p.fingerprint FROM proposals AS p WHERE p.kb_pk = ? AND "
                        "p.idempotency_key = ?" % LISTED, (kb_pk, key))

    def get(self, pk):
        """A proposal's whole row (its text too) with its knowledge base's pk, or None."""
        return self.db.row("SELECT %s, p.kb_pk, p.content FROM proposals AS p WHERE p.pk = ?"
                        % LISTED, (pk,))

    def list(self, kb_pk, states):
        """A knowledge base's proposals in these states, oldest first, each with its article's
        current version and visibility (None where it is gone); no texts."""
        marks = ",".join("?" * len(states))
        return self.db.rows(
            "SELECT %s, a.updated_at AS current_version, a.published AS current_published "
            "FROM %s WHERE p.kb_pk = ? AND p.state IN (%s) ORDER BY p.pk"
            % (QUEUED, WITH_ARTICLE, marks), [kb_pk] + list(states))

    def overdue(self, kb_pk, before_us):
        """The pks and articles of pending proposals made before ``before_us``, oldest first."""
        return self.db.rows("SELECT pk, article_id, base_version FROM proposals WHERE kb_pk = ? "
                         "AND state = 'pending' AND created_us < ? ORDER BY pk",
                         (kb_pk, before_us))

    def decide(self, pk, state, decided_at, decided_by, reason, version, sequence):
        """Decide a pending proposal (the compare-and-swap: only while it is pending);
        returns the rows changed (0 or 1)."""
        return self.db.execute(
            "UPDATE proposals SET state = ?, decided_at = ?, decided_by = ?, reason = ?, "
            "version = ?, decided_sequence = ? WHERE pk = ? AND state = 'pending'",
            (state, decided_at, decided_by, reason, version, sequence, pk)).rowcount

    def by_sequences(self, kb_pk, sequences):
        """``{sequence: proposal row}`` for the events among ``sequences`` a proposal made."""
        where, params = self.db.in_list("created_sequence", sequences)
        decided, more = self.db.in_list("decided_sequence", sequences)
        found = {}
        for row in self.db.rows("SELECT %s FROM proposals AS p WHERE p.kb_pk = ? AND (%s OR %s)"
                             % (LISTED, where.replace("created_sequence", "p.created_sequence"),
                                decided.replace("decided_sequence", "p.decided_sequence")),
                             [kb_pk] + params + more):
            found[row["created_sequence"]] = row
            if row["decided_sequence"] is not None:
                found[row["decided_sequence"]] = row
        return found

    def audit_rows(self, kb_pk):
        """Every proposal of a knowledge base, without texts, oldest first."""
        return self.db.rows("SELECT %s FROM proposals AS p WHERE p.kb_pk = ? ORDER BY p.pk"
                         % LISTED, (kb_pk,))
