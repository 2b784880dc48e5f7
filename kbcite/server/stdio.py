"""The stdio transport: one client, one JSON-RPC message a line on stdin and on stdout.

Tool calls run on worker threads and are answered as they finish; everything else is answered
at once, in order. stdout carries protocol messages only.
"""

import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from .calls import Cancelled, Session
from .dispatch import LocalSessions
from .inbound import route
from .jsonrpc import (
    INTERNAL_ERROR,
    PARSE_ERROR,
    RpcError,
    encode,
    error_response,
    id_if_any,
    id_key,
)
from .pool import READERS
from .subscriptions import SUBSCRIPTIONS_MAX, Hub, Subscriber, TooMany

log = logging.getLogger(__name__)

# The keeper of the one session stdio holds.
LOCAL = LocalSessions()


class StdioTransport:
    """One client on stdin and stdout: requests run on worker threads, answers as they finish."""

    def __init__(self, dispatch, principal, out, threads=READERS):
        self.dispatch = dispatch
        self.session = Session(principal)
        self.out = out
        # Edits run on threads of their own: one waiting for a lock (or a person) never holds
        # a thread a read needs, as it holds none of the read connections.
        self.reads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kb-read")
        self.edits = ThreadPoolExecutor(max_workers=dispatch.pool.edit_slots,
                                        thread_name_prefix="kb-edit")
        self._write_lock = threading.Lock()
        self._closed = False
        # Notifications: the watcher starts with the first subscription. The client's
        # resources/subscribe URIs (2025-11-25) are one subscriber; each listen stream
        # (2026-07-28) another, until notifications/cancelled names its request.
        self.hub = Hub(dispatch.pool.address)
        self._subscriber = None
        self._listens = {}
        self._subs_lock = threading.Lock()

    def send(self, message):
        """Write one message line to stdout, whole; never raises."""
        if self._closed:
            return
        data = encode(message)
        with self._write_lock:
            try:
                self.out.write(data + b"\n")
                self.out.flush()
            except (OSError, ValueError) as exc:
                log.info("output closed (%s); the client is gone", exc)
                self._closed = True

    def serve(self, stream):
        """Answer messages read line by line from ``stream`` until EOF; returns the exit code."""
        for raw in iter(stream.readline, b""):
            self.handle_line(raw)
            if self._closed:
                break
        # Calls under way finish and are answered; questions can no longer be answered.
        with self.session.lock:
            asks = list(self.session.asks.values())
        if asks:
            log.info("input closed with %d edit(s) awaiting approval; nothing written for them",
                     len(asks))
        for ask in asks:
            ask.answered.set()
        self.reads.shutdown(wait=True)
        self.edits.shutdown(wait=True)
        self.hub.close()
        return 0

    def handle_line(self, raw):
        """Handle one line of input (bytes); never raises."""
        if not raw.strip():
            return
        try:
            message = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            # RecursionError: JSON nested deeper than the decoder goes is unparsable too.
            self.send(error_response(None, RpcError(PARSE_ERROR, "Parse error: %s" % exc)))
            return
        routed = route(message)
        if routed.kind is None:
            self.send(error_response(id_if_any(message), routed.error))
        elif routed.kind == "response":
            self._on_response(message)
        elif routed.kind == "notification":
            self._on_notification(message)
        else:
            self._on_request(message, routed)

    def _on_request(self, message, routed):
        # Begun here, in the order read, so that a cancellation read next finds the call.
        call, refused = self.dispatch.begin(message, self.session)
        if refused is not None:
            self.send(refused.response)
        elif routed.needs_store:
            (self.edits if routed.may_wait else self.reads).submit(self._work, call, message,
                                                                   routed)
        else:
            # Everything else touches no store and never waits: answered at once, in order,
            # whatever the workers are waiting for.
            self._work(call, message, routed)

    def _work(self, call, message, routed):
        outcome = self.dispatch.serve(call, message, routed, self.session.principal,
                                      self.session, ask=self._ask, notify=self.send,
                                      subscriptions=self)
        if outcome.listen is not None:
            self._listen(outcome.listen)
        elif outcome.response is not None:
            # A call stopped by its cancellation has no response (it wrote nothing); one that
            # finished before the cancellation reached it is answered, so that the client
            # learns what was done (the spec lets a receiver ignore a late cancellation).
            if call.cancelled.is_set():
                log.info("request %r was cancelled after it finished; its result is sent",
                         call.request_id)
            self.send(outcome.response)

    # -- subscriptions ---------------------------------------------------------------------------

    def _deliver(self, message):
        self.send(message)
        return not self._closed

    def _client_subscriber(self):
        """The handshake client's subscriber: made and watched once, at its initialized
        notification (the list_changed capability promises those without a subscription) or
        at its first resources/subscribe, whichever comes first."""
        with self._subs_lock:
            if self._subscriber is not None:
                return self._subscriber
            subscriber = Subscriber(self.session.principal, self._deliver, list_changed=True,
                                    limit=SUBSCRIPTIONS_MAX)
            self.hub.add(subscriber)  # TooMany leaves none, and the next call tries again
            self._subscriber = subscriber
            return subscriber

    def add(self, uri):
        """resources/subscribe: one more URI for the client's subscriber."""
        self._client_subscriber().add(uri)

    def remove(self, uri):
        """resources/unsubscribe."""
        if self._subscriber is not None:
            self._subscriber.remove(uri)

    def _listen(self, listen):
        """subscriptions/listen: the acknowledgement first, then what the filter asked for,
        until the client cancels the request (no response then) or the server stops."""
        key = id_key(listen.request_id)
        opened = threading.Event()

        def deliver(message):
            opened.wait(5)  # nothing of the stream before its acknowledgement
            return self._deliver(message)

        subscriber = Subscriber(self.session.principal, deliver,
                                list_changed=bool(listen.honored.get("resourcesListChanged")),
                                tag=listen.request_id, limit=SUBSCRIPTIONS_MAX)
        for uri in listen.honored.get("resourceSubscriptions", ()):
            subscriber.add(uri)
        with self._subs_lock:
            if key in self._listens:
                self.send(error_response(listen.request_id, RpcError(
                    INTERNAL_ERROR, "a listen stream with request id %r is open; use a new id"
                    % (listen.request_id,))))
                return
            self._listens[key] = subscriber
        try:
            self.hub.add(subscriber)
        except TooMany as exc:
            with self._subs_lock:
                self._listens.pop(key, None)
            self.send(error_response(listen.request_id, RpcError(
                INTERNAL_ERROR, "Subscription limit reached: %s" % exc,
                {"reason": "subscription_limit"})))
            return
        self.send(listen.acknowledgement())
        opened.set()

    def _ask(self, call, params):
        """Put a question to the client; the reply, None on timeout; Cancelled if cancelled."""
        ask_id, reply = self.session.ask(call, params, self.send)
        if call.cancelled.is_set():
            # Our question is moot now: tell the client so it can close the dialog.
            self.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": ask_id,
                                  "reason": "the tool call it asked about was cancelled"}})
            raise Cancelled()
        return reply

    def _on_response(self, message):
        if not self.dispatch.response(message, self.session, LOCAL):
            # A late answer to a question whose call was cancelled, or noise.
            log.info("ignored a response to unknown request %.80r", message.get("id"))

    def _on_notification(self, message):
        self.dispatch.notification(message, self.session, LOCAL, listens=self)
        if message["method"] == "notifications/initialized" and self.session.initialized \
                and self.session.protocol_version is not None:
            try:
                self._client_subscriber()
            except TooMany as exc:  # the token's streams are full: subscribe will say so
                log.info("no list_changed notifications for this client: %s", exc)

    def end_listen(self, request_id):
        """notifications/cancelled naming a listen request: its stream ends (no response for
        it, subscriptions.mdx); False when no listen has that ID."""
        with self._subs_lock:
            listening = self._listens.pop(id_key(request_id), None)
        if listening is None:
            return False
        self.hub.remove(listening)
        return True
