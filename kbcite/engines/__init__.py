"""The storage engines, and the one function that picks an engine from a store's address.

``contract`` is what every engine keeps, ``sql`` the SQL both share; ``sqlite`` needs only
the standard library; ``postgres`` needs psycopg 3 (the ``[postgres]`` extra) and is imported
only when a ``postgresql://`` address is opened.
"""

from ..limits import BUSY_TIMEOUT_S

# The address forms that name a PostgreSQL store; anything else is a SQLite path.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_engine(address, *, create=False, timeout=BUSY_TIMEOUT_S, upgrading=False):
    """The storage engine for an address: PostgreSQL for ``postgresql://``, else SQLite."""
    text = str(address)
    if text.startswith(POSTGRES_SCHEMES):
        from .postgres import PostgresEngine  # only here: psycopg is the optional extra

        return PostgresEngine(text, create=create, timeout=timeout, upgrading=upgrading)
    from .sqlite import SQLiteEngine

    return SQLiteEngine(text, create=create, timeout=timeout, upgrading=upgrading)
