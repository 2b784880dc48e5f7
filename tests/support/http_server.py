"""kb-server over Streamable HTTP in a subprocess, for the HTTP and SDK tests, and raw sockets
to speak to it as a hostile client would."""

import socket
import subprocess
import sys
import threading
import time

from .commands import ROOT, child_env

# Every wait on the server is bounded, so a hung server fails its test instead of the suite.
TIMEOUT = 30


class Server:
    """``kb-server --http 127.0.0.1:0`` in a subprocess (or ``argv``, a command that prints
    the same serving line, in ``cwd``); the port it chose, read off stderr."""

    def __init__(self, db, *extra, host="127.0.0.1", env=None, argv=None, cwd=ROOT):
        self.host = host
        if argv is None:
            argv = [sys.executable, "-m", "kbcite.server", "--db", str(db), "--http",
                    "%s:0" % host]
        self.proc = subprocess.Popen(
            list(argv) + list(extra), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=str(cwd), env=child_env(env))
        self.log = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError("the server exited: %s" % "".join(self.log))
            self.log.append(line)
            if line.startswith("kb-server: serving http"):
                self.port = int(line.rsplit(":", 1)[1].split("/")[0])
                break
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def text(self):
        """Everything the server logged so far."""
        return "".join(self.log)

    def wait_for_log(self, needle, count=1, timeout=TIMEOUT):
        """Wait until ``needle`` is in the log ``count`` times; the seconds it took."""
        started = time.monotonic()
        while self.text().count(needle) < count:
            if time.monotonic() - started > timeout:
                raise AssertionError("%r not logged %d times in %s s:\n%s"
                                     % (needle, count, timeout, self.text()))
            time.sleep(0.05)
        return time.monotonic() - started

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=TIMEOUT)


def connect(server, timeout=TIMEOUT):
    """A raw TCP connection to the server."""
    return socket.create_connection((server.host, server.port), timeout=timeout)


def head(server, method="POST", path="/mcp", headers=(), token=None, host=None):
    """A request head as bytes: the request line, Host, ``headers`` (pairs), the blank line."""
    lines = ["%s %s HTTP/1.1" % (method, path),
             "Host: %s" % (host or "%s:%d" % (server.host, server.port))]
    if token:
        lines.append("Authorization: Bearer %s" % token)
    lines += ["%s: %s" % pair for pair in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def read_until_closed(sock, timeout=TIMEOUT):
    """Everything the server sends until it closes the connection (or ``timeout``)."""
    sock.settimeout(timeout)
    received = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return received


def responses(data):
    """The status codes of the HTTP responses in ``data``, in order."""
    return [int(line.split(b" ")[1]) for line in data.split(b"\r\n")
            if line.startswith(b"HTTP/1.1 ")]

