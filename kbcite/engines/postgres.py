"""The PostgreSQL engine of the knowledge-base store: one database (or schema) many machines share.

Needs psycopg 3, the ``[postgres]`` extra (``pip install 'kbcite[postgres]'``); it is
imported only when a ``postgresql://`` address is opened. The address is any libpq URL,
``postgresql://user@host:5432/db`` or a Unix socket ``postgresql:///db?host=/run/postgresql``;
a store lives in the first schema of the connection's ``search_path`` (``options=-csearch_path=X``
in the URL picks another), so one database can hold several stores.

What gives each guarantee:

- **Writes of one knowledge base take turns.** Every write transaction (READ COMMITTED) first
  locks the knowledge base's row, ``SELECT ... FOR UPDATE``, and holds it to the commit. The
  compare-and-swap, the event, the idempotency row and the search statistics of one tool call
  then commit together or not at all, with no other writer of that knowledge base in between.
  Writers of other knowledge bases do not wait: the lock is the row, not the table.
- **The event sequence commits in order.** The next sequence number is taken from the locked
  row (``head_sequence + 1``), not from a SEQUENCE: a writer cannot take number N+1 until the
  writer of N has committed and let the row go, so a poller that has read up to N never later
  finds an event below N appear. A SEQUENCE hands out numbers at once and commits them in any
  order; it is not used.
- **The same idempotency key sent at once through many connections is written once.** The
  second call waits on the row lock, then reads the key the first one committed (READ
  COMMITTED sees it) and replays.
- **Reads see one moment.** A read runs in REPEATABLE READ, READ ONLY: a search's hits, their
  versions and the ``head_sequence`` it returns come from one snapshot; it takes no lock a
  writer waits for.
- **Waiting is bounded.** ``lock_timeout`` is the store's timeout: a writer that cannot get the
  row within it gets ``store_busy``. A lost connection (the server restarted) is
  ``store_failed``, retryable; the next call connects again.

Full-text search: each published article's row in ``search_docs`` carries a ``tsvector`` of its
tokens (the store's own, ``search.text.tokens``, not a PostgreSQL dictionary, so the same words
match as on SQLite) and one of its title's tokens, each under a GIN index. Every lexeme is
prefixed with the knowledge base's key (``17:refund``), so one knowledge base's query never
visits another's.
"""

import contextlib
import re
import threading

from ..errors import CallCancelled, NotAStore, StoreFailed
from ..limits import APPLICATION_ID, BUSY_TIMEOUT_S, SCHEMA_VERSION
from .contract import Engine, spelled_for
from .errors import busy_error, check_version, damaged_error, failed_error, standby_error
from .postgres_fts import TsvectorIndex
from .postgres_schema import MIGRATIONS, SCHEMA_SQL, TABLES
from .sql import TABLES as TABLE_CLASSES
from .sql import TableHandles
from .sql.history import VERSION_COLUMNS, HistorySQL
from .sql.knowledge_bases import KB_COLUMNS

try:
    import psycopg
    import psycopg.sql
    from psycopg.rows import dict_row, tuple_row
except ImportError:  # the [postgres] extra is not installed; said when a store is opened
    psycopg = None  # type: ignore[assignment]

# PostgreSQL's identifier limit (bytes, with the terminator): a channel name is cut to fit.
NAMEDATALEN = 64

# SQLSTATE classes and codes, and what they mean to a caller.
BUSY_STATES = ("55P03", "40001", "40P01", "57014")  # lock timeout, serialization, deadlock, cancel
DAMAGE_STATES = ("XX001", "XX002")  # data corrupted, index corrupted
READ_ONLY_STATE = "25006"  # a write on a hot standby or in a read-only transaction


class PostgresHistorySQL(HistorySQL):
    """The history, where PostgreSQL looks versions up by pairs its own way."""

    def at(self, pairs):
        """``{(article_pk, version_us): row}``: the pairs as two arrays, one statement."""
        pairs = sorted(set(pairs))
        if not pairs:
            return {}
        return {(row["article_pk"], row["version_us"]): row for row in self.db.rows(
            "SELECT %s FROM versions WHERE (article_pk, version_us) IN (SELECT * FROM "
            "unnest(?::bigint[], ?::bigint[]))" % ", ".join(VERSION_COLUMNS),
            ([p for p, _ in pairs], [v for _, v in pairs]))}


class PostgresEngine(TsvectorIndex, TableHandles, Engine):
    """A store in a PostgreSQL database (the first schema of its search_path)."""

    name = "postgresql"
    capabilities = frozenset({"listen"})
    # psycopg takes %s (statements are converted once, and cached) and binds lists as arrays.
    placeholder = "%s"
    arrays = True
    search_doc_extra = (("tsv", "?::tsvector"), ("title_tsv", "?::tsvector"))
    table_classes = dict(TABLE_CLASSES, history=PostgresHistorySQL)

    def __init__(self, address, *, create=False, timeout=BUSY_TIMEOUT_S, upgrading=False):
        if psycopg is None:
            raise NotAStore("%s is a PostgreSQL address, and PostgreSQL stores need psycopg 3: "
                            "pip install 'kbcite[postgres]'" % _safe(address),
                            path=_safe(address))
        self.address = address
        self.timeout = timeout
        self.interrupted = threading.Event()
        self._sql = {}
        self._conn = None
        self._channel_name = None
        self.open_tables()
        self._connect()
        try:
            self.schema = self._identify(upgrading)
            if self.schema is None:
                if not create:
                    raise NotAStore(
                        "%s is an empty database, not a knowledge-base store; create one with: "
                        "kb init --db URL KB" % _safe(address), path=_safe(address))
                self._create_schema()
        except BaseException:
            self._conn.close()
            raise

    # -- the connection --------------------------------------------------------------------------

    def _connect(self):
        """Connect (again, after a lost connection); a failure is store_failed."""
        try:
            self._conn = psycopg.connect(self.address, autocommit=True, row_factory=dict_row,
                                         connect_timeout=max(1, int(self.timeout)))
            self._conn.execute("SET lock_timeout = %d" % int(self.timeout * 1000))
        except psycopg.Error as exc:
            raise StoreFailed(
                "cannot connect to the PostgreSQL store %s (%s); retry once it is reachable"
                % (_safe(self.address), _first_line(exc)), retryable=True) from None

    def close(self):
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()

    # -- waking the watchers of the event log ------------------------------------------------

    def _channel(self):
        """The NOTIFY channel of this store: one a schema, so that stores sharing a database
        do not wake each other's watchers."""
        if self._channel_name is None:
            schema = self.value("SELECT current_schema()") or "public"
            self._channel_name = ("kbcite_events_" + schema)[:NAMEDATALEN - 1]
        return self._channel_name

    def events_notify(self, kb_pk, sequence):
        """NOTIFY the store's channel inside the write: listeners hear it at commit, and two
        commits' payloads differ, so none is folded into another."""
        self.execute("SELECT pg_notify(?, ?)", (self._channel(), "%d:%d" % (kb_pk, sequence)))

    def change_waiter(self):
        """A listening connection of its own (``ChangeWaiter``); StoreFailed where LISTEN is
        refused (a hot standby cannot listen) or the server cannot be reached."""
        return ChangeWaiter(self.address, self._channel(), self.timeout)

    def _convert(self, sql):
        converted = self._sql.get(sql)
        if converted is None:
            converted = self._sql[sql] = spelled_for(sql, self.placeholder)
        return converted

    def execute(self, sql, params=()):
        """Run one statement (written with ``?``) on the connection."""
        return self._conn.execute(self._convert(sql), params)

    def execute_many(self, sql, rows):
        """Run one statement for each parameter tuple, in one round trip where psycopg can."""
        with self._conn.cursor() as cursor:
            cursor.executemany(self._convert(sql), rows)

    def tuples(self, sql, params=()):
        """Every row of a query as a tuple (a cursor of psycopg's tuple rows, not dicts)."""
        with self._conn.cursor(row_factory=tuple_row) as cursor:
            cursor.execute(self._convert(sql), params)
            return cursor.fetchall()

    @contextlib.contextmanager
    def _transaction(self, begin, writing=False):
        if self._conn.closed or self._conn.broken:
            self._connect()
        try:
            self._conn.execute(begin)
            try:
                yield self
                if writing:
                    self.stop_if_interrupted()  # cancelled while it wrote: never committed
                self._conn.execute("COMMIT")
            except BaseException:
                if not (self._conn.closed or self._conn.broken):
                    with contextlib.suppress(psycopg.Error):
                        self._conn.execute("ROLLBACK")
                raise
        except psycopg.Error as exc:
            if writing and self.interrupted.is_set():  # the statement the cancel stopped
                raise CallCancelled("the call was cancelled: its transaction was rolled back "
                                    "and nothing was written") from exc
            error = self.store_error(exc)
            if error is None:
                raise  # a bug in a statement, not the database's fault: the store reports it
            raise error from exc

    def read(self):
        """REPEATABLE READ, READ ONLY: one snapshot, no lock a writer waits for."""
        return self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")

    def write(self):
        """READ COMMITTED; ``lock_kb`` then serialises the writers of one knowledge base."""
        return self._transaction("BEGIN ISOLATION LEVEL READ COMMITTED", writing=True)

    def _stop_statement(self):
        """Cancel the statement running on this connection (a lock wait included): the
        transaction fails and rolls back."""
        with contextlib.suppress(Exception):
            cancel = getattr(self._conn, "cancel_safe", None) or self._conn.cancel
            cancel()

    def lock_kb(self, kb_id):
        """The knowledge base row, locked (FOR UPDATE) until the transaction ends; a call
        cancelled while it waited stops here."""
        row = self.row("SELECT %s FROM knowledge_bases WHERE kb_id = ? FOR UPDATE"
                       % KB_COLUMNS, (kb_id,))
        self.stop_if_interrupted()
        return row

    def new_text_pks(self, count):
        """``count`` pks taken from the texts sequence at once (increasing)."""
        return [row["pk"] for row in self._conn.execute(
            "SELECT nextval(pg_get_serial_sequence('texts', 'pk')) AS pk FROM "
            "generate_series(1, %s) ORDER BY 1", (count,)).fetchall()]

    def lock_new_kb(self):
        """Inside ``write()``: make creations of knowledge bases take turns (a unique ID check
        then holds until the commit)."""
        self.execute("LOCK TABLE knowledge_bases IN SHARE ROW EXCLUSIVE MODE")

    def store_error(self, exc):
        """The ToolError for a psycopg exception, by its SQLSTATE."""
        if psycopg is None or not isinstance(exc, psycopg.Error):
            return None
        state = getattr(exc, "sqlstate", None) or ""
        text = _first_line(exc)
        if state in BUSY_STATES:
            return busy_error(text, "the PostgreSQL store")
        if state in DAMAGE_STATES:
            return damaged_error(text, "the PostgreSQL store")
        if state == READ_ONLY_STATE:
            return standby_error(_safe(self.address), text)
        if isinstance(exc, psycopg.OperationalError) or state.startswith(("08", "57", "53")):
            return failed_error(text, "the PostgreSQL store")
        if isinstance(exc, psycopg.InterfaceError):
            return failed_error(text, "the PostgreSQL store")
        return None

    # -- the schema ------------------------------------------------------------------------------

    def _identify(self, upgrading=False):
        """The store's schema version, None for an empty schema; refuses anything else."""
        try:
            tables = {row["table_name"] for row in self._conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()").fetchall()}
            where = self._conn.execute("SELECT current_schema() AS s").fetchone()["s"]
        except psycopg.Error as exc:
            raise StoreFailed("cannot read the PostgreSQL store %s (%s)" % (
                _safe(self.address), _first_line(exc)), retryable=True) from None
        if where is None:
            raise NotAStore("%s has no schema to hold a store (the search_path names none that "
                            "exists)" % _safe(self.address), path=_safe(self.address))
        if not tables:
            return None
        meta = {}
        if "kb_meta" in tables:
            meta = {row["key"]: row["value"] for row in self._conn.execute(
                "SELECT key, value FROM kb_meta").fetchall()}
        if meta.get("application_id") != str(APPLICATION_ID):
            raise NotAStore(
                "%s is not a knowledge-base store: schema %s holds other tables (%s); nothing "
                "was changed" % (_safe(self.address), where, ", ".join(sorted(tables)[:5])),
                path=_safe(self.address))
        version = int(meta.get("schema_version", 0))
        check_version(_safe(self.address), version, upgrading)
        return version

    def _create_schema(self):
        """Make the empty schema a store, unless another connection just did (under a lock)."""
        with self.write():
            # Two inits at once: the advisory lock makes the second wait and then find a store.
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (APPLICATION_ID,))
            if self._identify() is not None:
                return
            for statement in SCHEMA_SQL.split(";"):
                if statement.strip():
                    self._conn.execute(statement)
            self._conn.execute("INSERT INTO kb_meta (key, value) VALUES ('application_id', %s), "
                               "('schema_version', %s)", (str(APPLICATION_ID),
                                                          str(SCHEMA_VERSION)))
        self.schema = SCHEMA_VERSION

    def upgrade_schema(self):
        """Inside ``write()``: migrate the schema (PostgreSQL stores began at schema 2);
        returns the knowledge-base pks to re-index."""
        found = self.schema
        for version in range(found, SCHEMA_VERSION):
            for statement in MIGRATIONS[version]:
                if statement.strip():
                    self._conn.execute(statement)
        self._conn.execute("UPDATE kb_meta SET value = %s WHERE key = 'schema_version'",
                           (str(SCHEMA_VERSION),))
        self.schema = SCHEMA_VERSION
        kbs = [row["pk"] for row in self._conn.execute("SELECT pk FROM knowledge_bases")]
        return found, kbs if found < 10 else []

    def dump(self):
        """Every row of every table of ours, in key order (tests compare dumps)."""
        lines = []
        for table in TABLES:
            for row in self._conn.execute("SELECT * FROM %s ORDER BY 1, 2" % table).fetchall():
                lines.append("%s %r" % (table, tuple(str(v) for v in row.values())))
        return lines


class ChangeWaiter:
    """A connection that LISTENs on the store's channel, for the event log's watcher: ``wait``
    returns at the first commit that wrote events, or after its timeout (the watcher reads the
    heads either way, so a notification lost with a connection costs a timeout, nothing more).
    """

    def __init__(self, address, channel, timeout):
        try:
            self._conn = psycopg.connect(address, autocommit=True,
                                         connect_timeout=max(1, int(timeout)))
            # LISTEN takes effect at once in autocommit: what commits after this wakes us.
            self._conn.execute(psycopg.sql.SQL("LISTEN {}").format(
                psycopg.sql.Identifier(channel)))
        except psycopg.Error as exc:
            if getattr(self, "_conn", None) is not None:
                self._conn.close()
            raise StoreFailed("cannot LISTEN for the event log's commits on %s (%s); the "
                              "watcher polls instead" % (_safe(address), _first_line(exc)),
                              retryable=True) from None

    def wait(self, timeout):
        """Whether a commit wrote events before ``timeout`` seconds passed (those already
        waiting are all taken)."""
        try:
            woke = any(True for _ in self._conn.notifies(timeout=timeout, stop_after=1))
            if woke:
                for _ in self._conn.notifies(timeout=0.0):
                    pass
            return woke
        except psycopg.Error as exc:
            raise StoreFailed("the connection listening for the event log's commits failed "
                              "(%s)" % _first_line(exc), retryable=True) from None

    def close(self):
        """Stop listening."""
        self._conn.close()


def schema_address(base, name, fresh=False):
    """The address of store schema ``name`` in the database at ``base`` (made, or with
    ``fresh`` made anew and empty), for one database to hold several stores."""
    if psycopg is None:
        raise NotAStore("PostgreSQL stores need psycopg 3: pip install 'kbcite[postgres]'")
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ValueError("a schema name is lower-case letters, digits and _, got %r" % name)
    try:
        with psycopg.connect(base, autocommit=True) as conn:
            if fresh:
                conn.execute("DROP SCHEMA IF EXISTS %s CASCADE" % name)
            conn.execute("CREATE SCHEMA IF NOT EXISTS %s" % name)
    except psycopg.Error as exc:
        raise StoreFailed("cannot make schema %s in %s (%s)" % (name, _safe(base),
                                                               _first_line(exc)),
                          retryable=True) from None
    return base + ("&" if "?" in base else "?") + "options=-csearch_path%3D" + name


def drop_schema(base, name):
    """Remove schema ``name`` and everything in it from the database at ``base``."""
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS %s CASCADE" % name)


def _first_line(exc):
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _safe(address):
    """The address without its password, for messages and logs."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", str(address))
