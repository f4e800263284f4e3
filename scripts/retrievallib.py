"""Shared by the retrieval benchmarks (`bench_ingestion.py`, `bench_retrieval_quality.py`): the served embedding
model started in this process, the server's own vector store service over a SQLite store in a folder, and files
ingested through it (uploaded, added to a vector store in one file batch, waited for) as the API does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_responses.config import Config
from vllm_responses.engine.embedder import Embedder
from vllm_responses.retrieval.vector_store_records import FileCounts
from vllm_responses.service.responses import extraction_pool
from vllm_responses.service.vector_store_setup import open_vector_stores
from vllm_responses.service.vector_stores import VectorStoreService
from vllm_responses.store.sqlite import SQLiteStore
from vllm_responses.tools.files import FileService

__all__ = ["PROJECT", "Ingested", "embedding_model", "ingest", "vector_store_service"]

PROJECT = "bench"
_POLL_S = 0.02


@asynccontextmanager
async def embedding_model() -> AsyncIterator[tuple[Embedder, str, float]]:
    """The embedded embedding model (all-MiniLM-L6-v2) in a pooling vLLM engine, as the server runs it: the
    model, its dtype and its load time in seconds; shut down on exit."""
    from vllm_responses.engine.args import cpu_dtype, is_cpu_platform
    from vllm_responses.engine.models import default_embedding_model_path
    from vllm_responses.engine.vllm_embedder import VLLMEmbedder, pooling_engine_args

    folder = default_embedding_model_path()
    if folder is None:
        raise SystemExit("the embedded embedding model is not set up: run scripts/setup.sh")
    cpu = is_cpu_platform()
    dtype = cpu_dtype() if cpu else "auto"
    t0 = time.perf_counter()
    model = await VLLMEmbedder.start(pooling_engine_args(str(folder), dtype=dtype, cpu=cpu), folder.name)
    load_s = time.perf_counter() - t0
    try:
        yield model, dtype, load_s
    finally:
        await model.aclose()


@asynccontextmanager
async def vector_store_service(folder: Path, embedder: Embedder) -> AsyncIterator[VectorStoreService]:
    """The server's vector store service (its ingestion running, the chunking tokenizer the embedded model's) over
    a SQLite store in `folder`, with the server's default settings."""
    config = Config(db=str(folder / "bench.db"))
    store = SQLiteStore(config.db)
    await store.open()
    extraction = extraction_pool(config)
    try:
        files = FileService(store)
        async with open_vector_stores(config, store, files, extraction, embedder, "bench") as service:
            if service is None:
                raise RuntimeError("no vector store service on this store")
            yield service
    finally:
        await extraction.aclose()
        await store.aclose()


@dataclass(frozen=True)
class Ingested:
    """One vector store's files ingested: its id, the file ids by name, the wall time from the batch's creation
    to its end, and its file counts."""

    vector_store_id: str
    file_ids: dict[str, str]
    wall_s: float
    counts: FileCounts


async def ingest(
    service: VectorStoreService,
    files: Sequence[tuple[str, bytes]],
    chunking: dict[str, Any] | None = None,
) -> Ingested:
    """`files` (name, bytes) uploaded, then added to a new vector store in one file batch (`chunking`: its
    `chunking_strategy`; None: auto), and waited for until the batch is no longer in progress."""
    ids = {name: (await service.files.create(PROJECT, name, "assistants", data)).id for name, data in files}
    store = await service.create(PROJECT, {"name": "bench"})
    body: dict[str, Any] = {"file_ids": list(ids.values())}
    if chunking is not None:
        body["chunking_strategy"] = chunking
    t0 = time.perf_counter()
    batch = await service.create_batch(store.row.id, PROJECT, body)
    while True:
        status, counts = await service.batch_status(batch)
        if status != "in_progress":
            break
        await asyncio.sleep(_POLL_S)
    return Ingested(store.row.id, ids, time.perf_counter() - t0, counts)
