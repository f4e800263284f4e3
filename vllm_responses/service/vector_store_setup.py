"""`open_vector_stores`: the Vector Stores API's parts put together over the opened store: the chunk index and its
rows in the store's SQLite file (a `:memory:` database for the memory store), the chunking tokenizer, the
background ingestion and the sweep; None on a Postgres store, where vector stores are not served yet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from vllm_responses.config import Config
from vllm_responses.context.extraction import ExtractionPool
from vllm_responses.context.file_text import FileLimits
from vllm_responses.engine.embedder import Embedder
from vllm_responses.engine.models import default_embedding_model_path
from vllm_responses.retrieval.sqlite_index import SQLiteIndex
from vllm_responses.retrieval.tokens import HFTokenizer, Tokenizer
from vllm_responses.retrieval.vector_store_rows import VectorStoreRows
from vllm_responses.retrieval.word_tokens import WordTokenizer
from vllm_responses.service.ingestion import Ingestion
from vllm_responses.service.vector_store_sweep import VectorStoreSweep
from vllm_responses.service.vector_stores import VectorStoreService
from vllm_responses.store.base import ResponseStore
from vllm_responses.store.memory import MemoryStore
from vllm_responses.store.sqlite import SQLiteStore
from vllm_responses.tools.files import FileService

__all__ = ["chunk_tokenizer", "index_path", "open_vector_stores"]


def index_path(store: ResponseStore) -> str | None:
    """Where the chunk index lives: the SQLite store's file, memory for the memory store, None for Postgres."""
    if isinstance(store, SQLiteStore):
        return store.path
    return ":memory:" if isinstance(store, MemoryStore) else None


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
) -> AsyncIterator[VectorStoreService | None]:
    """The vector store service with its ingestion and sweep running (None where the store has no SQLite file); on
    exit they stop (files in progress stay so, taken up at the next start) and the index closes."""
    path = index_path(store)
    if path is None:
        yield None
        return
    async with SQLiteIndex(path) as index:
        rows = VectorStoreRows(index.db, index.lock)
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
