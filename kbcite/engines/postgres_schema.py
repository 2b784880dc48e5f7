"""The PostgreSQL store's schema: its tables as SQL, in the order a new store creates them, and
the migrations from each older schema."""

from .sql.articles import ARTICLES_CHANGED_SQL
from .sql.grants import GRANTS_SQL
from .sql.proposals import PROPOSALS_SQL, PROPOSALS_SQL_6
from .sql.sessions import SESSIONS_SQL, SESSIONS_SQL_4
from .sql.tokens import TOKENS_REVIEW_SQL, TOKENS_SQL
from .sql.vectors import VECTORS_COUNTER_SQL, VECTORS_SQL

# Our tables, in the order a dump lists them and a new store creates them.
TABLES = ("kb_meta", "knowledge_bases", "texts", "articles", "versions", "events",
          "idempotency", "search_docs", "search_terms", "title_terms", "tokens", "sessions",
          "session_messages", "proposals", "identity_grants", "article_vectors")

# Each text an article has had, stored once (schema 4). Uncompressed out-of-line storage: a
# snippet's substr() reads the first chunks of a long article, not all of it.
TEXTS_SQL = """
CREATE TABLE texts (
    pk BIGSERIAL PRIMARY KEY,
    kb_pk BIGINT NOT NULL REFERENCES knowledge_bases(pk),
    bytes INTEGER NOT NULL,
    content TEXT NOT NULL
);
ALTER TABLE texts ALTER COLUMN content SET STORAGE EXTERNAL
"""
# Every version of every article (schema 4), as on SQLite.
VERSIONS_SQL = """
CREATE TABLE versions (
    article_pk BIGINT NOT NULL REFERENCES articles(pk),
    version_us BIGINT NOT NULL,
    kb_pk BIGINT NOT NULL REFERENCES knowledge_bases(pk),
    updated_at TEXT NOT NULL,
    action TEXT NOT NULL,
    sequence BIGINT,
    event TEXT,
    published INTEGER NOT NULL,
    title TEXT NOT NULL,
    text_pk BIGINT REFERENCES texts(pk),
    bytes INTEGER NOT NULL,
    actor TEXT,
    summary TEXT,
    approver TEXT,
    actor_issuer TEXT,
    PRIMARY KEY (article_pk, version_us)
)
"""
# The versions table as schema 4 made it (schema 6 added the approver, 9 the actor's issuer).
VERSIONS_SQL_4 = VERSIONS_SQL.replace("    approver TEXT,\n", "").replace(
    "    actor_issuer TEXT,\n", "")
# Proposals (schema 6), as on SQLite.
POSTGRES_PROPOSALS_SQL = PROPOSALS_SQL.format(pk="BIGSERIAL PRIMARY KEY", big="BIGINT")
# The semantic half's vectors (schema 8), as on SQLite: brute force over a knowledge base's
# rows (Debian 12's PostgreSQL has no pgvector).
POSTGRES_VECTORS_SQL = VECTORS_SQL.format(big="BIGINT", blob="BYTEA", rowid="")
POSTGRES_PROPOSALS_SQL_6 = PROPOSALS_SQL_6.format(pk="BIGSERIAL PRIMARY KEY", big="BIGINT")

# Each published article's search statistics: its title's tokens, its body's counts by term ID
# (``kbcite.search.ranking``'s stored form), both lengths, its tsvectors; and each term's ID
# and article counts (the IDs indexed too: an edit reads back the terms of the body it replaces).
SEARCH_DOCS_SQL = """
CREATE TABLE search_docs (
    pk BIGINT PRIMARY KEY REFERENCES articles(pk),
    kb_pk BIGINT NOT NULL REFERENCES knowledge_bases(pk),
    title_terms TEXT NOT NULL,
    title_len INTEGER NOT NULL,
    body BYTEA NOT NULL,
    body_len INTEGER NOT NULL,
    tsv TSVECTOR NOT NULL,
    title_tsv TSVECTOR NOT NULL
);
-- fastupdate off: every save goes straight into the index, since a pending list would be
-- scanned row by row by every search until a vacuum merged it.
CREATE INDEX search_docs_tsv ON search_docs USING GIN (tsv) WITH (fastupdate = off);
CREATE INDEX search_docs_title_tsv ON search_docs USING GIN (title_tsv) WITH (fastupdate = off);
CREATE TABLE search_terms (
    kb_pk BIGINT NOT NULL REFERENCES knowledge_bases(pk),
    term TEXT NOT NULL,
    df_title BIGINT NOT NULL,
    df_body BIGINT NOT NULL,
    term_id BIGINT NOT NULL,
    PRIMARY KEY (kb_pk, term)
);
CREATE UNIQUE INDEX search_terms_id ON search_terms (kb_pk, term_id)"""
SCHEMA_SQL = """
CREATE TABLE kb_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE knowledge_bases (
    pk BIGSERIAL PRIMARY KEY,
    kb_id TEXT NOT NULL UNIQUE,
    name TEXT,
    head_sequence BIGINT NOT NULL DEFAULT 0,
    published_count BIGINT NOT NULL DEFAULT 0,
    articles_created BIGINT NOT NULL DEFAULT 0,
    title_tokens BIGINT NOT NULL DEFAULT 0,
    body_tokens BIGINT NOT NULL DEFAULT 0,
    import_root TEXT,
    vectors_written BIGINT NOT NULL DEFAULT 0
);
""" + TEXTS_SQL + """;
CREATE TABLE articles (
    pk BIGSERIAL PRIMARY KEY,
    kb_pk BIGINT NOT NULL REFERENCES knowledge_bases(pk),
    article_id TEXT NOT NULL,
    title TEXT NOT NULL,
    published INTEGER NOT NULL,
    version_us BIGINT NOT NULL,
    updated_at TEXT NOT NULL,
    source TEXT,
    import_version TEXT,
    text_pk BIGINT NOT NULL REFERENCES texts(pk),
    UNIQUE (kb_pk, article_id),
    UNIQUE (kb_pk, source)
);
""" + VERSIONS_SQL + """;
CREATE TABLE events (
    kb_pk BIGINT NOT NULL REFERENCES knowledge_bases(pk),
    sequence BIGINT NOT NULL,
    type TEXT NOT NULL,
    article_id TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    actor TEXT,
    actor_issuer TEXT,
    PRIMARY KEY (kb_pk, sequence)
);
CREATE TABLE idempotency (
    kb_pk BIGINT NOT NULL REFERENCES knowledge_bases(pk),
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    result TEXT NOT NULL,
    created_us BIGINT NOT NULL,
    PRIMARY KEY (kb_pk, key)
);
CREATE INDEX idempotency_age ON idempotency (kb_pk, created_us);
""" + ARTICLES_CHANGED_SQL + """;
""" + SEARCH_DOCS_SQL + """;
CREATE TABLE title_terms (
    kb_pk BIGINT NOT NULL REFERENCES knowledge_bases(pk),
    term TEXT NOT NULL,
    title_len INTEGER NOT NULL,
    pk BIGINT NOT NULL,
    PRIMARY KEY (kb_pk, term, title_len, pk)
);
""" + TOKENS_SQL + ";" + SESSIONS_SQL + ";" + POSTGRES_PROPOSALS_SQL + ";" + GRANTS_SQL + ";" \
    + POSTGRES_VECTORS_SQL

# The statements that take a store from each schema to the next (PostgreSQL stores began at
# schema 2), all run in the upgrade's one transaction.
MIGRATIONS = {
    # Schema 3: a tsvector of the title alone, for the title-only queries (they read title
    # weights in ``tsv`` before, which its GIN index cannot check). The knowledge bases are
    # re-indexed to fill it; the default only covers that moment.
    2: ["ALTER TABLE search_docs ADD COLUMN title_tsv TSVECTOR NOT NULL DEFAULT ''",
        "ALTER TABLE search_docs ALTER COLUMN title_tsv DROP DEFAULT",
        "CREATE INDEX search_docs_title_tsv ON search_docs USING GIN (title_tsv) "
        "WITH (fastupdate = off)"],
    # Schema 4: versions. Each article's text moves to ``texts`` (under the article's pk), and
    # its history starts at its current version, with the event that made it.
    3: ["ALTER TABLE knowledge_bases ADD COLUMN import_root TEXT"] + TEXTS_SQL.split(";") + [
        "INSERT INTO texts (pk, kb_pk, bytes, content) SELECT pk, kb_pk, "
        "octet_length(content), content FROM articles",
        "SELECT setval(pg_get_serial_sequence('texts', 'pk'), "
        "coalesce((SELECT max(pk) FROM texts), 0) + 1, false)",
        "ALTER TABLE articles ADD COLUMN text_pk BIGINT REFERENCES texts(pk)",
        "UPDATE articles SET text_pk = pk",
        "ALTER TABLE articles ALTER COLUMN text_pk SET NOT NULL",
        "ALTER TABLE articles DROP COLUMN content"] + VERSIONS_SQL_4.split(";") + [
        "INSERT INTO versions (article_pk, version_us, kb_pk, updated_at, action, "
        "sequence, event, published, title, text_pk, bytes) SELECT a.pk, "
        "a.version_us, a.kb_pk, a.updated_at, 'upgrade', e.sequence, e.type, "
        "a.published, a.title, a.text_pk, t.bytes FROM articles AS a JOIN texts AS "
        "t ON t.pk = a.text_pk LEFT JOIN (SELECT kb_pk, article_id, max(sequence) "
        "AS sequence FROM events GROUP BY kb_pk, article_id) AS l ON l.kb_pk = "
        "a.kb_pk AND l.article_id = a.article_id LEFT JOIN events AS e ON e.kb_pk = "
        "l.kb_pk AND e.sequence = l.sequence AND e.updated_at = a.updated_at"],
    # Schema 5: the HTTP server's handshake sessions (kbcite.sessions).
    4: SESSIONS_SQL_4.split(";"),
    # Schema 6: proposals (writes mode review), who approved a version, the tokens that
    # may approve, and the index of the newest changes.
    5: ["ALTER TABLE versions ADD COLUMN approver TEXT", TOKENS_REVIEW_SQL,
        ARTICLES_CHANGED_SQL]
    + POSTGRES_PROPOSALS_SQL_6.split(";"),
    # Schema 7: what a team issuer's people and groups may do (kbcite.grants).
    6: [GRANTS_SQL],
    # Schema 8: the semantic half's vectors (kbcite.search.semantic).
    7: [VECTORS_COUNTER_SQL.format(big="BIGINT"), POSTGRES_VECTORS_SQL],
    # Schema 9: each actor's issuer; an article.deleted event's own actor; sessions of people
    # signed in at the team's issuer, who have no token row.
    8: ["ALTER TABLE versions ADD COLUMN actor_issuer TEXT",
        "ALTER TABLE proposals ADD COLUMN actor_issuer TEXT",
        "ALTER TABLE events ADD COLUMN actor TEXT",
        "ALTER TABLE events ADD COLUMN actor_issuer TEXT",
        "ALTER TABLE sessions DROP CONSTRAINT IF EXISTS sessions_token_name_fkey"],
    # Schema 10: a body's counts as bytes by term ID, where they were text by term; the
    # store re-indexes its knowledge bases.
    9: ["DROP TABLE search_docs", "DROP TABLE search_terms"] + SEARCH_DOCS_SQL.split(";"),
}
