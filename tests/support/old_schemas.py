"""Stores taken back to an older schema, as the version before wrote them, to upgrade again."""

from kbcite import KBStore
from kbcite.engines import open_engine
from kbcite.engines.sql.sessions import SESSIONS_SQL_4
from kbcite.search.ranking import decode_body


def _drop_back(address, engine, version, statements):
    """Run ``statements`` in one write and mark the store as of schema ``version``."""
    db = open_engine(address, upgrading=True)  # a store of an older schema opens only so
    try:
        with db.write():
            for statement in statements:
                # A statement, or (statement, its values).
                db.execute(*((statement,) if isinstance(statement, str) else statement))
            if engine == "sqlite":
                db.execute("PRAGMA user_version = %d" % version)
            else:
                db.execute("UPDATE kb_meta SET value = ? WHERE key = 'schema_version'",
                           (str(version),))
    finally:
        db.close()


def as_schema_9(address, engine):
    """Take a store back to schema 9: a body's counts stored as text by term (a line
    ``term<TAB>count`` each, between newlines), no term IDs."""
    KBStore(address).close()  # a store of this schema, whole
    db = open_engine(address)
    try:
        rows = db.rows("SELECT d.pk, d.kb_pk, d.body FROM search_docs AS d ORDER BY d.pk")
        texts = []
        for row in rows:
            pairs = decode_body(bytes(row["body"]))
            names = db.search.term_names(row["kb_pk"], [i for i, _ in pairs])
            counts = {names[i]: n for i, n in pairs}
            texts.append(("\n" + "".join("%s\t%d\n" % item for item in sorted(counts.items())),
                          row["pk"]))
    finally:
        db.close()
    statements = ["ALTER TABLE search_docs ADD COLUMN body_terms TEXT NOT NULL DEFAULT ''"]
    statements += [("UPDATE search_docs SET body_terms = ? WHERE pk = ?", params)
                   for params in texts]
    statements += ["ALTER TABLE search_docs DROP COLUMN body", "DROP INDEX search_terms_id",
                   "ALTER TABLE search_terms DROP COLUMN term_id"]
    _drop_back(address, engine, 9, statements)


def as_schema_8(address, engine):
    """Take a store back to schema 8: no actor's issuer, no actor on an event, every session
    a token's."""
    as_schema_9(address, engine)
    statements = ["ALTER TABLE versions DROP COLUMN actor_issuer",
                  "ALTER TABLE proposals DROP COLUMN actor_issuer",
                  "ALTER TABLE events DROP COLUMN actor", "ALTER TABLE events DROP COLUMN "
                  "actor_issuer"]
    if engine == "sqlite":
        statements += ["CREATE TEMP TABLE sessions_kept AS SELECT * FROM sessions",
                       "DROP TABLE session_messages", "DROP TABLE sessions"]
        statements += [s for s in SESSIONS_SQL_4.split(";") if s.strip()]
        statements += ["INSERT INTO sessions SELECT * FROM temp.sessions_kept",
                       "DROP TABLE temp.sessions_kept"]
    else:
        statements.append("ALTER TABLE sessions ADD CONSTRAINT sessions_token_name_fkey "
                          "FOREIGN KEY (token_name) REFERENCES tokens(name)")
    _drop_back(address, engine, 8, statements)


def as_schema_7(address, engine):
    """Take a store back to schema 7: no vectors of the semantic half."""
    as_schema_8(address, engine)
    _drop_back(address, engine, 7, ["DROP TABLE article_vectors",
                                    "ALTER TABLE knowledge_bases DROP COLUMN vectors_written"])


def as_schema_6(address, engine):
    """Take a store back to schema 6: no grants of a team issuer's people and groups."""
    as_schema_7(address, engine)
    _drop_back(address, engine, 6, ["DROP TABLE identity_grants"])


def as_schema_5(address, engine):
    """Take a store back to schema 5: no proposals, no approver of a version."""
    as_schema_6(address, engine)
    _drop_back(address, engine, 5, ["DROP TABLE proposals",
                                    "ALTER TABLE versions DROP COLUMN approver",
                                    "ALTER TABLE tokens DROP COLUMN review",
                                    "DROP INDEX articles_changed"])


def as_schema_4(address, engine):
    """Take a store back to schema 4: no handshake sessions for the HTTP server."""
    as_schema_5(address, engine)
    _drop_back(address, engine, 4, ["DROP TABLE session_messages", "DROP TABLE sessions"])


def as_schema_3(address, engine):
    """Take a store back to schema 3: each article holds its own text, there is no history."""
    as_schema_4(address, engine)
    db = open_engine(address, upgrading=True)  # a store of an older schema opens only so
    try:
        if engine == "sqlite":
            db.foreign_keys(False)
        with db.write():
            if engine == "sqlite":
                db.execute("CREATE TABLE articles_old (pk INTEGER PRIMARY KEY, kb_pk INTEGER NOT "
                           "NULL REFERENCES knowledge_bases(pk), article_id TEXT NOT NULL, "
                           "title TEXT NOT NULL, published INTEGER NOT NULL, version_us INTEGER "
                           "NOT NULL, updated_at TEXT NOT NULL, source TEXT, import_version "
                           "TEXT, content TEXT NOT NULL, UNIQUE (kb_pk, article_id), "
                           "UNIQUE (kb_pk, source))")
                db.execute("INSERT INTO articles_old SELECT a.pk, a.kb_pk, a.article_id, "
                           "a.title, a.published, a.version_us, a.updated_at, a.source, "
                           "a.import_version, t.content FROM articles AS a JOIN texts AS t ON "
                           "t.pk = a.text_pk")
                db.execute("DROP TABLE versions")
                db.execute("DROP TABLE articles")
                db.execute("ALTER TABLE articles_old RENAME TO articles")
                db.execute("DROP TABLE texts")
                db.execute("ALTER TABLE knowledge_bases DROP COLUMN import_root")
                db.execute("PRAGMA user_version = 3")
            else:
                db.execute("ALTER TABLE articles ADD COLUMN content TEXT")
                db.execute("UPDATE articles AS a SET content = t.content FROM texts AS t "
                           "WHERE t.pk = a.text_pk")
                db.execute("ALTER TABLE articles ALTER COLUMN content SET NOT NULL")
                db.execute("DROP TABLE versions")
                db.execute("ALTER TABLE articles DROP COLUMN text_pk")
                db.execute("DROP TABLE texts")
                db.execute("ALTER TABLE knowledge_bases DROP COLUMN import_root")
                db.execute("UPDATE kb_meta SET value = '3' WHERE key = 'schema_version'")
        if engine == "sqlite":
            db.foreign_keys(True)
    finally:
        db.close()


def as_schema_2(address, engine):
    """Take a store back to schema 2, as the version before the index of titles left it."""
    as_schema_3(address, engine)
    db = open_engine(address, upgrading=True)  # a store of an older schema opens only so
    try:
        with db.write():
            if engine == "sqlite":
                for (kb_pk,) in db.execute("SELECT pk FROM knowledge_bases").fetchall():
                    db.execute("DROP TABLE fts_title_%d" % kb_pk)
                db.execute("PRAGMA user_version = 2")
            else:
                db.execute("DROP INDEX search_docs_title_tsv")
                db.execute("ALTER TABLE search_docs DROP COLUMN title_tsv")
                db.execute("UPDATE kb_meta SET value = '2' WHERE key = 'schema_version'")
    finally:
        db.close()
