"""`VectorSearch`: a search over a project's vector stores (what the `/search` route and the `file_search` tool
call): each query embedded (a query past the model's input bound as the mean of its windows, as a chunk is; none
without an embedding model: keywords only), the index searched, a chunk found by several queries scored by its
best, each result with its file's name (a chunk of a file deleted or expired meanwhile is left out). Another
project's vector store, or an unknown one, is a 404; an expired one (by `clock`) a 400; each one searched becomes
active (its `last_active_at`, and so its expiry, moved)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from vllm_responses.engine.base import EngineError, EngineRejected
from vllm_responses.engine.embedder import Embedder
from vllm_responses.protocol.errors import InvalidRequest, NotFound, Unavailable
from vllm_responses.protocol.vector_stores import is_vector_store_id
from vllm_responses.retrieval.chunk_vectors import embed_chunks
from vllm_responses.retrieval.filters import Filter
from vllm_responses.retrieval.index import ChunkIndex, Hit, Query, VectorDimensionsDiffer
from vllm_responses.retrieval.ranking import DEFAULT_RANKING, Ranking
from vllm_responses.retrieval.tokens import Tokenizer
from vllm_responses.retrieval.vector_store_records import StoreRow, expiry
from vllm_responses.retrieval.vector_store_rows import VectorStoreRows
from vllm_responses.retrieval.vectors import Matrix
from vllm_responses.store.base import FileStore

__all__ = ["MAX_QUERIES", "MAX_QUERY_CHARS", "FoundChunk", "VectorSearch", "project_store"]

# The most queries one search takes, and the most characters of each (the `/search` route: a 400 past them;
# the `file_search` tool: the model's queries cut to them).
MAX_QUERIES = 10
MAX_QUERY_CHARS = 4096


@dataclass(frozen=True)
class FoundChunk:
    """One search result: the chunk found and its file's name."""

    hit: Hit
    filename: str


async def project_store(rows: VectorStoreRows, vector_store_id: str, project: str) -> StoreRow:
    """`project`'s vector store; a 404 naming `vector_store_id` when it is unknown or another project's."""
    row = await rows.get_store(vector_store_id) if is_vector_store_id(vector_store_id) else None
    if row is None or row.project != project:
        raise NotFound(f"No vector store found with id '{vector_store_id}'.", param="vector_store_id")
    return row


class VectorSearch:
    """Searches of vector stores over `index`, with `embedder` (None: keywords only) and `tokenizer` (its
    windows), file names from `files`."""

    def __init__(
        self,
        rows: VectorStoreRows,
        index: ChunkIndex,
        embedder: Embedder | None,
        tokenizer: Tokenizer,
        files: FileStore,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.rows = rows
        self.index = index
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.files = files
        self.clock = clock

    async def search(
        self,
        project: str,
        vector_store_ids: Sequence[str],
        queries: Sequence[str],
        *,
        filters: Filter | None = None,
        ranking: Ranking = DEFAULT_RANKING,
        max_num_results: int = 10,
    ) -> list[FoundChunk]:
        """The best chunks of `project`'s vector stores for `queries`, at most `max_num_results`, best first."""
        stores = [await project_store(self.rows, s, project) for s in vector_store_ids]
        now = self.clock()
        for s in stores:
            if s.expires_at is not None and s.expires_at <= now:
                raise InvalidRequest(
                    f"The vector store {s.id} has expired.", param="vector_store_id", code="expired"
                )
            await self.rows.touch(s.id, now, expiry(s.expires_days, now))
        best: dict[tuple[str, str, int], Hit] = {}
        for text in queries:
            vector = await self._query_vector(text)
            found = await self._index_search(
                [s.id for s in stores], Query(text, vector), filters=filters, ranking=ranking,
                max_num_results=max_num_results,
            )  # fmt: skip
            for hit in found:
                key = (hit.vector_store_id, hit.file_id, hit.chunk_index)
                if key not in best or best[key].score < hit.score:
                    best[key] = hit
        ranked = sorted(best.values(), key=lambda h: -h.score)
        results: list[FoundChunk] = []
        names: dict[str, str | None] = {}
        for hit in ranked:
            if hit.file_id not in names:
                names[hit.file_id] = await self._filename(hit.file_id, now)
            name = names[hit.file_id]
            if name is not None:
                results.append(FoundChunk(hit, name))
            if len(results) == max_num_results:
                break
        return results

    async def _index_search(self, stores: list[str], query: Query, **options: Any) -> list[Hit]:
        try:
            return await self.index.search(stores, query, **options)
        except VectorDimensionsDiffer as exc:
            raise InvalidRequest(
                f"The vector store's files were embedded by another embedding model than this server's ({exc}): "
                "add them again.",
                param="vector_store_id",
                code="vector_dimensions_differ",
            ) from exc

    async def _query_vector(self, text: str) -> Matrix | None:
        if self.embedder is None:
            return None
        try:
            vectors, _ = await embed_chunks(self.embedder, self.tokenizer, [text])
        except EngineRejected as exc:
            raise InvalidRequest(f"The query cannot be embedded: {exc.message}", param="query") from exc
        except EngineError as exc:
            raise Unavailable("The embedding model could not embed the query; retry later.") from exc
        first: Matrix = vectors[0]
        return first

    async def _filename(self, file_id: str, now: float) -> str | None:
        """The file's name; None once it is deleted or expired (its chunks wait for the sweep)."""
        stored = await self.files.get_file(file_id)
        if stored is None or (stored.expires_at is not None and stored.expires_at <= now):
            return None
        return stored.filename
