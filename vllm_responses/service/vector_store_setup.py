"""`open_vector_stores`: the Vector Stores API's parts put together over the opened store: the chunk index and its
rows in the store's database (its SQLite file, its Postgres database, a `:memory:` SQLite database for the memory
store), the chunking tokenizer, the background ingestion and the sweep."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from vllm_responses.config import Config
from vllm_responses.context.extraction import ExtractionPool
from vllm_responses.context.file_text import FileLimits
from vllm_responses.engine.embedder import Embedder
from vllm_responses.engine.models import default_embedding_model_path
from vllm_responses.retrieval.index import ChunkIndex
from vllm_responses.retrieval.open import index_for
from vllm_responses.retrieval.postgres_vector_store_rows import PostgresVectorStoreRows
from vllm_responses.retrieval.sqlite_index import SQLiteIndex
from vllm_responses.retrieval.sqlite_vector_store_rows import SQLiteVectorStoreRows
from vllm_responses.retrieval.tokens import HFTokenizer, Tokenizer
from vllm_responses.retrieval.vector_store_rows import VectorStoreRows
from vllm_responses.retrieval.word_tokens import WordTokenizer
from vllm_responses.service.ingestion import Ingestion
from vllm_responses.service.vector_store_sweep import VectorStoreSweep
from vllm_responses.service.vector_stores import VectorStoreService
from vllm_responses.store.base import ResponseStore
from vllm_responses.store.postgres import PostgresStore
from vllm_responses.store.sqlite import SQLiteStore
from vllm_responses.tools.files import FileService

__all__ = ["INDEX_POOL_SIZE", "chunk_tokenizer", "index_db", "open_rows", "open_vector_stores"]

# most connections of the chunk index's own pool on Postgres (fewer with a smaller --db-pool-size)
INDEX_POOL_SIZE = 4


def index_db(store: ResponseStore) -> str:
    """Where the chunk index lives: the store's database (its SQLite file, its Postgres URL), else (the memory
    store) a `:memory:` SQLite database of this process's own."""
    if isinstance(store, SQLiteStore):
        return store.path
    return store.url if isinstance(store, PostgresStore) else ":memory:"


@asynccontextmanager
async def open_rows(
    config: Config, store: ResponseStore
) -> AsyncIterator[tuple[ChunkIndex, VectorStoreRows]]:
    """The chunk index of the store's database (`index_for`), open, and the vector stores' rows beside it, on its
    connection (SQLite) or its pool (Postgres)."""
    async with index_for(index_db(store), pool_size=min(INDEX_POOL_SIZE, config.db_pool_size)) as index:
        if isinstance(index, SQLiteIndex):
            yield index, SQLiteVectorStoreRows(index.db, index.lock)
        else:
            yield index, PostgresVectorStoreRows(index.pool)


def chunk_tokenizer(config: Config) -> Tokenizer:
    """The embedding model's own tokenizer where its folder is at hand (`--embedding-model`, or the embedded
    model), else words and punctuation (a remote model, or none)."""
    chosen = config.embedding_model
    folder: Path | None = None
    if chosen is not None and chosen.lower() != "none" and not config.embedding_url:
        folder = Path(chosen).expanduser()
    elif chosen is None and not config.embedding_url:
        folder = default_embedding_model_path()
    if folder is not None and (folder / "tokenizer.json").is_file():
        return HFTokenizer.from_file(folder)
    return WordTokenizer()


@asynccontextmanager
async def open_vector_stores(
    config: Config,
    store: ResponseStore,
    files: FileService,
    extraction: ExtractionPool,
    embedder: Embedder | None,
    owner: str,
) -> AsyncIterator[VectorStoreService]:
    """The vector store service with its ingestion and sweep running; on exit they stop (files in progress stay
    so, taken up at the next start or by another replica) and the index closes."""
    async with open_rows(config, store) as (index, rows):
        limits = FileLimits(
            config.input_file_max_bytes, config.input_file_max_pages, config.input_file_max_chars
        )
        ingestion = Ingestion(
            rows, index, files, embedder, chunk_tokenizer(config), extraction, limits,
            owner=owner, lease_s=config.replica_lease, heartbeat_s=config.replica_heartbeat,
        )  # fmt: skip
        await ingestion.start()
        service = VectorStoreService(rows, index, files, embedder, ingestion)
        sweep = VectorStoreSweep(service, config.replica_heartbeat)
        sweep.start()
        try:
            yield service
        finally:
            await sweep.aclose()
            await ingestion.aclose()
