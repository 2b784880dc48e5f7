# The address forms that name a PostgreSQL store; anything else is a SQLite path.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_engine(address, *, create=False, timeout=BUSY_TIMEOUT_S, upgrading=False):
    """The storage engine for an address: PostgreSQL for ``postgresql://``, else SQLite."""
    text = str(address)
    if text.startswith(POSTGRES_SCHEMES):
        import kb_postgres  # only here: psycopg is the optional [postgres] extra

        return kb_postgres.PostgresEngine(text, create=create, timeout=timeout,
                                          upgrading=upgrading)
    import kb_sqlite

    return kb_sqlite.SQLiteEngine(text, create=create, timeout=timeout, upgrading=upgrading)
