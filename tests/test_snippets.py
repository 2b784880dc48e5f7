"""Every shell snippet of README.md and docs/*.md runs as written, so none can rot.

Each page's ```sh blocks run in order, as one bash session (``set -euo pipefail``), in a fresh
copy of the project, with ``kb``, ``kb-server``, ``kb-sim`` and ``python`` on PATH. A stand-in
``claude`` starts the server command given to ``claude mcp add`` and lists its tools (with
``--transport http``, it lists the tools at the URL with the headers given), and each Claude
Desktop configuration shown is started the same way. A block preceded by
``<!-- snippet: slow: REASON -->`` is only checked for syntax, unless KB_SLOW_SNIPPETS=1.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md"] + sorted("docs/" + p.name for p in (ROOT / "docs").glob("*.md"))
SLOW = re.compile(r"<!-- snippet: slow: (.+?) -->")
RUN_SLOW = os.environ.get("KB_SLOW_SNIPPETS") == "1"
# What the Claude Desktop example writes for "the folder you keep your store in".
DESKTOP_HOME = "/Users/you/kb"
IGNORED = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", "*.egg-info", "build",
                                 "dist", ".pytest_cache", "*.db", "*.db-*", "*.sqlite3", ".scratch")

# Speaks just enough MCP to prove a server command starts and serves its tools.
HANDSHAKE = r'''
import json, subprocess, sys
def check(command):
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "snippet-check", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    out, err = proc.communicate("".join(json.dumps(m) + "\n" for m in messages).encode(),
                                timeout=60)
    replies = [json.loads(line) for line in out.decode().splitlines()]
    if proc.returncode != 0 or len(replies) != 2 or "error" in replies[1]:
        sys.exit("server command %r failed: exit %s\n%s" % (command, proc.returncode,
                                                            err.decode()))
    names = sorted(t["name"] for t in replies[1]["result"]["tools"])
    print("%s serves %s" % (command[0], ", ".join(names)))
'''

FAKE_CLAUDE = HANDSHAKE + r'''
import urllib.request

def check_http(url, headers):
    """The handshake over Streamable HTTP with the given headers, as Claude Code does it."""
    def post(message, session=None):
        sent = dict(headers, **{"Content-Type": "application/json",
                                "Accept": "application/json, text/event-stream"})
        if session:
            sent.update({"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
        request = urllib.request.Request(url, json.dumps(message).encode(), sent)
        with urllib.request.urlopen(request, timeout=60) as response:
            body = response.read()
            return response.headers.get("Mcp-Session-Id"), json.loads(body) if body else None
    session, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "snippet-check", "version": "1"}}})
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    _, listed = post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session)
    names = sorted(t["name"] for t in listed["result"]["tools"])
    print("%s serves %s" % (url, ", ".join(names)))

args = sys.argv[1:]
if args[:2] == ["mcp", "add"] and "--transport" in args and \
        args[args.index("--transport") + 1:][:1] == ["http"]:
    rest, headers, positional = args[2:], {}, []
    while rest:
        flag = rest.pop(0)
        if flag in ("--transport", "-t", "--scope", "-s"):
            rest.pop(0)
        elif flag in ("--header", "-H"):
            name, _, value = rest.pop(0).partition(":")
            headers[name.strip()] = value.strip()
        else:
            positional.append(flag)
    if len(positional) != 2:
        sys.exit("fake claude: expected NAME URL, got %r" % positional)
    check_http(positional[1], headers)
    print("Added HTTP MCP server %s with URL: %s" % tuple(positional))
elif args[:2] == ["mcp", "add"]:
    if "--" not in args:
        sys.exit("fake claude: no -- before the server command")
    command = args[args.index("--") + 1:]
    if not command or not command[0].startswith("/"):
        sys.exit("fake claude: the server command %r is not an absolute path" % command[:1])
    check(command)
    print("Added stdio MCP server")
elif args[:2] == ["mcp", "list"]:
    print("kb: connected")
else:
    sys.exit("fake claude: unsupported %r" % args)
'''


def blocks(page):
    """``(line, code, slow reason or None)`` of every ```sh block of ``page``."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        if lines[i].strip() in ("```sh", "```bash"):
            start = i
            previous = next((l for l in reversed(lines[:i]) if l.strip()), "")
            slow = SLOW.search(previous)
            i += 1
            body = []
            while lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            found.append((start + 1, "\n".join(body) + "\n", slow.group(1) if slow else None))
        i += 1
    return found


def desktop_configs(page):
    """The Claude Desktop ``mcpServers`` entries shown in ```json blocks of ``page``."""
    text = (ROOT / page).read_text(encoding="utf-8")
    servers = []
    for block in re.findall(r"```json\n(.*?)```", text, re.S):
        if "mcpServers" in block:
            servers += json.loads(block)["mcpServers"].values()
    return servers


def shim(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


@pytest.fixture
def workspace(tmp_path):
    """A copy of the project, a bin folder of commands, and the environment to run them in."""
    work = tmp_path / "project"
    shutil.copytree(str(ROOT), str(work), ignore=IGNORED)
    bin_dir = tmp_path / "bin"
    for name, module in (("kb", "kbcite"), ("kb-server", "kbcite.server"),
                         ("kb-sim", "kbcite.sim")):
        shim(bin_dir / name, '#!/bin/sh\nexec "%s" -m %s "$@"\n' % (sys.executable, module))
    shim(bin_dir / "python", '#!/bin/sh\nexec "%s" "$@"\n' % sys.executable)
    shim(bin_dir / "claude", "#!%s\n%s" % (sys.executable, FAKE_CLAUDE))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update(PATH="%s%s%s" % (bin_dir, os.pathsep, env.get("PATH", "")),
               PYTHONPATH=str(work), HOME=str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return work, bin_dir, env


def test_every_page_has_its_snippets_found():
    assert blocks("README.md"), "the README lost its snippets"
    assert sum(len(blocks(p)) for p in PAGES) >= 10
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        # A shell block fenced any other way would escape this test.
        assert not re.search(r"```(shell|console|zsh)\b", text), page


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)])
def test_the_shell_snippets_run(workspace, page):
    work, _, env = workspace
    found = blocks(page)
    script = ["set -euo pipefail"]
    for line, code, slow in found:
        check = subprocess.run(["bash", "-n"], input=code, text=True, capture_output=True)
        assert check.returncode == 0, "%s:%d is not valid bash: %s" % (page, line, check.stderr)
        if slow and not RUN_SLOW:
            continue
        script += ["echo '### %s:%d' >&2" % (page, line), code]
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=str(work), env=env, text=True,
                          capture_output=True, timeout=600)
    assert done.returncode == 0, "%s: a snippet failed (exit %d)\n--- stdout\n%s\n--- stderr\n%s" % (
        page, done.returncode, done.stdout[-3000:], done.stderr[-3000:])


@pytest.mark.parametrize("page", [p for p in PAGES if desktop_configs(p)])
def test_the_claude_desktop_configurations_start_the_server(workspace, tmp_path, page):
    work, bin_dir, env = workspace
    home = tmp_path / DESKTOP_HOME.strip("/").replace("/", "_")
    home.mkdir()
    subprocess.run([str(bin_dir / "kb"), "init", "--db", str(home / "kb.sqlite3"), "support"],
                   env=env, check=True, capture_output=True, timeout=60)
    shim(home / ".venv" / "bin" / "kb-server",
         '#!/bin/sh\nexec "%s" -m kbcite.server "$@"\n' % sys.executable)
    checker = tmp_path / "handshake.py"
    checker.write_text(HANDSHAKE + "\ncheck(sys.argv[1:])\n", encoding="utf-8")
    for server in desktop_configs(page):
        command = [server["command"]] + server["args"]
        command = [part.replace(DESKTOP_HOME, str(home)) for part in command]
        done = subprocess.run([sys.executable, str(checker)] + command, env=env, text=True,
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "search_knowledge_base" in done.stdout
