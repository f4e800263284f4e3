"""Exact vector search: vectors kept as little-endian float32 blobs of unit length, and `StoreMatrix`, one vector
store's chunks as one numpy matrix (with each row's file), searched by cosine similarity under a file mask; how
many candidates each of a search's lists holds before fusion."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from vllm_responses.retrieval.attributes import Attributes
from vllm_responses.retrieval.filters import Filter, matches
from vllm_responses.retrieval.index import VectorDimensionsDiffer

__all__ = [
    "CANDIDATES",
    "Matrix",
    "StoreMatrix",
    "candidates",
    "from_blobs",
    "matrix_of_rows",
    "nearest_in",
    "to_blob",
    "unit_rows",
]

Matrix = npt.NDArray[np.float32]
_DTYPE = np.dtype("<f4")
CANDIDATES = 64  # each list's length before fusion, at least (4 x max_num_results when that is more)


def candidates(max_num_results: int) -> int:
    """How many chunks each list (vector, keywords) of a search for `max_num_results` holds before fusion."""
    return max(CANDIDATES, 4 * max_num_results)


def unit_rows(vectors: npt.ArrayLike) -> Matrix:
    """`vectors` (one per row, or a single one) as float32 rows of length 1; a zero vector stays zero."""
    rows = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    if rows.ndim != 2 or not np.isfinite(rows).all():
        raise ValueError("vectors must be finite numbers, one vector per row")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    out: Matrix = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
    return out


def to_blob(vector: Matrix) -> bytes:
    return np.asarray(vector, dtype=_DTYPE).tobytes()


def from_blobs(blobs: Sequence[bytes], dimensions: int) -> Matrix:
    """Blobs of `dimensions` float32 each, as the rows of one matrix (copied once, writable)."""
    if not blobs:
        return np.zeros((0, dimensions), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=_DTYPE).reshape(len(blobs), dimensions).astype(np.float32)


@dataclass
class StoreMatrix:
    """One vector store's chunks as loaded: row i is chunk `ids[i]` of file `files[file_rows[i]]`."""

    ids: npt.NDArray[np.int64]
    file_rows: npt.NDArray[np.int32]
    files: list[str]
    attributes: list[Attributes]
    matrix: Matrix
    by_file: Mapping[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.by_file = {f: i for i, f in enumerate(self.files)}

    @property
    def dimensions(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.ids.nbytes + self.file_rows.nbytes)

    def allowed_files(self, filter_: Filter | None) -> list[str]:
        """The files the filter lets through (every file without a filter)."""
        if filter_ is None:
            return list(self.files)
        return [f for f, attrs in zip(self.files, self.attributes, strict=True) if matches(filter_, attrs)]

    def nearest(self, query: Matrix, files: Sequence[str], limit: int) -> list[tuple[int, float]]:
        """The `limit` chunks of the allowed `files` most similar to the unit vector `query` (of a cosine
        similarity above 0): (chunk id, cosine similarity), best first, ties by chunk id."""
        if not len(self.ids) or not files or limit <= 0:
            return []
        if query.shape[-1] != self.dimensions:
            raise VectorDimensionsDiffer(
                f"the query has {query.shape[-1]} dimensions, the vector store's chunks {self.dimensions}"
            )
        # einsum, not BLAS's gemv: one thread, so that searches do not contend with each other and the
        # engine for BLAS's thread pool (on a busy host the threaded gemv is several times slower)
        sims = np.einsum("ij,j->i", self.matrix, query.reshape(-1))
        if len(files) < len(self.files):
            allowed = np.zeros(len(self.files), dtype=bool)
            allowed[[self.by_file[f] for f in files if f in self.by_file]] = True
            sims = np.where(allowed[self.file_rows], sims, -np.inf)
        sims = np.where(sims > 0, sims, -np.inf)  # no likeness at all: not found
        keep = min(limit, int(np.isfinite(sims).sum()))
        if keep == 0:
            return []
        top = np.argpartition(-sims, keep - 1)[:keep] if keep < len(sims) else np.arange(len(sims))
        top = top[np.isfinite(sims[top])]
        order = top[np.lexsort((self.ids[top], -sims[top]))]
        return [(int(self.ids[i]), float(sims[i])) for i in order]


def matrix_of_rows(rows: Sequence[Any]) -> StoreMatrix:
    """Rows of (id, file id, attributes as JSON, vector blob), in id order, as a `StoreMatrix`."""
    files: dict[str, int] = {}
    attributes: list[Attributes] = []
    file_rows = np.empty(len(rows), dtype=np.int32)
    for i, (_, file_id, attrs, _) in enumerate(rows):
        if file_id not in files:
            files[file_id] = len(files)
            attributes.append(json.loads(attrs))
        file_rows[i] = files[file_id]
    dimensions = len(rows[0][3]) // 4 if rows else 0
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = from_blobs([bytes(r[3]) for r in rows], dimensions)
    return StoreMatrix(ids, file_rows, list(files), attributes, matrix)


def nearest_in(
    stores: Mapping[str, StoreMatrix], allowed: Mapping[str, list[str]], vector: Matrix | None, limit: int
) -> list[tuple[int, float]]:
    """The `limit` nearest chunks over every vector store (cosine similarity, best first, ties by chunk id)."""
    assert vector is not None
    found = [hit for s, m in stores.items() for hit in m.nearest(vector, allowed[s], limit)]
    return sorted(found, key=lambda h: (-h[1], h[0]))[:limit]
