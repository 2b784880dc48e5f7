"""kb-server over Streamable HTTP in a subprocess, for the HTTP and SDK tests."""

import subprocess
import sys
import threading
import time

from .commands import ROOT, child_env

# Every wait on the server is bounded, so a hung server fails its test instead of the suite.
TIMEOUT = 30

class Server:
    """``kb-server --http 127.0.0.1:0`` in a subprocess; the port it chose, read off stderr."""

    def __init__(self, db, *extra):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kbcite.server", "--db", str(db), "--http",
             "127.0.0.1:0"] + list(extra), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=str(ROOT), env=child_env())
        self.log = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError("the server exited: %s" % "".join(self.log))
            self.log.append(line)
            if line.startswith("kb-server: serving http://"):
                self.port = int(line.rsplit(":", 1)[1].split("/")[0])
                break
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=TIMEOUT)
