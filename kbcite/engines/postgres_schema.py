"""The PostgreSQL store's schema: its tables as SQL, in the order a new store creates them."""

from .sql.sessions import SESSIONS_SQL
from .sql.tokens import TOKENS_SQL

# Our tables, in the order a dump lists them and a new store creates them.
TABLES = ("kb_meta", "knowledge_bases", "texts", "articles", "versions", "events",
          "idempotency", "search_docs", "search_terms", "title_terms", "tokens", "sessions",
          "session_messages")

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
    PRIMARY KEY (article_pk, version_us)
)
"""

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
    import_root TEXT
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
CREATE TABLE search_docs (
    pk BIGINT PRIMARY KEY REFERENCES articles(pk),
    kb_pk BIGINT NOT NULL REFERENCES knowledge_bases(pk),
    title_terms TEXT NOT NULL,
    title_len INTEGER NOT NULL,
    body_terms TEXT NOT NULL,
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
    PRIMARY KEY (kb_pk, term)
);
CREATE TABLE title_terms (
    kb_pk BIGINT NOT NULL REFERENCES knowledge_bases(pk),
    term TEXT NOT NULL,
    title_len INTEGER NOT NULL,
    pk BIGINT NOT NULL,
    PRIMARY KEY (kb_pk, term, title_len, pk)
);
""" + TOKENS_SQL + ";" + SESSIONS_SQL
