"""Shared fixtures: a store on a clock the test moves by hand, on each engine.

The ``store`` fixture runs every test that takes it on both engines: SQLite in memory, and
PostgreSQL in a fresh schema of a throwaway cluster that this session starts itself with
the system's ``initdb`` and ``pg_ctl`` (as the ``postgres`` user when run as root, since
PostgreSQL refuses root), on a Unix socket in a temporary folder; or of the server at
``KB_TEST_POSTGRES_URL`` when that is set. Where neither exists, the PostgreSQL half is skipped
and says why.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

import pytest

# The modules under test live at the top of the checkout; make them importable however
# pytest is started (``pytest`` alone does not put the working directory on sys.path).
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kb_store import KBStore  # noqa: E402

# The day the simulation starts: the date the live tool list was fetched.
START = datetime(2026, 11, 8, 9, 0, 0, tzinfo=timezone.utc)


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


@pytest.fixture
def clock():
    """A FakeClock at 2026-11-08T09:00:00Z that only moves when told."""
    return FakeClock()


ENGINES = ["sqlite", "postgresql"]


def _postgres_binaries():
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

    def __init__(self, initdb, pg_ctl):
        self.pg_ctl = pg_ctl
        self.dir = tempfile.mkdtemp(prefix="kb-pg-")
        self.data = os.path.join(self.dir, "data")
        self.as_user = []
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            import pwd

            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.run(initdb, "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8",
                 "--locale=C", "--no-sync")
        self.start()
        self.url = "postgresql://postgres@/postgres?host=%s" % quote(self.dir)

    def run(self, *argv, check=True):
        """Run a PostgreSQL program as the cluster's user."""
        return subprocess.run(self.as_user + list(argv), check=check, capture_output=True,
                              timeout=120)

    def start(self):
        """Start the server (again); returns when it accepts connections."""
        self.run(self.pg_ctl, "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w", "-o",
                 "-k %s -c listen_addresses='' -c fsync=off -c max_connections=60" % self.dir,
                 "start")

    def stop(self, mode="fast"):
        """Stop the server; ``immediate`` is an abrupt stop, as a crash would be."""
        self.run(self.pg_ctl, "-D", self.data, "-m", mode, "-w", "stop", check=False)

    def remove(self):
        """Stop the server and delete the cluster."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres(request):
    """``(cluster or None, base URL)`` of a PostgreSQL server for this session, or a skip."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("PostgreSQL tests skipped: psycopg is not installed "
                    "(pip install -e '.[test]' installs it)")
    url = os.environ.get("KB_TEST_POSTGRES_URL")
    if url:
        yield None, url
        return
    binaries = _postgres_binaries()
    if binaries is None:
        pytest.skip("PostgreSQL tests skipped: no initdb and pg_ctl on this machine, and "
                    "KB_TEST_POSTGRES_URL is not set")
    cluster = PostgresCluster(*binaries)
    request.addfinalizer(cluster.remove)
    yield cluster, cluster.url


def postgres_schema_url(base):
    """A fresh, empty schema on the server at ``base``; returns its store address."""
    import psycopg

    name = "t_%s" % uuid.uuid4().hex[:12]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA %s" % name)
    return base + ("&" if "?" in base else "?") + "options=" + quote("-csearch_path=%s" % name)


@pytest.fixture
def pg_url(postgres):
    """The address of a fresh, empty PostgreSQL schema for one test."""
    return postgres_schema_url(postgres[1])


@pytest.fixture(params=ENGINES)
def engine(request):
    """The engine a store test runs on."""
    return request.param


@pytest.fixture
def address(request, engine):
    """An address for a new store on the test's engine."""
    if engine == "sqlite":
        return ":memory:"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(address, clock):
    """A new KBStore on each engine, driven by ``clock``."""
    with KBStore(address, clock=clock, create=True) as kb_store:
        yield kb_store


@pytest.fixture
def db_path(tmp_path):
    """Path of a not-yet-created database file in the test's temporary directory."""
    return str(tmp_path / "kb.db")


@pytest.fixture
def file_store(db_path, clock):
    """A KBStore on the file ``db_path`` (WAL mode), driven by ``clock``."""
    with KBStore(db_path, clock=clock, create=True) as kb_store:
        yield kb_store
