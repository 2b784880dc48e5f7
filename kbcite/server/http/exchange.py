"""One POST: the body parsed, whether it may wait, and the client watched while it is served."""

import base64
import json
import logging
import threading

from ..jsonrpc import (HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
                       MISSING_CAPABILITY, PARSE_ERROR, UNSUPPORTED_VERSION)

# Bodies up to this size are read before the token is checked and decoded on the event loop
# (microseconds), so a request costs one thread hop; a larger one is let in only with a valid
# token, so an anonymous client cannot make the server hold many large bodies.
SMALL_BODY = 64 * 1024

# The HTTP status of each error on the 2026-07-28 path (transports/streamable-http.mdx).
ERROR_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400,
                HEADER_MISMATCH: 400, MISSING_CAPABILITY: 400, UNSUPPORTED_VERSION: 400,
                METHOD_NOT_FOUND: 404}


log = logging.getLogger(__name__)


def decode_name_header(value):
    """An ``Mcp-Name`` header's value, the ``=?base64?...?=`` sentinel form decoded."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
    return value


def _parse(body):
    """``(message, None)`` or ``(None, the parse error's text)``."""
    try:
        return json.loads(body.decode("utf-8")), None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # RecursionError: JSON nested deeper than the decoder goes is unparsable too.
        return None, "Parse error: %s" % exc


def _may_wait(message):
    """Whether a request may wait long (an edit: for a lock, or a person), so that a client
    going away must be noticed while it is served."""
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return False
    params = message.get("params")
    return isinstance(params, dict) and params.get("name") == "edit_knowledge_article"


async def _watch(receive, watch):
    """Wait for the client to go away; tell ``watch`` if it does."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            watch.went_away()
            return


class Watch:
    """Whether a request's client went away while it was served, and what that ends: in
    2026-07-28 the request ("closing the response stream MUST be treated as cancellation",
    streamable-http.mdx), in a 2025-11-25 session the questions it waits on (a disconnection
    is not a cancellation there, but no answer can reach the client any more)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._gone = False
        self._call = self._session = None
        self._modern = False

    def attach(self, call, session, modern):
        """On the worker thread: the call now being served."""
        with self._lock:
            self._call, self._session, self._modern = call, session, modern
            gone = self._gone
        if gone:
            self._end()

    def went_away(self):
        """On the event loop: the client closed its connection."""
        with self._lock:
            self._gone = True
            attached = self._call is not None
        if attached:
            # Stopping a store call may wait on the database (PostgreSQL's cancel): not here.
            threading.Thread(target=self._end, daemon=True, name="kb-http-gone").start()

    def _end(self):
        if self._modern:
            log.info("request %r: the client closed its connection, which cancels it (nothing "
                     "is written that was not yet)", self._call.request_id)
            self._call.cancel()
        elif self._session is not None and self._session.abandon(self._call):
            log.info("session %s: the client closed the stream of request %r while a person "
                     "was asked; the question ends unanswered", self._session.id,
                     self._call.request_id)

