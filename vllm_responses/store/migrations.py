"""Versioned schema migrations for the SQLite and Postgres stores: one ordered list per backend, applied at open.

The version a database is at is the highest row of its `schema_version` table (0 when it has none: a new
database, or a SQLite file made before migrations existed, whose tables migration 1 re-creates with `IF NOT
EXISTS`). Version N means the same schema on both backends; to change the schema, append one migration to
BOTH lists (never edit one that has shipped). A database at a version above the code's is refused
(`SchemaTooNew`), so an older replica never writes a schema it does not know. Each backend applies its
missing migrations in one transaction under a lock (SQLite: `BEGIN IMMEDIATE`; Postgres: a transaction-level
advisory lock), so two processes starting at once apply them once.
"""

from __future__ import annotations

import time
from typing import Any

import aiosqlite

from vllm_responses.store.files import private_file

__all__ = [
    "POSTGRES_MIGRATIONS",
    "SQLITE_MIGRATIONS",
    "LATEST",
    "SchemaTooNew",
    "is_postgres_url",
    "upgrade",
    "upgrade_postgres",
    "upgrade_sqlite",
]

# pg_advisory_xact_lock's key: any constant of our own (the bytes of "vrschema").
_ADVISORY_KEY = int.from_bytes(b"vrschema", "big") & 0x7FFF_FFFF_FFFF_FFFF

SQLITE_MIGRATIONS: tuple[str, ...] = (
    # 1: the schema of the store before migrations existed (hence IF NOT EXISTS: such a file already has it)
    """
    CREATE TABLE IF NOT EXISTS responses (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        status TEXT NOT NULL,
        include_outputs INTEGER NOT NULL,
        response TEXT NOT NULL,
        input_items TEXT NOT NULL,
        history TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS responses_created ON responses (created_at);
    CREATE TABLE IF NOT EXISTS items (
        id TEXT PRIMARY KEY,
        response_id TEXT NOT NULL,
        item TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS items_response ON items (response_id);
    CREATE TABLE IF NOT EXISTS conversations (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        metadata TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS conversations_updated ON conversations (updated_at);
    CREATE TABLE IF NOT EXISTS conversation_items (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        conversation_id TEXT NOT NULL,
        id TEXT NOT NULL,
        item TEXT NOT NULL,
        UNIQUE (conversation_id, id)
    );
    CREATE INDEX IF NOT EXISTS conversation_items_order ON conversation_items (conversation_id, seq)
    """,
    # 2: the sweep (`abandoned()`, at start and every heartbeat) reads an index of the few running responses,
    # not the table
    "CREATE INDEX responses_unfinished ON responses (status) WHERE status IN ('queued', 'in_progress')",
    # 3: leases of running stored responses, one row while a replica runs one (runs/replicas.py)
    """
    CREATE TABLE leases (
        response_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at REAL NOT NULL,
        cancel_requested INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX leases_owner ON leases (owner)
    """,
    # 4: a background response's stream events, so that any replica re-streams it (`EventStore`, base.py)
    """
    CREATE TABLE response_events (
        response_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (response_id, seq)
    )
    """,
    # 5: the project whose API key made each response and conversation (rows kept before: "default")
    """
    ALTER TABLE responses ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
    ALTER TABLE conversations ADD COLUMN project TEXT NOT NULL DEFAULT 'default'
    """,
    # 6: the bytes each response and conversation item keeps, summed per project (`stored_bytes`); rows kept
    # before are counted by their length
    """
    ALTER TABLE responses ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE conversation_items ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE responses SET bytes = length(response) + length(input_items) + length(history);
    UPDATE conversation_items SET bytes = length(item);
    CREATE INDEX responses_project ON responses (project);
    CREATE INDEX conversations_project ON conversations (project)
    """,
    # 7: items keyed by (project, id): input item ids are the client's, so one project's write never replaces
    # another's row. Each kept row takes its response's project; a row whose response is gone was unreachable.
    """
    CREATE TABLE items_by_project (
        project TEXT NOT NULL,
        id TEXT NOT NULL,
        response_id TEXT NOT NULL,
        item TEXT NOT NULL,
        PRIMARY KEY (project, id)
    );
    INSERT INTO items_by_project (project, id, response_id, item)
        SELECT r.project, i.id, i.response_id, i.item FROM items i JOIN responses r ON r.id = i.response_id;
    DROP TABLE items;
    ALTER TABLE items_by_project RENAME TO items;
    CREATE INDEX items_response ON items (response_id)
    """,
    # 8: files of the Files API and uploads of the Uploads API, per project; bytes in rows of at most 1 MiB
    # (`file_chunks`, keyed by the file's or the upload part's id)
    """
    CREATE TABLE files (
        id TEXT PRIMARY KEY,
        project TEXT NOT NULL,
        filename TEXT NOT NULL,
        purpose TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL
    );
    CREATE INDEX files_project ON files (project, created_at);
    CREATE INDEX files_expiry ON files (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE file_chunks (
        owner_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (owner_id, seq)
    );
    CREATE TABLE uploads (
        id TEXT PRIMARY KEY,
        project TEXT NOT NULL,
        filename TEXT NOT NULL,
        purpose TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        status TEXT NOT NULL,
        file_id TEXT,
        file_expires_s REAL
    );
    CREATE INDEX uploads_expiry ON uploads (expires_at);
    CREATE TABLE upload_parts (
        id TEXT PRIMARY KEY,
        upload_id TEXT NOT NULL,
        project TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX upload_parts_upload ON upload_parts (upload_id);
    CREATE INDEX upload_parts_project ON upload_parts (project)
    """,
    # 9: vector stores' chunks (retrieval/sqlite_index.py): each chunk's text, its file's attributes (JSON) and
    # its unit vector (float32 blob), under an id never reused; their words in FTS5 (external content: rows
    # added and removed by the index, never by triggers); each vector store's generation, raised on every
    # change of its chunks
    """
    CREATE TABLE vector_store_chunks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        vector_store_id TEXT NOT NULL,
        file_id TEXT NOT NULL,
        chunk_index INTEGER NOT NULL,
        text TEXT NOT NULL,
        attributes TEXT NOT NULL,
        vector BLOB NOT NULL,
        UNIQUE (vector_store_id, file_id, chunk_index)
    );
    CREATE VIRTUAL TABLE vector_store_chunks_fts USING fts5(
        text, content = 'vector_store_chunks', content_rowid = 'id', tokenize = 'porter unicode61 remove_diacritics 2'
    );
    CREATE TABLE vector_store_generations (
        vector_store_id TEXT PRIMARY KEY,
        generation INTEGER NOT NULL
    )
    """,
    # 10: vector stores, the files each holds (its ingestion status, a lease while a replica ingests it) and file
    # batches (retrieval/vector_store_rows.py)
    """
    CREATE TABLE vector_stores (
        id TEXT PRIMARY KEY,
        project TEXT NOT NULL,
        name TEXT NOT NULL,
        description TEXT,
        metadata TEXT NOT NULL,
        created_at REAL NOT NULL,
        last_active_at REAL NOT NULL,
        expires_days INTEGER,
        expires_at REAL
    );
    CREATE INDEX vector_stores_project ON vector_stores (project, created_at);
    CREATE TABLE vector_store_files (
        vector_store_id TEXT NOT NULL,
        file_id TEXT NOT NULL,
        project TEXT NOT NULL,
        batch_id TEXT,
        status TEXT NOT NULL,
        attributes TEXT NOT NULL,
        chunking TEXT NOT NULL,
        usage_bytes INTEGER NOT NULL,
        last_error TEXT,
        created_at REAL NOT NULL,
        lease_owner TEXT,
        lease_expires_at REAL,
        PRIMARY KEY (vector_store_id, file_id)
    );
    CREATE INDEX vector_store_files_status ON vector_store_files (status);
    CREATE INDEX vector_store_files_batch ON vector_store_files (batch_id);
    CREATE INDEX vector_store_files_project ON vector_store_files (project);
    CREATE TABLE vector_store_file_batches (
        id TEXT PRIMARY KEY,
        vector_store_id TEXT NOT NULL,
        project TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at REAL NOT NULL
    )
    """,
    # 11: a vector store file's parsed text (JSON: its parts, a PDF's pages or a PPTX's slides), kept at ingestion
    # for its `/content`; vector stores found by their expiry (the sweep of expired ones)
    """
    ALTER TABLE vector_store_files ADD COLUMN content TEXT;
    CREATE INDEX vector_stores_expires ON vector_stores (expires_at)
    """,
    # 12: nothing on SQLite (Postgres's pgvector column; SQLite searches the blobs exactly)
    "SELECT 1",
)

POSTGRES_MIGRATIONS: tuple[str, ...] = (
    # 1: the same tables as SQLite's. JSON documents are TEXT, not JSONB: they are never queried inside,
    # JSONB would reorder their keys and refuses the escape \u0000 that model text or code output may hold.
    """
    CREATE TABLE responses (
        id TEXT PRIMARY KEY,
        created_at DOUBLE PRECISION NOT NULL,
        status TEXT NOT NULL,
        include_outputs BOOLEAN NOT NULL,
        response TEXT NOT NULL,
        input_items TEXT NOT NULL,
        history TEXT NOT NULL
    );
    CREATE INDEX responses_created ON responses (created_at);
    CREATE TABLE items (
        id TEXT PRIMARY KEY,
        response_id TEXT NOT NULL,
        item TEXT NOT NULL
    );
    CREATE INDEX items_response ON items (response_id);
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        metadata TEXT NOT NULL
    );
    CREATE INDEX conversations_updated ON conversations (updated_at);
    CREATE TABLE conversation_items (
        seq BIGSERIAL PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        id TEXT NOT NULL,
        item TEXT NOT NULL,
        UNIQUE (conversation_id, id)
    );
    CREATE INDEX conversation_items_order ON conversation_items (conversation_id, seq)
    """,
    # 2: as SQLite's 2
    "CREATE INDEX responses_unfinished ON responses (status) WHERE status IN ('queued', 'in_progress')",
    # 3: as SQLite's 3
    """
    CREATE TABLE leases (
        response_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        cancel_requested BOOLEAN NOT NULL DEFAULT false
    );
    CREATE INDEX leases_owner ON leases (owner)
    """,
    # 4: as SQLite's 4
    """
    CREATE TABLE response_events (
        response_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (response_id, seq)
    )
    """,
    # 5: as SQLite's 5
    """
    ALTER TABLE responses ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
    ALTER TABLE conversations ADD COLUMN project TEXT NOT NULL DEFAULT 'default'
    """,
    # 6: as SQLite's 6
    """
    ALTER TABLE responses ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE conversation_items ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;
    UPDATE responses SET bytes = octet_length(response) + octet_length(input_items) + octet_length(history);
    UPDATE conversation_items SET bytes = octet_length(item);
    CREATE INDEX responses_project ON responses (project);
    CREATE INDEX conversations_project ON conversations (project)
    """,
    # 7: as SQLite's 7, in place (the index on response_id is kept)
    """
    ALTER TABLE items ADD COLUMN project TEXT;
    UPDATE items SET project = r.project FROM responses r WHERE r.id = items.response_id;
    DELETE FROM items WHERE project IS NULL;
    ALTER TABLE items ALTER COLUMN project SET NOT NULL;
    ALTER TABLE items DROP CONSTRAINT items_pkey;
    ALTER TABLE items ADD PRIMARY KEY (project, id)
    """,
    # 8: as SQLite's 8
    """
    CREATE TABLE files (
        id TEXT PRIMARY KEY,
        project TEXT NOT NULL,
        filename TEXT NOT NULL,
        purpose TEXT NOT NULL,
        bytes BIGINT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION
    );
    CREATE INDEX files_project ON files (project, created_at);
    CREATE INDEX files_expiry ON files (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE file_chunks (
        owner_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (owner_id, seq)
    );
    CREATE TABLE uploads (
        id TEXT PRIMARY KEY,
        project TEXT NOT NULL,
        filename TEXT NOT NULL,
        purpose TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        bytes BIGINT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        status TEXT NOT NULL,
        file_id TEXT,
        file_expires_s DOUBLE PRECISION
    );
    CREATE INDEX uploads_expiry ON uploads (expires_at);
    CREATE TABLE upload_parts (
        id TEXT PRIMARY KEY,
        upload_id TEXT NOT NULL,
        project TEXT NOT NULL,
        bytes BIGINT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX upload_parts_upload ON upload_parts (upload_id);
    CREATE INDEX upload_parts_project ON upload_parts (project)
    """,
    # 9: as SQLite's 9; the vector a float32 BYTEA (pgvector's `vector` and its HNSW index need the extension),
    # the words a generated `tsvector` under a GIN index in place of FTS5
    """
    CREATE TABLE vector_store_chunks (
        id BIGSERIAL PRIMARY KEY,
        vector_store_id TEXT NOT NULL,
        file_id TEXT NOT NULL,
        chunk_index INTEGER NOT NULL,
        text TEXT NOT NULL,
        attributes TEXT NOT NULL,
        vector BYTEA NOT NULL,
        words TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
        UNIQUE (vector_store_id, file_id, chunk_index)
    );
    CREATE INDEX vector_store_chunks_words ON vector_store_chunks USING GIN (words);
    CREATE TABLE vector_store_generations (
        vector_store_id TEXT PRIMARY KEY,
        generation BIGINT NOT NULL
    )
    """,
    # 10: as SQLite's 10
    """
    CREATE TABLE vector_stores (
        id TEXT PRIMARY KEY,
        project TEXT NOT NULL,
        name TEXT NOT NULL,
        description TEXT,
        metadata TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        last_active_at DOUBLE PRECISION NOT NULL,
        expires_days INTEGER,
        expires_at DOUBLE PRECISION
    );
    CREATE INDEX vector_stores_project ON vector_stores (project, created_at);
    CREATE TABLE vector_store_files (
        vector_store_id TEXT NOT NULL,
        file_id TEXT NOT NULL,
        project TEXT NOT NULL,
        batch_id TEXT,
        status TEXT NOT NULL,
        attributes TEXT NOT NULL,
        chunking TEXT NOT NULL,
        usage_bytes BIGINT NOT NULL,
        last_error TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        lease_owner TEXT,
        lease_expires_at DOUBLE PRECISION,
        PRIMARY KEY (vector_store_id, file_id)
    );
    CREATE INDEX vector_store_files_status ON vector_store_files (status);
    CREATE INDEX vector_store_files_batch ON vector_store_files (batch_id);
    CREATE INDEX vector_store_files_project ON vector_store_files (project);
    CREATE TABLE vector_store_file_batches (
        id TEXT PRIMARY KEY,
        vector_store_id TEXT NOT NULL,
        project TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    )
    """,
    # 11: as SQLite's 11
    """
    ALTER TABLE vector_store_files ADD COLUMN content TEXT;
    CREATE INDEX vector_stores_expires ON vector_stores (expires_at)
    """,
    # 12: where the server offers pgvector, the `vector` extension (created here when our role may; an operator
    # may create it beforehand) and each chunk's vector also as an untyped `vector` column, `embedding`, so that
    # vectors of any length share it: retrieval/pgvector.py adds one HNSW index per length, on the expression
    # `embedding::vector(N)` for the rows of that length; statistics on `vector_dims(embedding)` let the planner
    # see how many rows each length has (else it guesses 0.5% and never picks the HNSW index). Without the
    # extension nothing changes here, and the index searches the BYTEA vectors exactly; `PostgresIndex` adds the
    # column (and fills it) once the extension exists.
    """
    DO $$
    BEGIN
        IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
            BEGIN
                CREATE EXTENSION IF NOT EXISTS vector;
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE NOTICE 'the vector extension could not be created: exact search until it is';
            END;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
            ALTER TABLE vector_store_chunks ADD COLUMN IF NOT EXISTS embedding vector;
            CREATE STATISTICS IF NOT EXISTS vector_store_chunks_dims ON (vector_dims(embedding))
                FROM vector_store_chunks;
        END IF;
    END
    $$
    """,
)

assert len(SQLITE_MIGRATIONS) == len(POSTGRES_MIGRATIONS), "a schema version must exist on both backends"
LATEST = len(SQLITE_MIGRATIONS)


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer vllm-responses than this one."""

    def __init__(self, where: str, version: int) -> None:
        super().__init__(
            f"the database {where} is at schema version {version}, but this vllm-responses knows versions up "
            f"to {LATEST} only: run the newer vllm-responses that upgraded it (or restore a backup)"
        )


def is_postgres_url(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def _statements(script: str) -> list[str]:
    """A migration's statements (ours: no `;` inside a literal)."""
    return [s.strip() for s in script.split(";") if s.strip()]


def _checked(where: str, version: int) -> int:
    if version > LATEST:
        raise SchemaTooNew(where, version)
    return version


async def upgrade_sqlite(db: aiosqlite.Connection, where: str = "file") -> tuple[int, int]:
    """Apply SQLite's missing migrations on `db` in one write transaction. Returns (version before, after)."""
    await db.commit()  # no transaction of the caller's left open: BEGIN starts ours
    await db.execute("BEGIN IMMEDIATE")  # the write lock first: a second process waits, then finds it done
    try:
        await db.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at REAL)"
        )
        async with db.execute("SELECT coalesce(max(version), 0) FROM schema_version") as cur:
            row = await cur.fetchone()
        before = _checked(where, int(row[0]) if row else 0)
        for version in range(before + 1, LATEST + 1):
            for statement in _statements(SQLITE_MIGRATIONS[version - 1]):
                await db.execute(statement)
            await db.execute("INSERT INTO schema_version VALUES (?, ?)", (version, time.time()))
        await db.commit()
    except BaseException:
        await db.rollback()
        raise
    return before, LATEST


async def upgrade_postgres(conn: Any, where: str = "database") -> tuple[int, int]:
    """Apply Postgres's missing migrations on the asyncpg connection `conn`, in one transaction holding an
    advisory lock (replicas starting at once: one migrates, the others wait and find it done)."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _ADVISORY_KEY)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION)"
        )
        before = _checked(
            where, int(await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_version"))
        )
        for version in range(before + 1, LATEST + 1):
            await conn.execute(POSTGRES_MIGRATIONS[version - 1])  # several statements: the simple protocol
            await conn.execute("INSERT INTO schema_version VALUES ($1, $2)", version, time.time())
    return before, LATEST


async def upgrade(db: str) -> tuple[int, int]:
    """`vllm-responses db upgrade`: bring the database `db` (a SQLite path or a Postgres URL) to `LATEST`."""
    if is_postgres_url(db):
        import asyncpg

        conn = await asyncpg.connect(db)
        try:
            return await upgrade_postgres(conn)
        finally:
            await conn.close()
    from pathlib import Path

    path = Path(db).expanduser()
    private_file(path)
    async with aiosqlite.connect(path) as conn:
        await conn.execute("PRAGMA journal_mode=WAL")
        return await upgrade_sqlite(conn, str(path))
