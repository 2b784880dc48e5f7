"""A raw JSON-RPC client of kb-server over stdio, the store file it serves, and checks on what
it answers (shapes, schemas, results and errors).
"""

import json
import queue
import re
import subprocess
import sys
import tempfile
import threading
from types import SimpleNamespace
from urllib.parse import unquote

import kbcite

from .commands import ROOT, child_env

# The server as `python -m kbcite.server` runs it, from the repository root.
SERVER = ["-m", "kbcite.server"]

# Every read waits at most this long, so a hung server fails its test instead of the suite.
TIMEOUT = 15.0

LATEST = "2025-11-25"

VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]

EDIT = "edit_knowledge_article"

DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def check_jsonrpc(message):
    """Fail unless ``message`` is one valid JSON-RPC 2.0 request, notification or response."""
    assert isinstance(message, dict), message
    assert message.get("jsonrpc") == "2.0", message
    if "method" in message:
        assert isinstance(message["method"], str), message
        assert "result" not in message and "error" not in message, message
        if "id" in message:
            assert isinstance(message["id"], (str, int)) and not isinstance(message["id"], bool)
    else:
        assert "id" in message, message
        assert ("result" in message) != ("error" in message), message
        if "error" in message:
            error = message["error"]
            assert isinstance(error["code"], int) and isinstance(error["message"], str), message
        else:
            assert message["id"] is not None, message


def check_schema(value, schema, path="$"):
    """A small JSON Schema check covering every keyword our output schemas use, and no more."""
    known = {"type", "properties", "required", "additionalProperties", "items", "enum",
             "minimum", "maximum", "minLength", "maxLength", "format", "description", "title"}
    unknown = set(schema) - known
    assert not unknown, "%s: schema keywords this check does not know: %s" % (path, unknown)
    kinds = {"object": dict, "array": list, "string": str, "boolean": bool,
             "integer": int, "number": (int, float), "null": type(None)}
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        ok = any(isinstance(value, kinds[t]) and not (t in ("integer", "number")
                                                      and isinstance(value, bool))
                 for t in types)
        assert ok, "%s: %r is not of type %s" % (path, value, schema["type"])
    if "enum" in schema:
        assert value in schema["enum"], "%s: %r not in %s" % (path, value, schema["enum"])
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            assert name in value, "%s: missing required %r" % (path, name)
        for name, item in value.items():
            if name in properties:
                check_schema(item, properties[name], "%s.%s" % (path, name))
            else:
                assert schema.get("additionalProperties", True) is not False, \
                    "%s: unexpected property %r" % (path, name)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check_schema(item, schema["items"], "%s[%d]" % (path, i))
    if isinstance(value, str):
        assert len(value) >= schema.get("minLength", 0), path
        assert len(value) <= schema.get("maxLength", len(value)), path
        if schema.get("format") == "date-time":
            assert DATE_TIME.match(value), "%s: %r is not a date-time" % (path, value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        assert value >= schema.get("minimum", value), path
        assert value <= schema.get("maximum", value), path


class Client:
    """A raw JSON-RPC client driving one ``python -m kbcite.server`` subprocess."""

    def __init__(self, db, grants=("support",), writes=None, argv=None, extra=()):
        if argv is None:
            argv = SERVER + ["--db", str(db)]
            for kb_id in grants:
                argv += ["--grant", kb_id]
            if writes:
                argv += ["--writes", writes]
            argv += list(extra)
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable] + argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, cwd=str(ROOT),
                                     env=child_env())
        self.lines = []  # every line the server wrote to stdout
        self._inbox = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._last_id = 0

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            self._inbox.put(line)
        self._inbox.put(None)

    def send(self, message):
        """Send one message as one line."""
        self.send_raw(json.dumps(message).encode("utf-8") + b"\n")

    def send_raw(self, data):
        """Send bytes as they are."""
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self, timeout=TIMEOUT):
        """The next message from the server, checked to be valid JSON-RPC."""
        try:
            line = self._inbox.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("the server sent nothing for %s s" % timeout) from None
        assert line is not None, "the server closed stdout; stderr:\n" + self.stderr()
        assert line.endswith(b"\n")
        message = json.loads(line.decode("utf-8"))
        check_jsonrpc(message)
        return message

    def request(self, method, params=None, request_id=None):
        """Send a request; returns its ID."""
        if request_id is None:
            self._last_id += 1
            request_id = self._last_id
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def notify(self, method, params=None):
        """Send a notification."""
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def call(self, method, params=None, request_id=None):
        """Send a request and return the next message, which must be its response."""
        request_id = self.request(method, params, request_id)
        response = self.recv()
        assert response.get("id") == request_id and "method" not in response, response
        return response

    def initialize(self, version=LATEST, capabilities=None):
        """The handshake: initialize, then notifications/initialized."""
        response = self.call("initialize", {
            "protocolVersion": version,
            "capabilities": {} if capabilities is None else capabilities,
            "clientInfo": {"name": "test-client", "version": "1.0"},
        })
        self.notify("notifications/initialized")
        return response["result"]

    def start_tool(self, name, **arguments):
        """Send a tools/call; returns its ID."""
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def tool(self, name, **arguments):
        """Call a tool that must answer at once; returns the CallToolResult."""
        response = self.call("tools/call", {"name": name, "arguments": arguments})
        assert "result" in response, response
        return response["result"]

    def close(self):
        """Close stdin and wait for the exit code."""
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(timeout=TIMEOUT)

    def stderr(self):
        """Everything the server wrote to stderr so far."""
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")

    def kill(self):
        """Stop the server however it is doing."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT)
        self._reader.join(timeout=TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._stderr.close()


def make_db(path, with_internal=True):
    """A store file with knowledge base ``support`` (two articles and a draft)."""
    with kbcite.KBStore(str(path), create=True) as store:
        store.create_knowledge_base("support", name="Support")
        password = store.create_article(
            "support", "Resetting your password",
            "Open Settings, choose Security, then Reset password. Links expire after an hour.")
        billing = store.create_article(
            "support", "Billing and invoices", "Invoices are emailed on the first of each month.")
        draft = store.create_article("support", "Password policy (draft)", "Not ready yet.",
                                     published=False)
        if with_internal:
            store.create_knowledge_base("internal")
            store.create_article("internal", "Salaries", "Confidential password list.")
    return SimpleNamespace(path=path, password=password, billing=billing, draft=draft)


def store_read(db, article_id):
    """The article as the store serves it now (not through the server)."""
    with kbcite.KBStore(str(db.path)) as store:
        return store.call_tool("read_knowledge_article",
                               {"knowledge_base_id": "support", "article_id": article_id},
                               granted=["support"])


def store_head(db):
    """The event log's head sequence of ``support``, read directly from the store."""
    with kbcite.KBStore(str(db.path)) as store:
        return store.call_tool("poll_resource_events",
                               {"resource_type": "knowledge_base", "resource_id": "support"},
                               granted=["support"])["head_sequence"]


def error_of(result):
    """The tool error inside an isError CallToolResult."""
    assert result.get("isError") is True, result
    assert "structuredContent" not in result, result
    [block] = result["content"]
    assert block["type"] == "text"
    return json.loads(block["text"])["error"]


def structured(result):
    """The structuredContent of a successful CallToolResult, checked against its text twin
    and against the resource links beside it (one for each article it cites, if any)."""
    assert not result.get("isError"), result
    block, links = result["content"][0], result["content"][1:]
    assert block["type"] == "text"
    assert json.loads(block["text"]) == result["structuredContent"]
    found = result["structuredContent"]
    cited = [hit["citation"] for hit in found.get("results", ())
             if isinstance(hit, dict) and "snippet" in hit]
    if "content" in found and "citation" in found:
        cited = [found["citation"]]
    if links:
        assert [link["type"] for link in links] == ["resource_link"] * len(links), links
        assert [link_citation(link) for link in links] == cited, (links, cited)
    return found


def link_citation(link):
    """The citation a resource_link names, read back from its URI."""
    assert link["uri"].startswith("kb://") and link["mimeType"] == "text/markdown", link
    head, _, version = link["uri"][5:].partition("@")
    kb_id, _, article_id = head.partition("/articles/")
    cited = {"knowledge_base_id": unquote(kb_id), "article_id": unquote(article_id),
             "updated_at": unquote(version)}
    assert link["name"] == cited["article_id"], link
    assert link["annotations"]["lastModified"] == cited["updated_at"], link
    return cited


def edit_args(db, article_id, version, content, key, **extra):
    """Arguments of an edit_knowledge_article call in ``support``."""
    args = {"knowledge_base_id": "support", "article_id": article_id, "content": content,
            "expected_version": version, "idempotency_key": key}
    args.update(extra)
    return args
