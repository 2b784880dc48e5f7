"""A throwaway PostgreSQL cluster for the tests and the benchmarks.

Started with the system's ``initdb`` and ``pg_ctl`` in a temporary folder, listening on a Unix
socket there and on no TCP port, run as the ``postgres`` user when we are root (PostgreSQL
refuses to run as root), and deleted when done.
"""

import glob
import os
import shutil
import subprocess
import tempfile
from urllib.parse import quote


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


def server_for(url=None):
    """``(base URL, cleanup, None)`` of a PostgreSQL server to measure: ``url``, or a durable
    throwaway cluster; ``(None, None, reason)`` where there is neither."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return None, None, "psycopg is not installed (pip install 'kb-citations[postgres]')"
    if url:
        return url, lambda: None, None
    binaries = postgres_binaries()
    if binaries is None:
        return None, None, "no initdb and pg_ctl here, and no --postgres URL was given"
    cluster = PostgresCluster(*binaries, durable=True)
    return cluster.url, cluster.remove, None
