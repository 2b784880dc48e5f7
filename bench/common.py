"""Helpers shared by the benchmarks: statistics, load, machine facts and Markdown tables."""

import os
import platform
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The package lives at the top of the checkout; `python bench/run.py` puts only bench/ on
# sys.path.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The benchmarks measure the lexical search (as every earlier figure did) unless one asks for
# the semantic half itself (search.py's and search_quality.py's "ours hybrid"); the servers
# and commands they start inherit this.
os.environ.setdefault("KBCITE_SEMANTIC", "off")

from kbcite.sim.report import markdown_table  # noqa: E402  (after the path above)
from kbcite.testing import PostgresCluster, postgres_binaries  # noqa: E402

# What a measurement depends on: a change there that is not committed makes the figures
# belong to no commit, and code_version says so.
MEASURED = ("kbcite", "kb_store.py", "sim.py", "bench")


def child_env():
    """The environment for a command a benchmark starts: this checkout first on its path."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))


def store_address(engine, directory, name, postgres_url=None):
    """Where a benchmark's new store goes: a file in ``directory``, or a fresh PostgreSQL
    schema named after ``name`` in the database at ``postgres_url``."""
    if engine == "sqlite":
        return os.path.join(directory, name + ".db")
    from kbcite.engines.postgres import schema_address

    return schema_address(postgres_url, "bench_" + name, fresh=True)


def schema_of(address):
    """The schema a ``store_address`` of PostgreSQL names (``...search_path%3Dname``)."""
    return address.rsplit("%3D", 1)[1]


def drop_store(engine, address, postgres_url=None):
    """Remove a benchmark's PostgreSQL schema (files go with their temporary folder)."""
    if engine == "postgresql":
        from kbcite.engines.postgres import drop_schema

        drop_schema(postgres_url, schema_of(address))


def store_mb(engine, address, postgres_url=None):
    """A store's size on disk in MB: the file (WAL checkpointed), or every table and index of
    its PostgreSQL schema."""
    if engine == "sqlite":
        return round(os.path.getsize(address) / 1e6, 1)
    import psycopg

    schema = schema_of(address)
    with psycopg.connect(postgres_url) as conn:
        size = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "AND c.relkind IN ('r', 'm')", (schema,)).fetchone()[0]
    return round(int(size) / 1e6, 1)


def postgres_version(url):
    """The server's version string, e.g. "PostgreSQL 15.18"."""
    import psycopg

    with psycopg.connect(url) as conn:
        return " ".join(conn.execute("SELECT version()").fetchone()[0].split()[:2])


def median(values):
    """The median of a non-empty sequence of numbers."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        raise ValueError("median of no values")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def percentile(values, p):
    """The ``p``-th percentile (0-100) by the nearest-rank method: a value that was observed."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    rank = max(1, -(-len(ordered) * p // 100))  # ceil(n * p / 100), at least 1
    return ordered[min(int(rank), len(ordered)) - 1]


def load():
    """The 1-minute load average (``None`` where the platform has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def machine():
    """Facts about the machine the numbers come from."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
    }


def code_version():
    """The checkout's commit, and which measured modules differ from it (``None`` without git)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=str(ROOT),
                              capture_output=True, timeout=30)
        status = subprocess.run(["git", "status", "--porcelain", "--"] + list(MEASURED),
                                cwd=str(ROOT), capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    changed = sorted(line[3:].strip() for line in status.stdout.decode("utf-8").splitlines())
    return {"commit": head.stdout.decode("utf-8").strip(), "uncommitted": changed}


# The simulation's own tables, so every table in the README has one look.
table = markdown_table


def n(value):
    """An integer with thousands separators."""
    return "{:,}".format(value)

def server_for(url=None):
    """``(base URL, cleanup, None)`` of a PostgreSQL server to measure: ``url``, or a durable
    throwaway cluster; ``(None, None, reason)`` where there is neither."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return None, None, "psycopg is not installed (pip install 'kbcite[postgres]')"
    if url:
        return url, lambda: None, None
    binaries = postgres_binaries()
    if binaries is None:
        return None, None, "no initdb and pg_ctl here, and no --postgres URL was given"
    cluster = PostgresCluster(*binaries, durable=True)
    return cluster.url, cluster.remove, None
