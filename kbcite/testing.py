"""What tests of the store need, for this project's tests and benchmarks and for anyone else's.

- ``FakeClock``: a store clock that stands still until moved (``KBStore(clock=...)``).
- ``dump_file``: every table of a SQLite store file as comparable text, to show that a
  refused call wrote nothing.
- ``write_lock_held``: another process holding a SQLite store's write lock.
- ``PostgresCluster``: a throwaway PostgreSQL cluster, started with the system's ``initdb``
  and ``pg_ctl`` in a temporary folder, listening on a Unix socket there and on no TCP port,
  run as the ``postgres`` user when we are root (PostgreSQL refuses to run as root), and
  deleted when done.
"""

import contextlib
import glob
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

# The day the simulation starts: the date the live tool list was fetched.
START = datetime(2026, 11, 8, 9, 0, 0, tzinfo=timezone.utc)

# Another process holding a store's write lock: BEGIN IMMEDIATE (SQLite's file lock), until
# told to let go on its standard input.
HOLD_WRITE_LOCK = """
import sys
sys.path.insert(0, sys.argv[2])
from kbcite.store import KBStore
store = KBStore(sys.argv[1])
store._db._conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
store._db._conn.execute("ROLLBACK")
"""


class FakeClock:
    """A store clock that stands still until the test sets or advances it."""

    def __init__(self, now=START):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, **delta):
        """Move the clock by ``timedelta(**delta)`` (negative steps it back); returns the time."""
        self.now += timedelta(**delta)
        return self.now

    def set(self, now):
        """Put the clock at ``now`` (an aware datetime); returns it."""
        self.now = now
        return now


def dump_file(path):
    """Every table of the SQLite database file at ``path``, as SQL text, read through a
    connection of its own."""
    from .engines.sqlite import dump

    conn = sqlite3.connect(str(path))
    try:
        return dump(conn)
    finally:
        conn.close()


@contextlib.contextmanager
def write_lock_held(path):
    """Another process holds the SQLite store's write lock until the block releases it (by
    calling what it yields) or ends."""
    root = str(Path(__file__).resolve().parent.parent)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_WRITE_LOCK, str(path), root],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    released: list[bool] = []
    stdin, stdout = holder.stdin, holder.stdout
    assert stdin is not None and stdout is not None  # both piped

    def release():
        if not released:
            released.append(True)
            stdin.write("\n")
            stdin.flush()
    try:
        if stdout.readline().strip() != "locked":
            raise RuntimeError("the lock holder did not take the write lock")
        yield release
    finally:
        release()
        stdin.close()
        holder.wait(timeout=30)


def postgres_binaries():
    """``(initdb, pg_ctl)`` of the newest PostgreSQL installed, or None."""
    for initdb in [shutil.which("initdb")] + sorted(
            glob.glob("/usr/lib/postgresql/*/bin/initdb"),
            key=lambda p: int(p.split("/")[-3]) if p.split("/")[-3].isdigit() else 0,
            reverse=True):
        if initdb and os.path.exists(os.path.join(os.path.dirname(initdb), "pg_ctl")):
            return initdb, os.path.join(os.path.dirname(initdb), "pg_ctl")
    return None


class PostgresCluster:
    """A throwaway PostgreSQL cluster on a Unix socket, run as ``postgres`` under root."""

    def __init__(self, initdb, pg_ctl, durable=False, primary=None):
        # Tests need no durability across a power cut: fsync off makes them fast. Benchmarks
        # measure a server as deployed: fsync on (and synchronous_commit, the default).
        self.durable = durable
        self.pg_ctl = pg_ctl
        self.dir = tempfile.mkdtemp(prefix="kb-pg-")
        self.data = os.path.join(self.dir, "data")
        self.as_user = []
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            import pwd

            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        if primary is None:
            self.run(initdb, "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8",
                     "--locale=C", "--no-sync")
        else:
            # A copy of the primary that keeps replaying its WAL (-R writes the standby's
            # connection settings): a hot standby, which serves reads and refuses writes.
            self.run(os.path.join(os.path.dirname(os.path.realpath(pg_ctl)), "pg_basebackup"),
                     "-D", self.data,
                     "-h", primary.dir, "-U", "postgres", "-X", "stream", "-R", "--no-sync",
                     "--checkpoint=fast")
        self.start()
        self.url = "postgresql://postgres@/postgres?host=%s" % quote(self.dir)

    def standby(self):
        """A hot standby of this cluster, streaming its changes, on a socket of its own."""
        return PostgresCluster(None, self.pg_ctl, durable=self.durable, primary=self)

    def run(self, *argv, check=True):
        """Run a PostgreSQL program as the cluster's user."""
        return subprocess.run(self.as_user + list(argv), check=check, capture_output=True,
                              timeout=120)

    def start(self):
        """Start the server (again); returns when it accepts connections."""
        options = "-k %s -c listen_addresses='' -c max_connections=60" % self.dir
        if not self.durable:
            options += " -c fsync=off"
        self.run(self.pg_ctl, "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w", "-o",
                 options, "start")

    def stop(self, mode="fast"):
        """Stop the server; ``immediate`` is an abrupt stop, as a crash would be."""
        self.run(self.pg_ctl, "-D", self.data, "-m", mode, "-w", "stop", check=False)

    def remove(self):
        """Stop the server and delete the cluster."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
