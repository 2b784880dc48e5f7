"""The HTTP server's handshake sessions, kept in the store so that every server process on it
serves each of them, and the messages a client sends to a request another process holds.

A session is what an ``initialize`` negotiated (MCP 2025-11-25 and earlier): a random ID, the
token that opened it (no other token may use it), the protocol version and the client's
capabilities, whether the client has said ``notifications/initialized``, and when it was last
used. It ends when its client deletes it, when it has been idle longer than the server allows,
when its token opens more sessions than its cap (the least recently used one goes), and when
its token is revoked (``kbcite.tokens.Tokens.revoke``). The store hands them out as
``store.sessions``, a ``Sessions``.

A message is what a client sends to a request in flight in another process: its answer to the
server's question (a JSON-RPC response, ``kind`` ``response``, ``target`` our request ID) or
``notifications/cancelled`` (``cancelled``, ``target`` the request ID as JSON). The process
holding the request collects and forgets it; one nobody collects lapses with its session, or
after ``MESSAGE_TTL_US``.

A session's subscriptions (``resources/subscribe``) are kept the same way, as messages of kind
``subscription`` (``target`` the URI), never collected: they last until the client
unsubscribes or the session ends, whichever process took them and whichever holds the
session's notification stream.
"""

import json
import secrets

from .engines.sql.sessions import WEB_KIND_PREFIX

# A message nobody collected is forgotten after this long: the longest a question waits.
MESSAGE_TTL_US = 600 * 1000000

# What a client can send to a request held by another process.
MESSAGE_KINDS = ("response", "cancelled")


def _fields(row):
    """A session row as the server reads it: capabilities decoded, initialized a bool."""
    return dict(row, capabilities=json.loads(row["capabilities"]),
                initialized=bool(row["initialized"]))


def end_for_token(db, token_name):
    """Inside the caller's write: end every session of a token (it is being revoked)."""
    db.sessions.delete_of_token(token_name)


class Sessions:
    """The store's handshake sessions (``store.sessions``): each call is one transaction."""

    def __init__(self, ctx):
        self._ctx = ctx

    def open(self, session_id, token_name, protocol_version, capabilities, *, idle_s,
             per_token):
        """Record the session an ``initialize`` made (or a web page's sign-in, of a ``web``
        kind as ``protocol_version``), ending every session of its kind idle longer than
        ``idle_s`` seconds and the token's least recently used of its kind beyond
        ``per_token``; returns ``(the IDs of the token's sessions it ended, how many idle ones
        it ended)``. Each kind has its own idle time and cap: an agent's handshakes never
        end a person's page, nor the other way round."""
        idle_us = int(idle_s * 1000000)
        db = self._ctx.db
        now_us = self._ctx.now_us()
        kind = protocol_version if protocol_version.startswith(WEB_KIND_PREFIX) else None
        with db.write():
            expired = db.sessions.expire(now_us - idle_us, kind)
            db.sessions.messages_expire(now_us - MESSAGE_TTL_US)
            mine = db.sessions.of_token(token_name, kind)
            evicted = mine[:max(0, len(mine) - per_token + 1)]
            db.sessions.delete_many(evicted)
            db.sessions.insert(session_id, token_name, protocol_version,
                              json.dumps(capabilities, ensure_ascii=False, sort_keys=True), now_us)
        return evicted, expired

    def find(self, session_id, token_name, *, idle_s):
        """The live session with this ID opened by this token, as a dict, or None: another
        token's session and one idle longer than ``idle_s`` seconds look exactly like none."""
        db = self._ctx.db
        with db.read():
            row = db.sessions.row(session_id)
        if (row is None or row["token_name"] != token_name
                or row["seen_us"] < self._ctx.now_us() - int(idle_s * 1000000)):
            return None
        return _fields(row)

    def touch(self, session_id):
        """Note that the session was used now (its idle time starts again)."""
        db = self._ctx.db
        with db.write():
            db.sessions.seen(session_id, self._ctx.now_us())

    def initialized(self, session_id):
        """The client said notifications/initialized; returns whether the session exists."""
        db = self._ctx.db
        with db.write():
            return db.sessions.set_initialized(session_id)

    def end(self, session_id, token_name):
        """End a session of this token (DELETE); returns whether there was one."""
        db = self._ctx.db
        with db.write():
            return db.sessions.delete(session_id, token_name)

    def leave(self, session_id, kind, target, body):
        """Leave a message for the request ``target`` of a session; returns False when the
        session has ended (the message has nobody to go to)."""
        if kind not in MESSAGE_KINDS:
            raise ValueError("a session message is one of %s, not %r" % (MESSAGE_KINDS, kind))
        db = self._ctx.db
        with db.write():
            if db.sessions.row(session_id) is None:
                return False
            db.sessions.message_insert(secrets.token_hex(12), session_id, kind, target,
                                      json.dumps(body, ensure_ascii=False), self._ctx.now_us())
        return True

    def subscribe(self, session_id, token_name, uri, *, per_token):
        """Record that a session subscribes to ``uri``; returns False (nothing recorded) when
        the token's sessions already hold ``per_token`` subscriptions, None when the session ended,
        True otherwise (a URI subscribed to twice is kept once)."""
        db = self._ctx.db
        with db.write():
            if db.sessions.row(session_id) is None:
                return None
            if uri in db.sessions.subscriptions(session_id):
                return True
            if db.sessions.subscription_count(token_name) >= per_token:
                return False
            db.sessions.message_insert(secrets.token_hex(12), session_id, "subscription", uri,
                                      "{}", self._ctx.now_us())
        return True

    def unsubscribe(self, session_id, uri):
        """Forget a session's subscription to ``uri`` (one it never had is fine)."""
        db = self._ctx.db
        with db.write():
            db.sessions.subscription_delete(session_id, uri)

    def subscriptions(self, session_id):
        """The URIs a session subscribes to, or None once the session has ended."""
        db = self._ctx.db
        with db.read():
            if db.sessions.row(session_id) is None:
                return None
            return db.sessions.subscriptions(session_id)

    def collect(self, session_ids):
        """``(messages, live)``: the messages left for these sessions (each with its body
        decoded), and which of the sessions still exist."""
        db = self._ctx.db
        session_ids = sorted(set(session_ids))
        if not session_ids:
            return [], set()
        with db.read():
            rows = db.sessions.messages(session_ids)
            live = db.sessions.live(session_ids)
        return [dict(row, body=json.loads(row["body"])) for row in rows], live

    def forget(self, message_ids):
        """Forget collected messages."""
        if not message_ids:
            return
        db = self._ctx.db
        with db.write():
            db.sessions.messages_delete(message_ids)
