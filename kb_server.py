#!/usr/bin/env python3
"""An MCP server over stdio for the knowledge-base store, asking a person before every edit.

Attach it to Claude Code, Claude Desktop or any MCP client:

    kb-server --db PATH --grant KB [--grant KB ...] [--writes ask|allow|deny]

It speaks JSON-RPC 2.0, one message per line, as the MCP specification (revision 2025-11-25)
describes for the stdio transport: the lifecycle handshake, ``ping``, ``tools/list``,
``tools/call`` and ``notifications/cancelled``. The tools are ``kb_store.TOOLS``, run with
``KBStore.call_tool`` for the granted knowledge bases only.

With ``--writes ask`` (the default) every ``edit_knowledge_article`` first asks the person
through ``elicitation/create``; nothing is written unless they accept. The loop stays single
threaded: a tool call that waits for the person is a suspended generator, and the server keeps
reading stdin meanwhile, so pings, other calls and a cancellation of the waiting call are
answered at once.

stdout carries protocol messages only; everything else, logs included, goes to stderr.
"""

import argparse
import inspect
import io
import json
import logging
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, Generator

import kb_store

SERVER_NAME = "kb-server"
SERVER_VERSION = "0.1.0"

# Newest first: a client asking for a version we do not speak is answered with the first.
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_PROTOCOL_VERSION = PROTOCOL_VERSIONS[0]
# Elicitation arrived in 2025-06-18: an older session has no way to ask the person anything.
ELICITATION_SINCE = "2025-06-18"
# The elicitation `mode` field arrived in 2025-11-25; the spec lets form mode omit it, and
# omitting it keeps 2025-06-18 clients, whose schema does not know it, on familiar ground.
ELICITATION_MODE_SINCE = "2025-11-25"

# JSON-RPC 2.0 error codes (the MCP schema uses exactly these).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

WRITE_MODES = ("ask", "allow", "deny")
EDIT_TOOL = "edit_knowledge_article"
# The server's own tool error code, from the approval step; the store's codes come from it.
WRITE_NOT_APPROVED = "write_not_approved"

# Sent once in the handshake; clients show it to the model as guidance for these tools.
INSTRUCTIONS = (
    "Knowledge-base tools whose citations are version stamps. Keep the citation object "
    "{knowledge_base_id, article_id, updated_at} from every search hit and read, and cite it. "
    "Re-read an article right before editing it and send its updated_at as expected_version "
    "with a new idempotency_key; on version_conflict, re-read, re-apply your change and retry. "
    "To check whether old citations are still current, poll poll_resource_events "
    "(resource_type knowledge_base) from the head_sequence or next_after_sequence you last "
    "saw, instead of re-reading everything you cited. Every edit may need a person's approval."
)

log = logging.getLogger("kb_server")


class RpcError(Exception):
    """A JSON-RPC error, answered in place of a result."""

    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class WriteNotApproved(kb_store.ToolError):
    """An edit the person did not approve, or could not be asked about; nothing was written."""

    code = WRITE_NOT_APPROVED


@dataclass
class Ask:
    """What a tool handler yields to put a question to the person: ``elicitation/create`` params."""

    params: Dict[str, Any]


@dataclass
class Suspended:
    """A ``tools/call`` waiting for the client's answer to one of our elicitation requests."""

    request_id: Any
    steps: Generator
    label: str  # for the log: which call it is


def is_request_id(value):
    """Whether ``value`` is a valid JSON-RPC request ID for MCP: a string or a finite number."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int))


def same_request_id(a, b):
    """Whether two request IDs name the same request; ``1`` and ``"1"`` are different IDs."""
    return is_request_id(a) and is_request_id(b) and isinstance(a, str) == isinstance(b, str) \
        and a == b


def to_json(value):
    """Compact JSON text, non-ASCII kept as is (the model reads it; escapes cost it tokens)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def tool_result(structured):
    """A successful CallToolResult: the result as structuredContent and as JSON text."""
    return {"content": [{"type": "text", "text": to_json(structured)}],
            "structuredContent": structured}


def tool_error(error):
    """A CallToolResult with isError for a tool error.

    No structuredContent: clients validate it against the tool's outputSchema whenever it is
    present, even on errors (the TypeScript SDK does), and an error object does not match.
    """
    return {"content": [{"type": "text", "text": to_json({"error": error.to_dict()})}],
            "isError": True}


def client_supports_form_elicitation(capabilities):
    """Whether declared client capabilities include form-mode elicitation.

    ``elicitation: {}`` is form mode only, for backwards compatibility; otherwise form mode
    must be named (a client offering only ``url`` cannot show an approval form).
    """
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(elicitation, dict):
        return False
    return not elicitation or "form" in elicitation


def _bytes(n):
    return "{:,} byte{}".format(n, "" if n == 1 else "s")


def _quoted(text):
    # JSON quoting: a newline or a quote in a title cannot blur the lines of the question.
    return json.dumps(text, ensure_ascii=False)


def approval_request(preview, with_mode):
    """The ``elicitation/create`` params asking the person to approve one edit."""
    change = preview["new_bytes"] - preview["current_bytes"]
    lines = [
        "An agent wants to edit an article in knowledge base %s."
        % _quoted(preview["knowledge_base_id"]),
        "",
        "Article: %s (ID %s)" % (_quoted(preview["title"]), preview["article_id"]),
        "Content: %s now, %s after the edit (%+d bytes)."
        % (_bytes(preview["current_bytes"]), _bytes(preview["new_bytes"]), change),
    ]
    if preview.get("new_title") not in (None, preview["title"]):
        lines.append("New title: %s" % _quoted(preview["new_title"]))
    lines += [
        "Version the agent read: %s (the current one)." % preview["current_version"],
        "",
        "Accept to write this change; decline to refuse it. Every edit is asked about.",
    ]
    # A confirmation asks for no data: the accept or decline button is the answer.
    params = {"message": "\n".join(lines),
              "requestedSchema": {"type": "object", "properties": {}}}
    if with_mode:
        params = dict({"mode": "form"}, **params)
    return params


class KBServer:
    """One MCP session: reads messages from a byte stream, writes answers to another."""

    def __init__(self, store, granted, writes, out):
        if writes not in WRITE_MODES:
            raise ValueError("writes must be one of %s, got %r" % (", ".join(WRITE_MODES), writes))
        self.store = store
        self.granted = frozenset(granted)
        self.writes = writes
        self._out = out
        self.tools = [t for t in kb_store.TOOLS
                      if not (writes == "deny" and t["name"] == EDIT_TOOL)]
        # Tools are data: each listed tool dispatches to a plain store call, the edit to the
        # approval path. A tool missing here (the edit under --writes deny) is unknown.
        self._tool_handlers = {
            t["name"]: self._edit if t["name"] == EDIT_TOOL else self._read_only
            for t in self.tools
        }
        self._methods = {
            "initialize": self._initialize,
            "ping": self._ping,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
        }
        self._notifications = {
            "notifications/initialized": self._on_initialized,
            "notifications/cancelled": self._on_cancelled,
        }
        self.protocol_version = None  # set by initialize
        self.client_capabilities = {}
        self.initialized = False  # set by notifications/initialized
        self._waiting = {}  # our elicitation request ID -> Suspended
        self._last_request_number = 0
        self._closed = False

    # -- transport ---------------------------------------------------------------------------------

    def serve(self, stream):
        """Answer messages read line by line from ``stream`` until EOF; returns the exit code."""
        for raw in iter(stream.readline, b""):
            self.handle_line(raw)
            if self._closed:
                break
        if self._waiting:
            log.info("input closed with %d edit(s) awaiting approval; nothing written for them",
                     len(self._waiting))
        return 0

    def handle_line(self, raw):
        """Handle one line of input (bytes); never raises."""
        if not raw.strip():
            return
        try:
            message = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            # RecursionError: JSON nested deeper than the decoder goes is unparsable too.
            self._send_error(None, PARSE_ERROR, "Parse error: %s" % exc)
            return
        try:
            self._handle_message(message)
        except Exception:  # nothing a client sends makes the server die
            log.exception("unexpected failure handling %.200r", raw)
            if isinstance(message, dict) and "method" in message and is_request_id(
                    message.get("id")):
                self._send_error(message["id"], INTERNAL_ERROR, "Internal error")

    def _send(self, message):
        if self._closed:
            return
        try:
            data = to_json(message).encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (echoed from a client's own escapes) has no UTF-8 form; JSON
            # escapes keep the line valid UTF-8 all the same.
            data = json.dumps(message, separators=(",", ":"), allow_nan=False).encode("ascii")
        try:
            self._out.write(data + b"\n")
            self._out.flush()
        except OSError as exc:
            log.info("output closed (%s); the client is gone", exc)
            self._closed = True

    def _send_result(self, request_id, result):
        self._send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _send_error(self, request_id, code, message, data=None):
        error = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self._send({"jsonrpc": "2.0", "id": request_id, "error": error})

    # -- message routing --------------------------------------------------------------------------

    def _handle_message(self, message):
        if isinstance(message, list):
            # MCP dropped JSON-RPC batches in 2025-06-18; one message per line.
            self._send_error(None, INVALID_REQUEST,
                             "Invalid Request: batches are not supported; send one message a line")
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._send_error(self._id_if_any(message), INVALID_REQUEST,
                             'Invalid Request: not a JSON-RPC 2.0 message ("jsonrpc": "2.0")')
            return
        if "method" in message:
            if not isinstance(message["method"], str):
                self._send_error(self._id_if_any(message), INVALID_REQUEST,
                                 "Invalid Request: method must be a string")
            elif "id" in message:
                self._handle_request(message)
            else:
                self._handle_notification(message)
        elif "id" in message and ("result" in message or "error" in message):
            self._handle_response(message)
        else:
            self._send_error(self._id_if_any(message), INVALID_REQUEST,
                             "Invalid Request: neither a request, a notification nor a response")

    @staticmethod
    def _id_if_any(message):
        request_id = message.get("id") if isinstance(message, dict) else None
        return request_id if is_request_id(request_id) else None

    def _handle_request(self, message):
        request_id, method = message["id"], message["method"]
        if not is_request_id(request_id):
            self._send_error(None, INVALID_REQUEST,
                             "Invalid Request: id must be a string or a number")
            return
        handler = self._methods.get(method)
        if handler is None:
            # At once, for any method: a newer client probing (server/discover, say) falls back
            # to the handshake instead of waiting for a timeout.
            self._send_error(request_id, METHOD_NOT_FOUND, "Method not found: %.200s" % method)
            return
        params = message.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            self._send_error(request_id, INVALID_PARAMS, "Invalid params: params must be an object")
            return
        if self.protocol_version is None and method not in ("initialize", "ping"):
            self._send_error(request_id, INVALID_REQUEST, "Invalid Request: the session is "
                             "not initialized; send initialize first")
            return
        try:
            outcome = handler(params)
        except RpcError as exc:
            self._send_error(request_id, exc.code, exc.message, exc.data)
            return
        except Exception as exc:
            log.exception("%s failed", method)
            self._send_error(request_id, INTERNAL_ERROR, "Internal error: %s" % exc)
            return
        if inspect.isgenerator(outcome):
            self._advance(request_id, outcome, None, "%s %s" % (method, params.get("name")))
        else:
            self._send_result(request_id, outcome)

    def _advance(self, request_id, steps, answer, label):
        """Run a suspended call until it finishes or asks the person something."""
        try:
            ask = steps.send(answer)
        except StopIteration as done:
            self._send_result(request_id, done.value)
        except RpcError as exc:
            self._send_error(request_id, exc.code, exc.message, exc.data)
        except Exception as exc:
            log.exception("%s failed", label)
            self._send_error(request_id, INTERNAL_ERROR, "Internal error: %s" % exc)
        else:
            self._last_request_number += 1
            ask_id = "approve-%d" % self._last_request_number
            self._waiting[ask_id] = Suspended(request_id, steps, label)
            self._send({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
                        "params": ask.params})

    def _handle_response(self, message):
        answer_to = message.get("id")
        waiting = self._waiting.pop(answer_to, None) if is_request_id(answer_to) else None
        if waiting is None:
            # A late answer to an elicitation whose tool call was cancelled, or noise.
            log.info("ignored a response to unknown request %.80r", answer_to)
            return
        self._advance(waiting.request_id, waiting.steps, message, waiting.label)

    def _handle_notification(self, message):
        handler = self._notifications.get(message["method"])
        params = message.get("params")
        if handler is None:
            log.debug("ignored notification %s", message["method"])
        elif params is not None and not isinstance(params, dict):
            log.info("ignored %s with params that are not an object", message["method"])
        else:
            handler(params or {})

    # -- notifications -----------------------------------------------------------------------------

    def _on_initialized(self, params):
        self.initialized = True

    def _on_cancelled(self, params):
        target = params.get("requestId")
        for ask_id, waiting in list(self._waiting.items()):
            if same_request_id(waiting.request_id, target):
                del self._waiting[ask_id]
                waiting.steps.close()
                log.info("%s (id %r) cancelled by the client (%s); nothing written",
                         waiting.label, target, params.get("reason", "no reason given"))
                # Our question is moot now: tell the client so it can close the dialog.
                self._send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": ask_id,
                                       "reason": "the tool call it asked about was cancelled"}})
                return
        # Everything else finishes before the next line is read: nothing left to stop.
        log.debug("ignored cancellation of %.80r: not in progress", target)

    # -- requests ----------------------------------------------------------------------------------

    def _initialize(self, params):
        if self.protocol_version is not None:
            raise RpcError(INVALID_REQUEST, "Invalid Request: the session is already initialized")
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: protocolVersion must be a string",
                           {"supported": list(PROTOCOL_VERSIONS)})
        version = requested if requested in PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
        capabilities = params.get("capabilities")
        self.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
        self.protocol_version = version
        client = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else {}
        log.info("session: client %s %s, protocol %s (asked %s), form elicitation %s, writes %s",
                 client.get("name", "?"), client.get("version", "?"), version, requested,
                 "yes" if client_supports_form_elicitation(self.client_capabilities) else "no",
                 self.writes)
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "title": "Knowledge base",
                           "version": SERVER_VERSION},
            "instructions": INSTRUCTIONS,
        }

    def _ping(self, params):
        return {}

    def _list_tools(self, params):
        if params.get("cursor") is not None:
            # We never hand out a cursor: all tools fit one page.
            raise RpcError(INVALID_PARAMS, "Invalid params: unknown cursor")
        return {"tools": self.tools}

    def _call_tool(self, params):
        """tools/call, as a generator: it may suspend while the person is asked."""
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: name must be a string")
        handler = self._tool_handlers.get(name)
        if handler is None:
            hint = " (this server is read only: it was started with --writes deny)" \
                if name == EDIT_TOOL else ""
            raise RpcError(INVALID_PARAMS, "Unknown tool: %.200s%s" % (name, hint),
                           {"tools": sorted(self._tool_handlers)})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        try:
            result = handler(name, arguments)
            if inspect.isgenerator(result):
                result = yield from result
        except kb_store.ToolError as err:
            # Reported to the model as a result with isError, never as a JSON-RPC error: the
            # spec wants errors that arise in the tool where the model can see and act on them.
            # The store turns every failure of a call (its database's included) into one.
            log.info("%s: %s: %s", name, err.code, err.message)
            return tool_error(err)
        return tool_result(result)

    # -- tools -------------------------------------------------------------------------------------

    def _read_only(self, name, arguments):
        return self.store.call_tool(name, arguments, granted=self.granted)

    def _edit(self, name, arguments):
        """The edit tool: under --writes ask, a replay or a person's yes comes before the write."""
        if self.writes == "ask":
            # Validation, the version check and replay detection all happen before asking:
            # nobody is asked about an edit that would fail, or one already made.
            preview = self.store.preview_edit(arguments, granted=self.granted)
            if preview["replay"]:
                log.info("%s: replay of an edit already made; not asking again", name)
                return preview["result"]
            yield from self._approve(preview)
        return self.store.call_tool(name, arguments, granted=self.granted)

    def _approve(self, preview):
        """Ask the person about one edit; returns if they accept, else raises WriteNotApproved."""
        where = {"knowledge_base_id": preview["knowledge_base_id"],
                 "article_id": preview["article_id"]}
        why_not = self._why_cannot_ask()
        if why_not:
            raise WriteNotApproved(
                "Edits need a person's approval: this server was started with --writes ask and "
                "asks through MCP elicitation (form mode), but %s. Nothing was written. To let "
                "this agent edit without asking, restart the server with --writes allow; to "
                "refuse all edits, with --writes deny." % why_not,
                reason="cannot_ask", **where)
        reply = yield Ask(approval_request(
            preview, with_mode=self.protocol_version >= ELICITATION_MODE_SINCE))
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            raise WriteNotApproved(
                "The client could not ask the person (error %s: %s). Nothing was written."
                % (error.get("code"), error.get("message")),
                reason="elicitation_error", **where)
        result = reply.get("result")
        action = result.get("action") if isinstance(result, dict) else None
        if action != "accept":
            log.info("edit of %s/%s not approved: %s", preview["knowledge_base_id"],
                     preview["article_id"], action)
            said = {"decline": "declined", "cancel": "dismissed the question"}.get(
                action, "gave no answer the server understands (%r)" % (action,))
            raise WriteNotApproved(
                "The person %s the edit. Nothing was written; do not retry it unless they ask."
                % said, reason=action if action in ("decline", "cancel") else "invalid_answer",
                **where)
        log.info("edit of %s/%s approved", preview["knowledge_base_id"], preview["article_id"])

    def _why_cannot_ask(self):
        """Why the person cannot be asked in this session, or None when they can."""
        if self.protocol_version < ELICITATION_SINCE:
            return "this client speaks MCP %s, which has no elicitation" % self.protocol_version
        if not client_supports_form_elicitation(self.client_capabilities):
            return "this client did not declare the elicitation capability (form mode)"
        if not self.initialized:
            return "the client has not sent notifications/initialized yet"
        return None


def build_parser():
    """The command line: a database, the knowledge bases granted, and how edits are approved."""
    parser = argparse.ArgumentParser(
        prog="kb-server",
        description="MCP server over stdio for a knowledge-base store.",
    )
    parser.add_argument("--db", metavar="PATH", default=os.environ.get("KB_DB") or None,
                        required=not os.environ.get("KB_DB"),
                        help="an existing store file, made by: kb init --db PATH KB "
                             "(default: $KB_DB)")
    parser.add_argument("--grant", required=True, action="append", metavar="KB",
                        help="a knowledge base the agent may use; repeat for several")
    parser.add_argument("--writes", choices=WRITE_MODES, default="ask",
                        help="ask: a person approves every edit through the client (default); "
                             "allow: edit without asking; deny: read only")
    return parser


def open_store(parser, args):
    """The store named by ``--db``, checked against ``--grant``; exits with a message if not."""
    for kb_id in args.grant:
        if not kb_id:
            parser.error("argument --grant: a knowledge-base ID must not be empty")
    try:
        # Never create=True: a server opens a store that init made, and leaves any other file
        # exactly as it found it.
        store = kb_store.KBStore(args.db)
    except kb_store.ToolError as exc:
        parser.error("argument --db: %s" % exc.message)
    missing = [kb_id for kb_id in args.grant if not store.knowledge_base_exists(kb_id)]
    if missing:
        store.close()
        parser.error("argument --grant: no knowledge base %s in %s"
                     % (", ".join(repr(kb_id) for kb_id in missing), args.db))
    return store


def claim_stdout():
    """A private binary handle on the real stdout; stray writes to stdout go to stderr instead.

    At the descriptor level too, so a C extension or a child process that writes to fd 1
    cannot corrupt the protocol stream.
    """
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, io.UnsupportedOperation):
        out = sys.stdout.buffer
    else:
        out = os.fdopen(os.dup(fd), "wb")
        os.dup2(sys.stderr.fileno(), fd)
    sys.stdout = sys.stderr
    return out


def main(argv=None):
    """Run the server until stdin closes."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="kb_server: %(levelname)s: %(message)s")
    store = open_store(parser, args)
    grants = list(dict.fromkeys(args.grant))
    out = claim_stdout()
    log.info("serving %s for %s, writes %s", args.db, ", ".join(grants), args.writes)
    try:
        return KBServer(store, grants, args.writes, out).serve(sys.stdin.buffer)
    except KeyboardInterrupt:
        return 130
    finally:
        store.close()
        try:
            out.close()
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
