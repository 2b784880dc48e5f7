"""The HTTP server's handshake sessions and the messages left for them: the tables (the same
on every engine) and their statements."""

from ._table import Table

# The HTTP server's handshake sessions (MCP 2025-11-25 and earlier), the same on every engine,
# kept here so that every server process on the store serves each (kbcite.sessions); and what
# a client sends to a request another process holds (its answer to a question, a
# cancellation), left for that process to collect. ``token_name`` is whose the session is: a
# token's name, or (a web page signed in at the team's issuer, schema 9) the person's subject,
# who has no token row; revoking a token ends the sessions of its name.
SESSIONS_SQL = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    token_name TEXT NOT NULL,
    protocol_version TEXT NOT NULL,
    capabilities TEXT NOT NULL,
    initialized INTEGER NOT NULL DEFAULT 0,
    created_us BIGINT NOT NULL,
    seen_us BIGINT NOT NULL
);
CREATE INDEX sessions_token ON sessions (token_name, seen_us);
CREATE INDEX sessions_seen ON sessions (seen_us);
CREATE TABLE session_messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    body TEXT NOT NULL,
    created_us BIGINT NOT NULL
);
CREATE INDEX session_messages_session ON session_messages (session_id, created_us)
"""

# Schema 4's sessions table named a token row as its owner (schema 9 dropped that reference).
SESSIONS_SQL_4 = SESSIONS_SQL.replace("token_name TEXT NOT NULL,",
                                      "token_name TEXT NOT NULL REFERENCES tokens(name),")

SESSION_COLUMNS = ("id, token_name, protocol_version, capabilities, initialized, created_us, "
                   "seen_us")


# The kinds of the web pages' rows begin so (``kbcite.tokens``); an MCP handshake's kind is the
# protocol version it negotiated, a date.
WEB_KIND_PREFIX = "web"


def _of_kind(kind):
    """``(SQL, params)`` choosing the sessions of ``kind``, or (None) the MCP handshakes."""
    if kind is None:
        return "protocol_version NOT LIKE ?", [WEB_KIND_PREFIX + "%"]
    return "protocol_version = ?", [kind]


class SessionSQL(Table):
    """The ``sessions`` and ``session_messages`` tables."""

    def insert(self, session_id, token_name, protocol_version, capabilities, now_us):
        """Record a new session."""
        self.db.execute("INSERT INTO sessions (%s) VALUES (?, ?, ?, ?, 0, ?, ?)" % SESSION_COLUMNS,
                     (session_id, token_name, protocol_version, capabilities, now_us, now_us))

    def row(self, session_id):
        """A session's row by its ID, or None."""
        return self.db.row("SELECT %s FROM sessions WHERE id = ?" % SESSION_COLUMNS, (session_id,))

    def seen(self, session_id, now_us):
        """Note a session's use (never moving it back)."""
        self.db.execute("UPDATE sessions SET seen_us = ? WHERE id = ? AND seen_us < ?",
                     (now_us, session_id, now_us))

    def set_initialized(self, session_id):
        """Mark a session's client initialized; returns whether the session exists."""
        return self.db.execute("UPDATE sessions SET initialized = 1 WHERE id = ?",
                            (session_id,)).rowcount == 1

    def delete(self, session_id, token_name):
        """End a session of this token (its messages go with it); returns whether it was."""
        return self.db.execute("DELETE FROM sessions WHERE id = ? AND token_name = ?",
                            (session_id, token_name)).rowcount == 1

    def of_token(self, token_name, kind=None):
        """A token's session IDs of one kind (None: its MCP handshakes, of any protocol
        version), least recently used first."""
        where, params = _of_kind(kind)
        return [r["id"] for r in self.db.rows("SELECT id FROM sessions WHERE token_name = ? AND "
                                           + where + " ORDER BY seen_us, id",
                                           [token_name] + params)]

    def delete_many(self, session_ids):
        """End these sessions."""
        self.db.execute_many("DELETE FROM sessions WHERE id = ?", [(i,) for i in session_ids])

    def delete_of_token(self, token_name):
        """End every session of a token."""
        self.db.execute("DELETE FROM sessions WHERE token_name = ?", (token_name,))

    def expire(self, before_us, kind=None):
        """End every session of one kind (None: the MCP handshakes) last used before
        ``before_us``; returns how many."""
        where, params = _of_kind(kind)
        return self.db.execute("DELETE FROM sessions WHERE seen_us < ? AND " + where,
                            [before_us] + params).rowcount

    def live(self, session_ids):
        """Which of these sessions still exist."""
        marks = ",".join("?" * len(session_ids))
        return {r["id"] for r in self.db.rows("SELECT id FROM sessions WHERE id IN (%s)" % marks,
                                           list(session_ids))}

    def message_insert(self, message_id, session_id, kind, target, body, now_us):
        """Leave a message for the process holding a session's request."""
        self.db.execute("INSERT INTO session_messages (id, session_id, kind, target, body, "
                     "created_us) VALUES (?, ?, ?, ?, ?, ?)",
                     (message_id, session_id, kind, target, body, now_us))

    def messages(self, session_ids):
        """The messages left for these sessions, oldest first."""
        marks = ",".join("?" * len(session_ids))
        return self.db.rows("SELECT id, session_id, kind, target, body, created_us FROM "
                         "session_messages WHERE session_id IN (%s) AND kind <> 'subscription' "
                         "ORDER BY created_us, id" % marks, list(session_ids))

    def messages_delete(self, message_ids):
        """Forget messages (collected)."""
        self.db.execute_many("DELETE FROM session_messages WHERE id = ?",
                          [(i,) for i in message_ids])

    def messages_expire(self, before_us):
        """Forget every message left before ``before_us`` that nobody collected."""
        self.db.execute("DELETE FROM session_messages WHERE created_us < ? AND kind <> "
                     "'subscription'", (before_us,))

    def subscriptions(self, session_id):
        """The URIs a session subscribed to (kept as its messages of kind ``subscription``,
        which last as long as the session), oldest first."""
        return [r["target"] for r in self.db.rows(
            "SELECT target FROM session_messages WHERE session_id = ? AND kind = "
            "'subscription' ORDER BY created_us, id", (session_id,))]

    def subscription_count(self, token_name):
        """How many URIs the sessions of a token subscribe to, all told."""
        return self.db.value(
            "SELECT count(*) FROM session_messages AS m JOIN sessions AS s ON s.id = "
            "m.session_id WHERE s.token_name = ? AND m.kind = 'subscription'", (token_name,))

    def subscription_delete(self, session_id, uri):
        """Forget one URI a session subscribed to; returns whether it had."""
        return self.db.execute("DELETE FROM session_messages WHERE session_id = ? AND kind = "
                            "'subscription' AND target = ?", (session_id, uri)).rowcount > 0
