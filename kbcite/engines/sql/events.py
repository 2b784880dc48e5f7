"""The event log and the idempotency keys of edits, written in the edit's transaction."""

from ._table import Table


class EventSQL(Table):
    """The ``events`` and ``idempotency`` tables."""

    def insert(self, kb_pk, events):
        """Append event dicts (sequence, type, article_id, updated_at, and for an event no
        version records its actor and actor_issuer) to the log."""
        self.db.execute_many("INSERT INTO events (kb_pk, sequence, type, article_id, updated_at, "
                          "actor, actor_issuer) VALUES (?, ?, ?, ?, ?, ?, ?)",
                          [(kb_pk, e["sequence"], e["type"], e["article_id"], e["updated_at"],
                            e.get("actor"), e.get("actor_issuer")) for e in events])

    def after(self, kb_pk, after, limit):
        """Up to ``limit`` events after sequence ``after``, in order (as agents see them)."""
        return self.db.rows(
            "SELECT sequence, type, article_id, updated_at FROM events "
            "WHERE kb_pk = ? AND sequence > ? ORDER BY sequence LIMIT ?", (kb_pk, after, limit))

    def actors(self, kb_pk, sequences):
        """``{sequence: {actor, actor_issuer}}`` of those of these events that record their
        own actor (an article.deleted)."""
        if not sequences:
            return {}
        where, params = self.db.in_list("sequence", sorted(set(sequences)))
        return {row["sequence"]: row for row in self.db.rows(
            "SELECT sequence, actor, actor_issuer FROM events WHERE kb_pk = ? AND actor IS NOT "
            "NULL AND " + where, [kb_pk] + params)}

    def key_get(self, kb_pk, key, since_us):
        """The stored ``{fingerprint, result}`` of a key used since ``since_us``, or None."""
        return self.db.row("SELECT fingerprint, result FROM idempotency WHERE kb_pk = ? AND "
                           "key = ? AND created_us >= ?", (kb_pk, key, since_us))

    def key_put(self, kb_pk, key, fingerprint, result, now_us, expire_before_us):
        """Record a successful edit under its key, and forget keys older than their TTL."""
        # Only this knowledge base's keys: its row lock covers them, so writers of different
        # knowledge bases never wait on each other's expired keys.
        self.db.execute("DELETE FROM idempotency WHERE kb_pk = ? AND created_us < ?",
                     (kb_pk, expire_before_us))
        self.db.execute(
            "INSERT INTO idempotency (kb_pk, key, fingerprint, result, created_us) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (kb_pk, key) DO UPDATE SET "
            "fingerprint = excluded.fingerprint, result = excluded.result, "
            "created_us = excluded.created_us",
            (kb_pk, key, fingerprint, result, now_us))
