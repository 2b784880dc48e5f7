"""The SQLite store's schema: its tables as SQL (its full-text tables too), and the migrations
from each older schema."""

from .sql.articles import ARTICLES_CHANGED_SQL
from .sql.grants import GRANTS_SQL
from .sql.proposals import PROPOSALS_SQL, PROPOSALS_SQL_6
from .sql.sessions import SESSIONS_SQL, SESSIONS_SQL_4
from .sql.tokens import TOKENS_REVIEW_SQL, TOKENS_SQL, TOKENS_SQL_5
from .sql.vectors import VECTORS_COUNTER_SQL, VECTORS_SQL

ARTICLES_SQL = """
CREATE TABLE {name} (
    pk INTEGER PRIMARY KEY,
    kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk),
    article_id TEXT NOT NULL,
    title TEXT NOT NULL,
    published INTEGER NOT NULL,
    version_us INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    -- The file an import made it from, and the version that import wrote (or found equal to
    -- the file): a later version means someone edited it since, and import leaves it alone.
    source TEXT,
    import_version TEXT,
    -- The current version's text.
    text_pk INTEGER NOT NULL REFERENCES texts(pk),
    UNIQUE (kb_pk, article_id),
    UNIQUE (kb_pk, source)
)"""
# Every version an article has had, in the transaction of the change that made it: who made it
# and how, and the event agents saw (none for a draft's save). A pruned version keeps its row
# (so a read of it says it was pruned) and loses its text (text_pk NULL).
VERSIONS_SQL = """
CREATE TABLE versions (
    article_pk INTEGER NOT NULL REFERENCES articles(pk),
    version_us INTEGER NOT NULL,
    kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk),
    updated_at TEXT NOT NULL,
    action TEXT NOT NULL,
    sequence INTEGER,
    event TEXT,
    published INTEGER NOT NULL,
    title TEXT NOT NULL,
    text_pk INTEGER REFERENCES texts(pk),
    bytes INTEGER NOT NULL,
    actor TEXT,
    summary TEXT,
    -- Who approved it, for an agent's proposal a person approved (writes mode review).
    approver TEXT,
    -- The actor's issuer (schema 9), the team issuer that vouched for them, NULL for a kb
    -- token, a person at the command line, the stdio server's --actor (no issuer).
    actor_issuer TEXT,
    PRIMARY KEY (article_pk, version_us)
) WITHOUT ROWID"""
# The versions table as schema 4 made it (schema 6 added the approver, 9 the actor's issuer).
VERSIONS_SQL_4 = "\n".join(line for line in VERSIONS_SQL.split("\n")
                           if "approver" not in line and "approved it" not in line
                           and "issuer" not in line)

# knowledge_bases.import_root: the folder the last import read (made absolute), for the guard
# on --prune. (A comment inside that column's line would break SQLite's DROP COLUMN.)
CORE_SQL = """
CREATE TABLE knowledge_bases (
    pk INTEGER PRIMARY KEY,
    kb_id TEXT NOT NULL UNIQUE,
    name TEXT,
    head_sequence INTEGER NOT NULL DEFAULT 0,
    published_count INTEGER NOT NULL DEFAULT 0,
    articles_created INTEGER NOT NULL DEFAULT 0,
    -- Token totals of the published articles' titles and bodies: BM25's average lengths.
    title_tokens INTEGER NOT NULL DEFAULT 0,
    body_tokens INTEGER NOT NULL DEFAULT 0,
    import_root TEXT,
    vectors_written INTEGER NOT NULL DEFAULT 0
);
-- Every text an article has had, each stored once: a version that keeps its text (a publish,
-- an unpublish, a retitle, a revert) points at the text it shares. Its own table, so that
-- reading an article's small columns never walks a long text's overflow pages.
CREATE TABLE texts (
    pk INTEGER PRIMARY KEY,
    kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk),
    bytes INTEGER NOT NULL,
    content TEXT NOT NULL
);
""" + ARTICLES_SQL.format(name="articles") + ";" + VERSIONS_SQL + """;
CREATE TABLE events (
    kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk),
    sequence INTEGER NOT NULL,
    type TEXT NOT NULL,
    article_id TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    -- Who made an event no version records (an article.deleted: its history goes with the
    -- article), and their issuer (schema 9). The others' actors are their versions'.
    actor TEXT,
    actor_issuer TEXT,
    PRIMARY KEY (kb_pk, sequence)
) WITHOUT ROWID;
CREATE TABLE idempotency (
    kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk),
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    result TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    PRIMARY KEY (kb_pk, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_age ON idempotency (kb_pk, created_us);
""" + ARTICLES_CHANGED_SQL + """;
"""
# Each published article's search statistics: its title's tokens, its body's counts by term ID
# (``kbcite.search.ranking``'s stored form), both lengths; and each term's ID and article
# counts (the IDs indexed too: an edit reads back the terms of the body it replaces).
SEARCH_DOCS_SQL = """
CREATE TABLE search_docs (
    pk INTEGER PRIMARY KEY REFERENCES articles(pk),
    kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk),
    title_terms TEXT NOT NULL,
    title_len INTEGER NOT NULL,
    body BLOB NOT NULL,
    body_len INTEGER NOT NULL
);
CREATE TABLE search_terms (
    kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk),
    term TEXT NOT NULL,
    df_title INTEGER NOT NULL,
    df_body INTEGER NOT NULL,
    term_id INTEGER NOT NULL,
    PRIMARY KEY (kb_pk, term)
) WITHOUT ROWID;
CREATE UNIQUE INDEX search_terms_id ON search_terms (kb_pk, term_id)"""
SEARCH_SQL = """
-- Search: what ranking needs of each published article, per-term article counts, and each
-- title's terms ordered by title length (the any-word tier's best title candidates first).
""" + SEARCH_DOCS_SQL + """;
CREATE TABLE title_terms (
    kb_pk INTEGER NOT NULL REFERENCES knowledge_bases(pk),
    term TEXT NOT NULL,
    title_len INTEGER NOT NULL,
    pk INTEGER NOT NULL,
    PRIMARY KEY (kb_pk, term, title_len, pk)
) WITHOUT ROWID;
"""
SQLITE_PROPOSALS_SQL = PROPOSALS_SQL.format(pk="INTEGER PRIMARY KEY", big="INTEGER")
SQLITE_VECTORS_SQL = VECTORS_SQL.format(big="INTEGER", blob="BLOB", rowid=" WITHOUT ROWID")
SQLITE_PROPOSALS_SQL_6 = PROPOSALS_SQL_6.format(pk="INTEGER PRIMARY KEY", big="INTEGER")
SCHEMA_SQL = (CORE_SQL + SEARCH_SQL + TOKENS_SQL + ";" + SESSIONS_SQL + ";" +
              SQLITE_PROPOSALS_SQL + ";" + GRANTS_SQL + ";" + SQLITE_VECTORS_SQL + ";")

# Schema 1 to 2: the import version, and search on the store's own tokens (the old FTS5
# tables, which indexed the articles table directly, are replaced; the store re-indexes).
MIGRATIONS = {
    1: ["ALTER TABLE articles ADD COLUMN import_version TEXT",
        "DROP INDEX idempotency_age",
        "CREATE INDEX idempotency_age ON idempotency (kb_pk, created_us)",
        "ALTER TABLE knowledge_bases ADD COLUMN title_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE knowledge_bases ADD COLUMN body_tokens INTEGER NOT NULL DEFAULT 0"]
    + SEARCH_SQL.split(";") + TOKENS_SQL_5.split(";"),
    # Schema 2 to 3: each knowledge base gains a title index (``upgrade_schema`` makes and fills
    # it from the stored title tokens; nothing is re-indexed).
    2: [],
    # Schema 3 to 4: versions. Each article's text moves to ``texts`` (the articles table is
    # rebuilt without it: SQLite's way to drop a column on every version), and its history
    # starts at its current version, with the event that made it.
    3: ["ALTER TABLE knowledge_bases ADD COLUMN import_root TEXT",
        "CREATE TABLE texts (pk INTEGER PRIMARY KEY, kb_pk INTEGER NOT NULL REFERENCES "
        "knowledge_bases(pk), bytes INTEGER NOT NULL, content TEXT NOT NULL)",
        "INSERT INTO texts (pk, kb_pk, bytes, content) SELECT pk, kb_pk, "
        "length(CAST(content AS BLOB)), content FROM articles ORDER BY pk",
        ARTICLES_SQL.format(name="articles_new"),
        "INSERT INTO articles_new (pk, kb_pk, article_id, title, published, version_us, "
        "updated_at, source, import_version, text_pk) SELECT pk, kb_pk, article_id, title, "
        "published, version_us, updated_at, source, import_version, pk FROM articles",
        "DROP TABLE articles",
        "ALTER TABLE articles_new RENAME TO articles",
        VERSIONS_SQL_4,
        "CREATE TEMP TABLE last_events AS SELECT kb_pk, article_id, max(sequence) AS sequence "
        "FROM events GROUP BY kb_pk, article_id",
        "INSERT INTO versions (article_pk, version_us, kb_pk, updated_at, action, sequence, "
        "event, published, title, text_pk, bytes) SELECT a.pk, a.version_us, a.kb_pk, "
        "a.updated_at, 'upgrade', e.sequence, e.type, a.published, a.title, a.text_pk, t.bytes "
        "FROM articles AS a JOIN texts AS t ON t.pk = a.text_pk LEFT JOIN last_events AS l ON "
        "l.kb_pk = a.kb_pk AND l.article_id = a.article_id LEFT JOIN events AS e ON "
        "e.kb_pk = l.kb_pk AND e.sequence = l.sequence AND e.updated_at = a.updated_at",
        "DROP TABLE temp.last_events"],
    # Schema 4 to 5: the HTTP server's handshake sessions (kbcite.sessions).
    4: SESSIONS_SQL_4.split(";"),
    # Schema 5 to 6: proposals (writes mode review), who approved a version, the tokens
    # that may approve, and the index of the newest changes.
    5: ["ALTER TABLE versions ADD COLUMN approver TEXT", TOKENS_REVIEW_SQL, ARTICLES_CHANGED_SQL]
    + SQLITE_PROPOSALS_SQL_6.split(";"),
    # Schema 6 to 7: what a team issuer's people and groups may do (kbcite.grants).
    6: [GRANTS_SQL],
    # Schema 7 to 8: the semantic half's vectors (kbcite.search.semantic); ``kb reindex``
    # embeds the articles a store had before.
    7: [VECTORS_COUNTER_SQL.format(big="INTEGER"), SQLITE_VECTORS_SQL],
    # Schema 8 to 9: each actor's issuer; an article.deleted event's own actor; sessions of
    # people signed in at the team's issuer, who have no token row (SQLite cannot drop a
    # reference: the table is made again, its sessions and their messages kept).
    8: ["ALTER TABLE versions ADD COLUMN actor_issuer TEXT",
        "ALTER TABLE proposals ADD COLUMN actor_issuer TEXT",
        "ALTER TABLE events ADD COLUMN actor TEXT",
        "ALTER TABLE events ADD COLUMN actor_issuer TEXT",
        "CREATE TEMP TABLE sessions_kept AS SELECT * FROM sessions",
        "CREATE TEMP TABLE session_messages_kept AS SELECT * FROM session_messages",
        "DROP TABLE session_messages", "DROP TABLE sessions"] + SESSIONS_SQL.split(";") + [
        "INSERT INTO sessions SELECT * FROM temp.sessions_kept",
        "INSERT INTO session_messages SELECT * FROM temp.session_messages_kept",
        "DROP TABLE temp.sessions_kept", "DROP TABLE temp.session_messages_kept"],
    # Schema 9 to 10: a body's counts as bytes by term ID, where they were text by term (2.5
    # bytes a term, not 9); the store re-indexes its knowledge bases.
    9: ["DROP TABLE search_docs", "DROP TABLE search_terms"] + SEARCH_DOCS_SQL.split(";"),
}

# The tables every store has had since schema 1; a file made before APPLICATION_ID existed is
# recognised by them (its application_id is 0).
STORE_TABLES = frozenset({"knowledge_bases", "articles", "events", "idempotency"})

# One contentless FTS5 table per knowledge base, holding published articles only, fed tokens:
# 'ascii' splits them on the spaces between them and nothing else (every non-ASCII character
# is a token character); neither positions nor columns (detail=none): no query of it names a
# column (the title-only ones have a table of their own), and at 100,000 articles it is 32 MB
# smaller than detail=column with its queries as fast (0.72 and 0.70 ms of CPU a search's);
# tables made with detail=column before answer the same and are kept; columnsize=0 since
# ranking keeps its own lengths.
FTS_SQL = ("CREATE VIRTUAL TABLE fts_{pk} USING fts5(title, body, content='', columnsize=0, "
           "detail=none, tokenize='ascii')")
# And one of titles alone, for the title-only queries: a title word's list of articles is a
# few times shorter than its list in titles and bodies, which a column filter must walk whole
# (at 100,000 articles the title-only query took 1.1 ms through the filter, 0.5 ms here).
FTS_TITLE_SQL = ("CREATE VIRTUAL TABLE fts_title_{pk} USING fts5(title, content='', "
                 "columnsize=0, detail=none, tokenize='ascii')")
# Every save rewrites an article's index entries, and each write adds a segment that every
# query must visit until merged. Merging at two segments a level (not four) and all at once at
# four (not sixteen) keeps a busy index near one segment: searches measured twice as fast after
# a day of saves, for a little more work per write.
FTS_TUNING = (("automerge", 2), ("crisismerge", 4))
