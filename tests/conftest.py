"""Shared fixtures: a store on a clock the test moves by hand, on each engine.

The ``store`` fixture runs every test that takes it on both engines: SQLite in memory, and
PostgreSQL in a fresh schema of a throwaway cluster that this session starts itself with
the system's ``initdb`` and ``pg_ctl`` (as the ``postgres`` user when run as root, since
PostgreSQL refuses root), on a Unix socket in a temporary folder; or of the server at
``KB_TEST_POSTGRES_URL`` when that is set. Where neither exists, the PostgreSQL half is skipped
and says why.
"""

import json
import os
import sys
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest

# This checkout's package, however pytest is started (``pytest`` alone does not put the
# working directory on sys.path, and an unpacked sdist must test its own copy).
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The suite's stores search lexically, whatever is installed: the tiers' guarantees are what
# most tests check, and the processes they start inherit this. The semantic half's tests
# (tests/test_semantic.py) turn it on for their own stores and servers.
os.environ["KBCITE_SEMANTIC"] = "off"

from kbcite.store import KBStore  # noqa: E402
from kbcite.testing import (  # noqa: E402
    FakeClock, PostgresCluster, postgres_binaries, write_lock_held,
)
from support.http_server import Server  # noqa: E402
from support.stdio_client import Client, check_jsonrpc, make_db  # noqa: E402


@pytest.fixture
def clock():
    """A FakeClock at 2026-11-08T09:00:00Z that only moves when told."""
    return FakeClock()


# Under ``pytest -n`` (the README's command) a module-scoped fixture is set up once in every
# worker process that runs a test taking it: the 200-seed run, the built wheel, the npm
# installs, a browser. Such tests are kept on one worker (xdist's loadgroup, pyproject's
# addopts); the rest go wherever a worker is free (tests/test_workers.py checks it).
SHARED_SCOPES = ("module", "package", "class")


def _shares_a_fixture(item):
    """Whether the test takes a fixture set up once for its whole module."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope in SHARED_SCOPES
               for defs in info.name2fixturedefs.values())


def _group(config, item, name):
    """Put ``item`` in xdist's group ``name``: its marker, and in a worker of ``--dist
    loadgroup`` the ``@name`` its node ID ends with, which is what the scheduler reads."""
    item.add_marker(pytest.mark.xdist_group(name))
    node_id = getattr(item, "_id", None)
    if getattr(config.option, "loadgroup", False) and node_id is not None \
            and "@" not in str(node_id):
        # pytest 9 keeps a node's ID as a NodeId in ``_id``, where pytest-xdist (3.8) still
        # writes the suffix to ``_nodeid``, which pytest 9 no longer reads: written here.
        item._id = type(node_id).parse("%s@%s" % (node_id, name))


# First, before pytest-xdist's own hook: it suffixes the node IDs of the tests marked by then.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Keep a module's tests that share a module fixture on one worker, and start the long
    ones first, so that no worker is left with a long test at the end (docs/development.md).

    The order changes nothing a test sees: each module's sharing tests stay together and in
    order, and the others take no fixture wider than the session's.
    """
    slow = {id(item): item.get_closest_marker("slow") is not None for item in items}
    shared = {}  # module name: whether any of its sharing tests is slow
    for item in items:
        if _shares_a_fixture(item):
            _group(config, item, item.module.__name__)
            name = item.module.__name__
            shared[name] = shared.get(name, False) or slow[id(item)]

    def rank(item):
        # A module's sharing tests take one rank, so they stay together (its fixture is set
        # up once in a run without -n too).
        name = item.module.__name__ if _shares_a_fixture(item) else None
        if name is not None:
            return 0 if shared[name] else 2
        return 1 if slow[id(item)] else 3
    items[:] = [item for _, item in sorted(((rank(item), i), item)
                                           for i, item in enumerate(items))]


ENGINES = ["sqlite", "postgresql"]


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
    binaries = postgres_binaries()
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
def kb(request, store):
    """The store with one empty knowledge base: the test module's ``KB``."""
    store.create_knowledge_base(request.module.KB)
    return store


@pytest.fixture
def db_path(tmp_path):
    """Path of a not-yet-created database file in the test's temporary directory."""
    return str(tmp_path / "kb.db")


@pytest.fixture
def file_store(db_path, clock):
    """A KBStore on the file ``db_path`` (WAL mode), driven by ``clock``."""
    with KBStore(db_path, clock=clock, create=True) as kb_store:
        yield kb_store


@pytest.fixture
def hold_write_lock():
    """``with hold_write_lock(path) as release:`` another process holds the write lock."""
    return write_lock_held


# -- the MCP server over stdio ------------------------------------------------------------------


@pytest.fixture
def db(tmp_path):
    """A store file with knowledge base ``support`` (two articles and a draft) and
    ``internal``, as ``support.stdio_client.make_db`` makes it."""
    return make_db(tmp_path / "kb.db")


@pytest.fixture
def start():
    """Start servers; at teardown, every line each one wrote must be a JSON-RPC message."""
    clients = []

    def _start(*args, **kwargs):
        client = Client(*args, **kwargs)
        clients.append(client)
        return client

    yield _start
    for client in clients:
        client.kill()
        for line in client.lines:
            check_jsonrpc(json.loads(line.decode("utf-8")))


# -- the MCP server over HTTP -------------------------------------------------------------------


@pytest.fixture
def server(served):
    """``server(*flags)`` starts kb-server over HTTP on the test module's ``served`` store;
    every one started is stopped after the test."""
    started = []

    def start(*extra, **kwargs):
        s = Server(served.path, *extra, **kwargs)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()
