"""The stdio transport: one client, one JSON-RPC message a line on stdin and on stdout.

Tool calls run on worker threads and are answered as they finish; everything else is answered
at once, in order. stdout carries protocol messages only.
"""

import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from .jsonrpc import PARSE_ERROR, RpcError, classify, encode, error_response, id_if_any
from .pool import READERS
from .protocol import EDIT_TOOL, Context, answer
from .session import Cancelled, Session

log = logging.getLogger(__name__)


class StdioTransport:
    """One client on stdin and stdout: requests run on worker threads, answers as they finish."""

    def __init__(self, protocol, principal, out, threads=READERS):
        self.protocol = protocol
        self.session = Session(principal)
        self.out = out
        # Edits run on threads of their own: one waiting for a lock (or a person) never holds
        # a thread a read needs, as it holds none of the read connections.
        self.reads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kb-read")
        self.edits = ThreadPoolExecutor(max_workers=protocol.pool.edit_slots,
                                        thread_name_prefix="kb-edit")
        self._write_lock = threading.Lock()
        self._closed = False

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
        kind, error = classify(message)
        if error is not None:
            self.send(error_response(id_if_any(message), error))
        elif kind == "response":
            self._on_response(message)
        elif kind == "notification":
            self._on_notification(message)
        else:
            self._on_request(message)

    def _on_request(self, message):
        session = self.session
        try:
            call = session.begin(message)
        except RpcError as exc:
            self.send(error_response(message["id"], exc))
            return
        ctx = Context(principal=session.principal, call=call, session=session,
                      ask=lambda params: self._ask(call, params))
        if message["method"] == "tools/call":
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            (self.edits if name == EDIT_TOOL else self.reads).submit(self._work, message, ctx)
        else:
            # Everything else touches no store and never waits: answered at once, in order,
            # whatever the workers are waiting for.
            self._work(message, ctx)

    def _work(self, message, ctx):
        response = answer(self.protocol, message, ctx)
        self.session.end(ctx.call)
        if response is not None and not ctx.call.cancelled.is_set():
            self.send(response)

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
        if not self.session.deliver(message):
            # A late answer to a question whose call was cancelled, or noise.
            log.info("ignored a response to unknown request %.80r", message.get("id"))

    def _on_notification(self, message):
        self.session.notify(message)
