"""The storage engines, and the one function that picks an engine from a store's address.

``contract`` is what every engine keeps (its primitives, its dialect, its capabilities),
``sql`` the SQL both share, a module a table; ``sqlite`` needs only the standard library;
``postgres`` needs psycopg 3 (the ``[postgres]`` extra) and is imported only when a
``postgresql://`` address is opened. Another engine is a module of its own and a row of
``ENGINES``.
"""

import importlib

from ..limits import BUSY_TIMEOUT_S

# The address forms that name a PostgreSQL store; anything else is a SQLite path.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")

# Each engine by the address forms it serves: (schemes, module, class); the first whose
# scheme starts the address, else the last row's (SQLite: any path). Its module is imported
# only when an address of it is opened (a driver may be an optional extra).
ENGINES = (
    (POSTGRES_SCHEMES, "postgres", "PostgresEngine"),
    ((), "sqlite", "SQLiteEngine"),
)


def engine_class(address):
    """The engine class that serves ``address``."""
    text = str(address)
    for schemes, module, name in ENGINES:
        if not schemes or text.startswith(schemes):
            return getattr(importlib.import_module("." + module, __name__), name)
    raise AssertionError("ENGINES ends with the engine of any path")  # pragma: no cover


def open_engine(address, *, create=False, timeout=BUSY_TIMEOUT_S, upgrading=False):
    """The storage engine for an address: PostgreSQL for ``postgresql://``, else SQLite."""
    return engine_class(address)(str(address), create=create, timeout=timeout,
                                 upgrading=upgrading)
