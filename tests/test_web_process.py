"""``kb-server --http`` renders the pages in a page process of its own: the pages come from
it, a page process that dies is replaced without losing a session, the access log still names
the person, and stopping the server ends it."""

import json
import os
import signal
import sys
import time

import pytest

from support.http_server import TIMEOUT, Server
from support.web import WebClient, make_store

pytest.importorskip("jinja2")
pytest.importorskip("markdown_it")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="finds the page process through /proc")


def page_processes(parent):
    """The IDs of ``parent``'s page processes (multiprocessing's spawned children)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, encoding="utf-8") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % name, "rb") as fh:
                cmdline = fh.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"spawn_main" in cmdline:
            found.append(int(name))
    return found


def wait_until(check, what):
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("%s within %d s" % (what, TIMEOUT))


def gone(pid):
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has ended
    except OSError:
        return True


@pytest.fixture
def site(tmp_path):
    path = tmp_path / "web.sqlite3"
    tokens, ids = make_store(path)
    server = Server(path, "--log-format", "json")
    yield server, tokens, ids
    if server.proc.poll() is None:
        server.stop()


def test_a_page_process_that_dies_is_replaced_and_the_session_survives(site):
    server, tokens, ids = site
    web = WebClient(server.host, server.port)
    assert web.sign_in(tokens["alice"]) == 303
    status, _, page = web.get("/kb/support/articles/%s" % ids["first"])
    assert status == 200 and "Reset a password" in page
    first = wait_until(lambda: page_processes(server.proc.pid), "a page process")
    assert len(first) == 1 and first[0] != server.proc.pid
    os.kill(first[0], signal.SIGKILL)
    wait_until(lambda: gone(first[0]), "the page process ended")
    # The next page is made by a new page process, for the same session (the store's).
    status, _, page = web.get("/kb/support/articles/%s/history" % ids["first"])
    assert status == 200 and "Reset a password" in page
    second = page_processes(server.proc.pid)
    assert len(second) == 1 and second[0] != first[0]
    server.wait_for_log("the page process ended")
    # Forms still work (their CSRF token is the session's, whichever process checks it).
    status, _, page = web.get("/kb/support/articles/%s/edit" % ids["other"])
    assert status == 200


def test_the_access_log_names_the_person_of_a_page(site):
    server, tokens, ids = site
    web = WebClient(server.host, server.port)
    assert web.sign_in(tokens["reader"]) == 303
    assert web.get("/kb/support/articles/%s" % ids["other"])[0] == 200
    server.wait_for_log('"path":"/kb/support/articles/%s"' % ids["other"])
    lines = [json.loads(line) for line in server.text().splitlines()
             if line.startswith("{") and '"event":"access"' in line]
    page = [line for line in lines if line["path"] == "/kb/support/articles/%s" % ids["other"]]
    assert page and page[-1]["token"] == "reader" and page[-1]["status"] == 200


def test_stopping_the_server_ends_its_page_process(site):
    server, tokens, _ = site
    web = WebClient(server.host, server.port)
    assert web.sign_in(tokens["alice"]) == 303
    pids = wait_until(lambda: page_processes(server.proc.pid), "a page process")
    server.stop()
    wait_until(lambda: all(gone(pid) for pid in pids), "the page process ended with the server")
