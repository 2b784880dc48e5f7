"""The SQLite engine of the knowledge-base store: one file (or memory), standard library only.

Transactions: a write is ``BEGIN IMMEDIATE``, which takes the file's one write lock at once,
so every writer of the file (not only of one knowledge base) takes turns and a knowledge
base's event sequence commits in order; a read is ``BEGIN DEFERRED``, which in WAL mode
reads one snapshot and never waits for a writer. The full-text index is one FTS5 table per
knowledge base, contentless: it is fed the store's own tokens (``search.text.tokens``), so it
matches exactly what the PostgreSQL engine matches, and is told what to forget from the
tokens ``search_docs`` keeps.
"""

import contextlib
import os
import sqlite3
import threading
import time
import urllib.parse

from ..errors import CallCancelled, NotAStore, StoreFailed, WouldWait
from ..limits import APPLICATION_ID, BUSY_TIMEOUT_S, SCHEMA_VERSION
from .contract import Engine
from .errors import busy_error, check_version, damaged_error, failed_error, read_only_error
from .sql import TableHandles
from .sqlite_fts import FTS5Index
from .sqlite_schema import MIGRATIONS, SCHEMA_SQL, STORE_TABLES

# A writer waiting for the file's lock tries again this often, so that a cancellation reaches
# it within this time.
WAIT_SLICE_MS = 50

# SQLite's primary result codes that say who is at fault (sqlite3.Error.sqlite_errorcode exists
# from Python 3.11; older ones are told by the message text instead).
BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED

# A new store's page size. An article's text is a few kilobytes: 4 KiB pages (SQLite's
# default) hold one or two and leave the rest empty, 16 KiB ones hold several. At 100,000
# articles of the benchmark's corpus the file was 358.6 MB with 4 KiB pages, 326.9 MB with
# 16 KiB ones (1.79x the raw text, where 1.96x); 294.0 MB (1.61x) once the index of titles
# and bodies kept no columns (``FTS_SQL``).
PAGE_SIZE = 16384

# Reads map up to this much of the file (``PRAGMA mmap_size``) rather than copy each page into
# the connection's 2 MB cache: a search walks the page lists of its common words, hundreds of
# pages the cache cannot keep, and mapping cut a search's processor time at 100,000 articles
# from 1.42 to 1.20 ms at the median (docs/search.md). The map is address space over the
# system's file cache, shared by every connection and worker, not memory of the process's own;
# writes still go to the WAL, and pages the WAL holds are read from it as before.
MMAP_BYTES = 1 << 30

DAMAGE_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
READONLY_CODE = 8  # SQLITE_READONLY


def sqlite_path(address):
    """The file path (or ``:memory:``) of an address: a path, or ``sqlite:///path``."""
    if address.startswith("sqlite://"):
        path = address[len("sqlite://"):]
        # sqlite:///abs/path and sqlite:///:memory: (three slashes: an empty host); four,
        # as SQLAlchemy writes an absolute path, name the same file (not a URI authority).
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        return path[1:] if path.startswith("/:memory:") else path or ":memory:"
    return address


def _uri(path, create):
    """A ``file:`` URI for ``path`` that opens it read-write, creating it only if ``create``."""
    if path.startswith("file:"):
        return path  # the caller's own URI, with whatever mode it names
    # On POSIX ``urllib.request.pathname2url`` is ``urllib.parse.quote``; urllib.request
    # itself brings http.client, ssl and email (12 ms of every start), so it is imported
    # only where its own form is needed.
    if os.name == "nt":
        from urllib.request import pathname2url
        quoted = pathname2url(os.path.abspath(path))
    else:
        quoted = urllib.parse.quote(os.path.abspath(path))
    return "file:%s?mode=%s" % (quoted, "rwc" if create else "rw")


def read_only_reason(path):
    """Why this process cannot write the SQLite file at ``path`` (a sentence's end), or None
    (and None for a file that is not there: opening it says so)."""
    if not os.path.exists(path):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "the filesystem it is on is mounted read only"
    except (AttributeError, OSError):
        pass
    if not os.access(path, os.W_OK):
        info = os.stat(path)
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            return ("the file belongs to another user (uid %d), and its mode %o lets this one "
                    "(uid %d) only read it" % (info.st_uid, info.st_mode & 0o777, os.geteuid()))
        return "the file is read only (mode %o)" % (info.st_mode & 0o777)
    if not os.access(folder, os.W_OK) and not os.path.exists(path + "-wal"):
        return "its folder %s is read only, and a write needs a journal beside it" % folder
    return None


class SQLiteEngine(FTS5Index, TableHandles, Engine):
    """A store in one SQLite file (WAL mode) or in memory."""

    name = "sqlite"
    # A read is a snapshot of a file on this machine (WAL): it waits for no lock, no network;
    # the file's change counter tells at a glance whether anything was committed.
    capabilities = frozenset({"local_reads", "data_version"})

    def __init__(self, address, *, create=False, timeout=BUSY_TIMEOUT_S, upgrading=False):
        self.path = sqlite_path(str(address))
        self.timeout = timeout
        self.interrupted = threading.Event()
        self.memory = self.path == ":memory:" or self.path.startswith("file::memory:")
        # Why this process cannot write the file (a read-only file, folder or filesystem), or
        # None: such a store opens for reading, and a write says so plainly.
        self.read_only = None if self.memory or self.path.startswith("file:") else \
            read_only_reason(self.path)
        if not self.memory and os.path.isdir(self.path):
            raise NotAStore("%s is a folder, not a store: --db names the store's file (%s, "
                            "say; kb init --db %s KB creates it)"
                            % (self.path, os.path.join(self.path, "kb.sqlite3"),
                               os.path.join(self.path, "kb.sqlite3")), path=self.path)
        try:
            self.open_tables()
            self._conn = self._connect(create)
        except sqlite3.Error as exc:
            if create:
                folder = os.path.dirname(os.path.abspath(self.path))
                raise StoreFailed("cannot create a store at %s (%s): %s" % (
                    self.path, exc, "its folder %s does not exist" % folder
                    if not os.path.isdir(folder) else "is the folder writable?"),
                    path=self.path, retryable=False) from None
            raise NotAStore("no knowledge-base store at %s (%s); create one with: kb init --db "
                            "%s KB" % (self.path, exc, self.path), path=self.path) from None
        self._conn.row_factory = sqlite3.Row
        # An in-memory store copies itself to bytes and back where sqlite3 can (3.11 on).
        if self.memory and hasattr(self._conn, "serialize"):
            self.capabilities = frozenset({"image", "local_reads", "data_version"})
        try:
            self._conn.execute("PRAGMA foreign_keys = ON")
            # Identify the file before anything could write to it: a file that is not ours is
            # refused with its bytes (journal mode included) as they were.
            self.schema = self._identify(upgrading)
            if self.schema is None:
                if not (create or self.memory):
                    raise NotAStore(
                        "%s is an empty database, not a knowledge-base store; create one with: "
                        "kb init --db %s KB" % (self.path, self.path), path=self.path)
                self._create_schema()
            if not self.memory:
                # NORMAL sync is crash-safe in WAL (a killed process loses nothing committed;
                # power loss may drop the last ones). A connection setting: nothing is written.
                self._conn.execute("PRAGMA synchronous = NORMAL")
                self._conn.execute("PRAGMA mmap_size = %d" % MMAP_BYTES)
        except BaseException:
            self._conn.close()
            raise

    # -- the file ------------------------------------------------------------------------------

    def _connect(self, create):
        """The connection: read-write where the file may be written; read only otherwise,
        and immutable where not even a WAL's shared-memory file can be made beside it."""
        if self.memory:
            return sqlite3.connect(self.path, isolation_level=None, timeout=self.timeout,
                                   check_same_thread=False)
        # An existing file this process may not write (kb init's too): opened to read, so
        # that a write is refused saying why.
        uri = _uri(self.path, create and not self.read_only)
        if self.read_only:
            folder = os.path.dirname(os.path.abspath(self.path))
            shm = self.path + "-shm"
            # A read-only folder holds no new -shm file: the file is read as it stands.
            writable = os.access(folder, os.W_OK) or (os.path.exists(shm)
                                                      and os.access(shm, os.W_OK))
            uri = uri.replace("mode=rw", "mode=ro" if writable else "mode=ro&immutable=1")
        return sqlite3.connect(uri, uri=True, isolation_level=None, timeout=self.timeout,
                               check_same_thread=False)

    def _header(self):
        """``(application_id, user_version, table names)``, read without a lock."""
        try:
            app_id = self._pragma("application_id")
            version = self._pragma("user_version")
            tables = {row[0] for row in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise NotAStore("%s is not a knowledge-base store: %s" % (self.path, exc),
                            path=self.path) from None
        return app_id, version, tables

    def _identify(self, upgrading=False):
        """The store's schema version, None for an empty database; refuses anything else."""
        app_id, version, tables = self._header()
        if app_id == 0 and version == 0 and not tables:
            return None
        if not (app_id == APPLICATION_ID or (app_id == 0 and STORE_TABLES <= tables)):
            raise NotAStore(
                "%s is not a knowledge-base store: it is another application's SQLite database "
                "(application_id %d, user_version %d, tables %s); nothing was changed"
                % (self.path, app_id, version, ", ".join(sorted(tables)[:5]) or "none"),
                path=self.path)
        check_version(self.path, version, upgrading)
        return version

    def _create_schema(self):
        """Make the empty database a store, unless another process just did (checked under lock)."""
        # Before the first table (and WAL, which fixes the page size): see PAGE_SIZE, and
        # ``optimize``, which hands the pages a merge freed back to the file system.
        self._conn.execute("PRAGMA page_size = %d" % PAGE_SIZE)
        self._conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        if not self.memory:
            # WAL lets readers run beside the one writer; it stays set in the file.
            self._conn.execute("PRAGMA journal_mode = WAL")
        with self.write():
            if self._identify() is not None:
                return
            for statement in SCHEMA_SQL.split(";"):
                if statement.strip():
                    self._conn.execute(statement)
            self._conn.execute("PRAGMA application_id = %d" % APPLICATION_ID)
            self._conn.execute("PRAGMA user_version = %d" % SCHEMA_VERSION)
        self.schema = SCHEMA_VERSION

    def upgrade_schema(self):
        """Inside ``write()``: migrate the schema; returns the knowledge-base pks to re-index."""
        found = self._pragma("user_version")
        for version in range(found, SCHEMA_VERSION):
            for statement in MIGRATIONS[version]:
                if statement.strip():
                    self._conn.execute(statement)
        kbs = [row[0] for row in self._conn.execute("SELECT pk FROM knowledge_bases")]
        if found < 2:
            for pk in kbs:  # the schema-1 index read the articles table; ours is fed tokens
                self._conn.execute("DROP TABLE IF EXISTS fts_%d" % pk)
                self.create_kb_index(pk)
        elif found < 3:
            for pk in kbs:  # the index of titles, from the title tokens search_docs holds
                self._create_title_index(pk)
                self._conn.execute(
                    "INSERT INTO fts_title_{} (rowid, title) SELECT pk, title_terms FROM "
                    "search_docs WHERE kb_pk = ? ORDER BY pk".format(int(pk)), (pk,))
                self._conn.execute("INSERT INTO fts_title_{0} (fts_title_{0}) VALUES "
                                   "('optimize')".format(int(pk)))
        if found < 4:
            broken = self._conn.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise damaged_error("the upgrade found %d row(s) naming a missing row, e.g. "
                                    "table %s" % (len(broken), broken[0][0]))
        self._conn.execute("PRAGMA application_id = %d" % APPLICATION_ID)
        self._conn.execute("PRAGMA user_version = %d" % SCHEMA_VERSION)
        return found, kbs if found < 10 else []

    # -- connection and transactions -------------------------------------------------------------

    def close(self):
        """Close the connection."""
        self._conn.close()

    def data_version(self):
        """``PRAGMA data_version`` (which moves at other connections' commits, in any process)
        with this connection's own ``total_changes``."""
        return self._pragma("data_version"), self._conn.total_changes

    def _pragma(self, name):
        """A pragma's (first) value, its statement finished (``first``)."""
        return self._conn.execute("PRAGMA " + name).fetchall()[0][0]

    def execute(self, sql, params=()):
        """Run one statement on the connection."""
        return self._conn.execute(sql, params)

    def execute_many(self, sql, rows):
        """Run one statement for each parameter tuple."""
        self._conn.executemany(sql, rows)

    def tuples(self, sql, params=()):
        """Every row of a query as a plain tuple (a cursor without the connection's Row
        factory: no object a row)."""
        cursor = self._conn.cursor()
        cursor.row_factory = None
        return cursor.execute(sql, params).fetchall()

    @contextlib.contextmanager
    def _transaction(self, mode):
        conn = self._conn
        writing = mode == "IMMEDIATE"
        try:
            if writing:
                self._begin_immediate()
            else:
                conn.execute("BEGIN " + mode)
            try:
                if writing:
                    self.stop_if_interrupted()  # cancelled while it waited for the lock
                yield self
                if writing:
                    self.stop_if_interrupted()  # cancelled while it wrote: never committed
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
        except sqlite3.ProgrammingError:
            raise  # a closed store, a misuse: the caller's bug, not the database's
        except sqlite3.Error as exc:
            if self.interrupted.is_set():  # a statement the interruption stopped
                raise CallCancelled("the call was cancelled: its transaction was rolled back "
                                    "and nothing was written") from exc
            raise self.store_error(exc) from exc

    def _begin_immediate(self):
        """``BEGIN IMMEDIATE``, waiting for another writer up to the timeout in short slices,
        so that ``interrupt()`` ends the wait (SQLite's own busy wait cannot be interrupted);
        with ``waits`` off, WouldWait at once where another writer holds the lock."""
        conn = self._conn
        deadline = time.monotonic() + self.timeout
        conn.execute("PRAGMA busy_timeout = %d" % (WAIT_SLICE_MS if self.waits else 0))
        try:
            while True:
                if self.interrupted.is_set():
                    raise CallCancelled("the call was cancelled while it waited for the "
                                        "write lock: nothing was written")
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                    if not self.waits:
                        raise WouldWait("another writer holds the write lock of %s"
                                        % self.path) from None
                    if time.monotonic() >= deadline:
                        raise
        finally:
            conn.execute("PRAGMA busy_timeout = %d" % int(self.timeout * 1000))

    def _stop_statement(self):
        """Nothing: SQLite's own interrupt is never used. It stops every statement of the
        connection until none is left running, and FTS5 keeps one of its own open between
        statements (its blob reader), so one interrupt would fail every later call on the
        connection. A wait for the write lock looks at ``interrupted`` at each slice
        (``WAIT_SLICE_MS``), and a write looks at it once it holds the lock and before its
        commit; a read waits for nothing and does bounded work."""

    def read(self):
        """``BEGIN DEFERRED``: one snapshot (WAL), no write lock."""
        return self._transaction("DEFERRED")

    def write(self):
        """``BEGIN IMMEDIATE``: the file's write lock, held to the commit. A store this process
        cannot write refuses at once, saying why."""
        if self.read_only:
            raise read_only_error(self.path, self.read_only)
        return self._transaction("IMMEDIATE")

    def lock_kb(self, kb_id):
        """The knowledge base row; BEGIN IMMEDIATE already holds the file's one write lock."""
        return self.kbs.row(kb_id)

    def new_text_pks(self, count):
        """The next ``count`` pks after the largest: the file's write lock makes them ours."""
        top = self.value("SELECT coalesce(max(pk), 0) FROM texts")
        return list(range(top + 1, top + 1 + count))

    def foreign_keys(self, enabled):
        """``PRAGMA foreign_keys`` (it cannot change inside a transaction)."""
        self._conn.execute("PRAGMA foreign_keys = %s" % ("ON" if enabled else "OFF"))

    def store_error(self, exc):
        """The ToolError for an sqlite3 exception: busy, damaged, or failed."""
        if not isinstance(exc, sqlite3.Error) or isinstance(exc, sqlite3.ProgrammingError):
            return None
        text = str(exc)
        code = getattr(exc, "sqlite_errorcode", None)
        primary = None if code is None else code & 0xFF
        if primary in BUSY_CODES or (primary is None and ("locked" in text or "busy" in text)):
            return busy_error(text)
        if primary in DAMAGE_CODES or (
                primary is None and ("malformed" in text or "not a database" in text)):
            return damaged_error(text)
        if primary == READONLY_CODE or (primary is None and "readonly database" in text):
            return read_only_error(self.path, self.read_only or read_only_reason(self.path)
                                   or text)
        return failed_error(text)

    def integrity_problems(self):
        """``PRAGMA integrity_check`` and FTS5's own check of every index."""
        problems = []
        check = self._pragma("integrity_check")
        if check != "ok":
            problems.append("integrity_check: %s" % check)
        if not self.read_only:  # FTS5's own check writes to run; the audit's others still do
            problems += self.fts_problems()
        return problems

    def dump(self):
        """Every table's rows (tests compare dumps before and after)."""
        return dump(self._conn)

    def image(self):
        """The whole in-memory database as bytes (``image``: sqlite3 serializes from 3.11)."""
        return self._conn.serialize()  # type: ignore[attr-defined]  # Python 3.11's

    def load_image(self, data):
        """Replace this in-memory database by a copy of ``image()`` bytes."""
        self._conn.deserialize(data)  # type: ignore[attr-defined]  # Python 3.11's


def dump(conn):
    """The schema and every row of every stored table of a connection, as comparable text.

    Like ``iterdump``, but it reads the full-text index through its own tables: a contentless
    FTS5 table cannot be scanned, its shadow tables can.
    """
    lines = []
    for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                                  "ORDER BY type, name").fetchall():
        lines.append(sql)
        if sql.startswith("CREATE TABLE"):
            quoted = '"%s"' % name.replace('"', '""')
            lines += [repr(tuple(row)) for row in conn.execute(
                "SELECT * FROM %s ORDER BY 1, 2" % quoted if "WITHOUT ROWID" in sql
                else "SELECT * FROM %s ORDER BY rowid" % quoted)]
    for pragma in ("application_id", "user_version"):
        lines.append("%s=%s" % (pragma, conn.execute("PRAGMA " + pragma).fetchone()[0]))
    return lines
