"""The chunk index's interface: `ChunkIndex` (a file's chunks added, replaced, re-attributed, removed; a search
over vector stores) and what a search finds (`Hit`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy.typing as npt

from vllm_responses.retrieval.attributes import Attributes
from vllm_responses.retrieval.filters import Filter
from vllm_responses.retrieval.ranking import DEFAULT_RANKING, Ranking

__all__ = ["ChunkIndex", "Hit", "Query", "StoredChunk", "VectorDimensionsDiffer"]


class VectorDimensionsDiffer(ValueError):
    """Vectors of another length than the vector store's chunks have (the embedding model changed)."""


@dataclass(frozen=True)
class StoredChunk:
    """One chunk of a file as kept: its place among the file's chunks and its text."""

    index: int
    text: str


@dataclass(frozen=True)
class Query:
    """A search: its text (for the keyword search) and its embedding (for the vector search; None: keywords
    only)."""

    text: str
    vector: npt.ArrayLike | None = None


@dataclass(frozen=True)
class Hit:
    """One chunk a search found: where it is, its text, its file's attributes and its score in [0, 1]."""

    vector_store_id: str
    file_id: str
    chunk_index: int
    text: str
    attributes: Attributes
    score: float


class ChunkIndex(Protocol):
    """Vector stores' chunks, searchable by vector similarity and keywords (an async context manager)."""

    async def add_file(
        self,
        vector_store_id: str,
        file_id: str,
        chunks: Sequence[str],
        vectors: npt.ArrayLike,
        attributes: Attributes,
    ) -> None:
        """The file's chunks (in order, one vector each), replacing any it had in that vector store."""
        ...

    async def set_attributes(self, vector_store_id: str, file_id: str, attributes: Attributes) -> bool:
        """The file's attributes replaced; False when the vector store holds no chunk of it."""
        ...

    async def delete_file(self, vector_store_id: str, file_id: str) -> int:
        """The file's chunks removed from the vector store; how many there were."""
        ...

    async def delete_store(self, vector_store_id: str) -> int:
        """Every chunk of the vector store removed; how many there were."""
        ...

    async def file_chunks(self, vector_store_id: str, file_id: str) -> list[StoredChunk]:
        """The file's chunks in the vector store, in order."""
        ...

    async def search(
        self,
        vector_store_ids: Sequence[str],
        query: Query,
        *,
        filters: Filter | None = None,
        ranking: Ranking = DEFAULT_RANKING,
        max_num_results: int = 10,
    ) -> list[Hit]:
        """The best chunks of the vector stores for `query` among the files `filters` lets through, scored
        as `ranking` says, at most `max_num_results`, none below its `score_threshold`; best first."""
        ...
