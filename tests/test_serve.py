"""``kb serve``: the HTTP server with its settings from kb.toml (or ``[tool.kbcite]`` in
pyproject.toml), the environment and the flags, strongest last; and the JSON access log and
``--log-file`` of both ``kb serve`` and ``kb-server --http``."""

import asyncio
import http.client
import json
import logging
import sys

import pytest

import kbcite
from kbcite.server import cli as server_cli
from kbcite.server.http.access_log import AccessLog
from kbcite.server.calls import CALLER
from support.cli import run_kb
from support.http_server import TIMEOUT, Server
from support.web import WebClient

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
COOKIE_SECRET = "kb_session=cookie-secret-never-logged"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A project folder, the current one, with a store ``kb.sqlite3`` (knowledge base
    ``support``) and a token ``alice`` (the ``TOKEN`` file in the test's folder)."""
    path = tmp_path / "project"
    path.mkdir()
    with kbcite.KBStore(str(path / "kb.sqlite3"), create=True) as store:
        store.create_knowledge_base("support")
        (tmp_path / "TOKEN").write_text(store.tokens.create("alice", ["support"], "allow"))
    monkeypatch.chdir(path)
    return path


def token_of(folder):
    """The token the ``folder`` fixture made."""
    return (folder.parent / "TOKEN").read_text()


def check(*argv, env=None):
    """``{key: (value, source)}`` of ``kb serve --check``, and its status and stderr."""
    status, out, err = run_kb(["serve", "--check"] + list(argv), env=env)
    table = {}
    for line in out.splitlines()[1:]:
        key, value, source = line.split()
        table[key] = (value, source)
    return status, table, err


# -- the settings: file, environment, flags -----------------------------------------------------


def test_a_flag_outranks_the_environment_which_outranks_the_file(folder):
    (folder / "kb.toml").write_text('db = "kb.sqlite3"\nport = 9001\nworkers = 3\n'
                                    'threads = 4\nlog-format = "json"\n')
    status, table, err = check("--workers", "2", env={"KB_PORT": "9002", "KB_THREADS": "5"})
    assert status == 0, err
    assert table["workers"] == ("2", "flag")
    assert table["port"] == ("9002", "environment")
    assert table["threads"] == ("5", "environment")
    assert table["log-format"] == ("json", "file")
    assert table["db"] == (str(folder / "kb.sqlite3"), "file")
    assert table["host"] == ("127.0.0.1", "default")
    assert table["max-body"] == (str(8 * 1024 * 1024), "default")
    status, table, _ = check("--db", "kb.sqlite3", env={"KB_DB": "elsewhere.sqlite3"})
    assert status == 0 and table["db"] == ("kb.sqlite3", "flag")


def test_pyproject_tool_kbcite_is_read_and_kb_toml_comes_before_it(folder):
    (folder / "pyproject.toml").write_text('[project]\nname = "docs"\n\n[tool.kbcite]\n'
                                           'db = "kb.sqlite3"\nport = 9100\n'
                                           'allow-origins = ["https://docs.example.com"]\n')
    status, table, err = check()
    assert status == 0, err
    assert table["port"] == ("9100", "file")
    assert table["allow-origins"] == ("https://docs.example.com", "file")
    (folder / "kb.toml").write_text('db = "kb.sqlite3"\nport = 9200\n')
    assert check()[1]["port"] == ("9200", "file")
    (folder / "kb.toml").unlink()
    (folder / "pyproject.toml").write_text('[project]\nname = "docs"\n')
    status, table, err = check("--db", "kb.sqlite3")
    assert status == 0 and table["port"] == ("8765", "default"), err


def test_relative_paths_are_taken_from_the_config_files_folder(folder, tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "kb.toml").write_text('db = "../project/kb.sqlite3"\nlog-file = "kb.log"\n')
    status, table, err = check("--config", str(etc / "kb.toml"))
    assert status == 0, err
    assert table["db"][0] == str(etc / "../project/kb.sqlite3")
    assert table["log-file"][0] == str(etc / "kb.log")


BAD_FILES = [
    ('prot = 9000\n', "kb.toml: unknown key 'prot' (did you mean 'port'?); the keys are: "),
    ('max_body = 10\n', "unknown key 'max_body' (did you mean 'max-body'?)"),
    ('port = "9000"\n', "kb.toml: key 'port' must be an integer from 0 to 65535, got \"9000\" "
                        "(a string)"),
    ('port = 70000\n', "key 'port' must be an integer from 0 to 65535, got 70000"),
    ('workers = 0\n', "key 'workers' must be an integer of at least 1, got 0"),
    ('workers = true\n', "key 'workers' must be an integer of at least 1, got true (a boolean)"),
    ('threads = 2.5\n', "key 'threads' must be an integer of at least 1, got 2.5"),
    ('idle-timeout = 0\n', "key 'idle-timeout' must be a number greater than 0, got 0"),
    ('log-format = "xml"\n', "key 'log-format' must be one of plain, json, got \"xml\""),
    ('allow-origins = "https://a.example"\n', "key 'allow-origins' must be an array of strings"),
    ('allow-origins = ["notanorigin"]\n', "an origin is scheme://host[:port]"),
    ('oauth-scopes = [1]\n', "key 'oauth-scopes' must be an array of strings, got [1]"),
    ('db = ""\n', "key 'db' must be a non-empty string"),
    ('[db]\npath = "x"\n', "key 'db' must be a non-empty string, got a table"),
    ('port = \n', "kb.toml: not valid TOML: "),
    ('grant = ["support"]\n', "unknown key 'grant'"),
    ('public-url = "kb.example.com"\n', "key 'public-url' must be the address people's"),
]


@pytest.mark.parametrize("text, message", BAD_FILES, ids=[t.split()[0] for t, _ in BAD_FILES])
def test_a_bad_config_file_is_one_line_naming_the_file_the_key_and_what_is_allowed(
        folder, text, message):
    store = 'db = "kb.sqlite3"\n' if "db" not in text else ""
    (folder / "kb.toml").write_text('log-file = "kb.log"\n' + store + text)
    for argv in (["serve"], ["serve", "--check"]):
        status, out, err = run_kb(argv)
        assert status == 1 and out == ""
        assert len(err.splitlines()) == 1 and err.startswith("kb serve: error: kb.toml"), err
        assert message in err, err
    assert not (folder / "kb.log").exists()  # nothing started, not even the log


def test_pyproject_errors_name_the_table(folder):
    (folder / "pyproject.toml").write_text('[tool.kbcite]\nport = "x"\n')
    status, _, err = run_kb(["serve"])
    assert status == 1
    assert err.strip() == ("kb serve: error: pyproject.toml [tool.kbcite]: key 'port' must be "
                           "an integer from 0 to 65535, got \"x\" (a string)")
    (folder / "pyproject.toml").write_text('[project]\nname = "x"\n')
    status, _, err = run_kb(["serve", "--config", "pyproject.toml"])
    assert status == 1 and "pyproject.toml: no [tool.kbcite] table" in err


@pytest.mark.parametrize("env, message", [
    ({"KB_PORT": "http"}, "$KB_PORT must be an integer from 0 to 65535, got 'http'"),
    ({"KB_WORKERS": "0"}, "$KB_WORKERS must be an integer of at least 1, got '0'"),
    ({"KB_LOG_FORMAT": "yaml"}, "$KB_LOG_FORMAT must be one of plain, json, got 'yaml'"),
    ({"KB_ALLOW_ORIGINS": "https://a.example nope"}, "$KB_ALLOW_ORIGINS must be an array"),
])
def test_a_bad_environment_variable_is_one_line_naming_it(folder, env, message):
    status, out, err = run_kb(["serve", "--db", "kb.sqlite3"], env=env)
    assert status == 1 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("kb serve: error: " + message), err


@pytest.mark.parametrize("argv, message", [
    (["--port", "70000"], "argument --port: must be an integer from 0 to 65535, got 70000"),
    (["--host", ""], "argument --host: must be a non-empty string, got ''"),
])
def test_a_bad_host_or_port_flag_names_the_flag(folder, argv, message):
    status, out, err = run_kb(["serve", "--db", "kb.sqlite3"] + argv)
    assert status == 1 and out == "" and err.strip() == "kb serve: error: " + message


def test_no_store_and_a_missing_config_file_say_what_to_do(folder):
    status, _, err = run_kb(["serve"])
    assert status == 1
    assert err.strip() == ('kb serve: error: no store given: --db PATH, $KB_DB, or db = "PATH" '
                           'in kb.toml')
    status, _, err = run_kb(["serve", "--config", "nowhere.toml"])
    assert status == 1 and "nowhere.toml: no such file" in err
    status, _, err = run_kb(["serve", "--check", "--db", "missing.sqlite3"])
    assert status == 1 and err.startswith("kb serve: error: argument --db: no knowledge-base "
                                          "store at missing.sqlite3"), err


def test_the_help_states_the_order(folder):
    status, out, _ = run_kb(["serve", "--help"])
    assert status == 0
    words = " ".join(out.split())
    assert ("Each setting comes from, strongest first: its flag; its environment variable"
            in words)
    assert "the config file (--config FILE, else kb.toml in the current folder" in words
    for flag in ("--config", "--host", "--port", "--log-format", "--log-file", "--workers"):
        assert flag in out


# -- the log file -------------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
def test_a_log_file_that_cannot_be_written_is_one_line_before_anything_starts(folder):
    for path, reason in (("/nonexistent/kb.log", "cannot append to /nonexistent/kb.log: No "
                                                 "such file or directory"),
                         (str(folder), "is a folder; name a file")):
        with pytest.raises(SystemExit) as exc:
            server_cli.main(["--db", "kb.sqlite3", "--http", "127.0.0.1:0", "--log-file", path])
        assert str(exc.value).startswith("kb-server: error: argument --log-file: "), exc.value
        assert reason in str(exc.value)
        status, _, err = run_kb(["serve", "--db", "kb.sqlite3", "--log-file", path])
        assert status == 1 and err.startswith("kb serve: error: argument --log-file: ")
        assert reason in err


# -- the access log -----------------------------------------------------------------------------


def run_app(app, scope):
    """Run ``app`` on one HTTP request scope; the messages it sent."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


def scope(path="/mcp", query=b"code=secret"):
    return {"type": "http", "method": "POST", "path": path, "query_string": query,
            "headers": [(b"authorization", b"Bearer kbt_secret"), (b"cookie", b"s=secret")],
            "client": ("192.0.2.7", 40000)}


def test_the_access_log_records_status_duration_bytes_and_the_token_name(caplog):
    async def app(scope, receive, send):
        scope[CALLER] = "alice"
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"hello", "more_body": True})
        await send({"type": "http.response.body", "body": b"!"})

    times = iter([10.0, 10.25])
    logged = AccessLog(app, clock=lambda: 1796192400.5, timer=lambda: next(times))
    with caplog.at_level(logging.INFO, logger="kbcite.access"):
        sent = run_app(logged, scope())
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body",
                                         "http.response.body"]
    (record,) = caplog.records
    assert record.access == {"event": "access", "time": "2026-12-02T06:20:00.500Z",
                             "method": "POST", "path": "/mcp", "status": 201,
                             "duration_ms": 250.0, "bytes": 6, "client": "192.0.2.7",
                             "token": "alice"}
    assert "secret" not in json.dumps(record.access) and "secret" not in record.getMessage()


def test_an_app_that_raises_is_logged_as_500_and_the_lifespan_passes_through(caplog):
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            await send({"type": "lifespan.startup.complete"})
            return
        raise RuntimeError("broken")

    logged = AccessLog(app)
    with caplog.at_level(logging.INFO, logger="kbcite.access"):
        with pytest.raises(RuntimeError):
            run_app(logged, scope())
        assert run_app(logged, {"type": "lifespan"}) == [{"type": "lifespan.startup.complete"}]
    (record,) = caplog.records
    assert record.access["status"] == 500 and record.access["token"] is None


def post(port, token, path="/mcp?code=query-secret"):
    """A ping POST with a token and a cookie; its status."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    conn.request("POST", path, body=json.dumps(PING), headers={
        "Authorization": "Bearer %s" % token, "Cookie": COOKIE_SECRET,
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25"})
    status = conn.getresponse().status
    conn.close()
    return status


def access_lines(text):
    """The access records of a JSON log, each line parsed (every line must be JSON)."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [line for line in lines if line.get("event") == "access"]


@pytest.mark.slow
@pytest.mark.py39
def test_kb_serve_serves_with_the_files_settings_and_appends_a_json_access_log(folder):
    (folder / "access.log").write_text('{"event": "earlier"}\n')
    (folder / "kb.toml").write_text('db = "kb.sqlite3"\nport = 0\nlog-format = "json"\n'
                                    'log-file = "access.log"\nthreads = 2\n')
    s = Server(None, argv=[sys.executable, "-m", "kbcite", "serve"], cwd=folder)
    try:
        assert post(s.port, token_of(folder)) == 200
        assert post(s.port, "kbt_" + "x" * 43) == 401
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=TIMEOUT)
        conn.request("GET", "/nothere")
        assert conn.getresponse().status == 404
        conn.close()
    finally:
        s.stop()
    text = (folder / "access.log").read_text()
    assert text.startswith('{"event": "earlier"}\n')  # appended, not truncated
    lines = access_lines(text)
    assert [(line["method"], line["path"], line["status"], line["token"]) for line in lines] == [
        ("POST", "/mcp", 200, "alice"), ("POST", "/mcp", 401, None), ("GET", "/nothere", 404,
                                                                      None)]
    for line in lines:
        assert line["duration_ms"] >= 0 and line["time"].endswith("Z")
        assert line["client"] == "127.0.0.1"
    assert token_of(folder) not in text and "cookie-secret" not in text and "query-secret" not in text
    assert "x" * 43 not in text


@pytest.mark.slow
def test_kb_server_logs_json_to_stderr_with_the_web_pages_person(tmp_path):
    from support.web import make_store
    tokens, _ = make_store(tmp_path / "kb.db")
    s = Server(tmp_path / "kb.db", "--log-format", "json")
    try:
        browser = WebClient("127.0.0.1", s.port)
        assert browser.sign_in(tokens["alice"]) == 303
        assert browser.get("/")[0] == 200
        cookie = browser.cookies["kb_session"]
        s.wait_for_log('"path":"/"', count=1)
    finally:
        s.stop()
    after = s.text().split("kb-server: serving", 1)[1].split("\n", 1)[1]
    lines = access_lines(after)
    assert ("GET", "/", 200, "alice") in [(line["method"], line["path"], line["status"],
                                           line["token"]) for line in lines]
    assert cookie not in s.text() and tokens["alice"] not in s.text()
