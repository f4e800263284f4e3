"""`VectorStoreService`: the Vector Stores API over the chunk index and its rows: vector stores, their files and
file batches, per project (another project's: not found); its `searcher` (retrieval/search.py) is what the
`/search` route and the `file_search` tool call.

A vector store's bytes (its files' `usage_bytes`: their parsed text, their chunks' text and vectors) count in its
project's stored bytes. Its status is `expired` past `expires_at` (`expires_after` days after `last_active_at`, which a search
moves), else `in_progress` while a file is, else `completed`; an expired one takes no more files and is emptied
by `VectorStoreSweep`. Files are ingested by `Ingestion` in the background. A Files API file deleted leaves
every vector store that holds it (`forget_file`). `clock` is the time every expiry is judged by (tests set theirs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vllm_responses.engine.embedder import Embedder
from vllm_responses.protocol.errors import InvalidRequest, NotFound
from vllm_responses.protocol.vector_stores import (
    is_batch_id,
    new_batch_id,
    new_vector_store_id,
    parse_expires_after,
    parse_file_ids,
    parse_metadata,
    parse_text,
)
from vllm_responses.retrieval.attributes import Attributes, check_attributes
from vllm_responses.retrieval.chunking import parse_chunking_strategy
from vllm_responses.retrieval.index import ChunkIndex
from vllm_responses.retrieval.search import FoundChunk, VectorSearch, project_store
from vllm_responses.retrieval.vector_store_records import BatchRow, FileCounts, FileRow, StoreRow, expiry
from vllm_responses.retrieval.vector_store_rows import VectorStoreRows
from vllm_responses.service.ingestion import Ingestion
from vllm_responses.tools.files import FileService

__all__ = ["StoreView", "VectorStoreService"]


@dataclass(frozen=True)
class StoreView:
    """A vector store as reported: its row, status, file counts and bytes."""

    row: StoreRow
    status: str
    counts: FileCounts
    usage_bytes: int


class VectorStoreService:
    """Vector stores of each project over `rows` and `index`; new files handed to `ingestion`."""

    def __init__(
        self,
        rows: VectorStoreRows,
        index: ChunkIndex,
        files: FileService,
        embedder: Embedder | None,
        ingestion: Ingestion,
    ) -> None:
        self.rows = rows
        self.index = index
        self.files = files
        self.embedder = embedder
        self.ingestion = ingestion
        self.clock: Callable[[], float] = time.time
        self.searcher = VectorSearch(
            rows, index, embedder, ingestion.tokenizer, files.store, clock=lambda: self.clock()
        )

    def expired(self, row: StoreRow) -> bool:
        """Whether the vector store is past its `expires_at`, by `clock`."""
        return row.expires_at is not None and row.expires_at <= self.clock()

    # vector stores

    async def create(self, project: str, body: Mapping[str, Any]) -> StoreView:
        now = self.clock()
        days = parse_expires_after(body.get("expires_after"))
        row = StoreRow(
            id=new_vector_store_id(),
            project=project,
            name=parse_text(body.get("name"), "name", 256) or "",
            description=parse_text(body.get("description"), "description", 512),
            metadata=parse_metadata(body.get("metadata")),
            created_at=now,
            last_active_at=now,
            expires_days=days,
            expires_at=expiry(days, now),
        )
        file_ids = parse_file_ids(body.get("file_ids"))
        chunking = parse_chunking_strategy(body.get("chunking_strategy")).wire()
        files = await self._new_files(row, file_ids, "file_ids", chunking, {}, None)
        await self.rows.add_store(row)
        await self._add(files)
        return await self.view(row)

    async def get(self, vector_store_id: str, project: str) -> StoreRow:
        """`project`'s vector store; a 404 when it is unknown or another project's."""
        return await project_store(self.rows, vector_store_id, project)

    async def view(self, row: StoreRow) -> StoreView:
        counts = await self.rows.counts("vector_store_id", row.id)
        usage = await self.rows.usage_bytes(row.id)
        if self.expired(row):
            status = "expired"
        else:
            status = "in_progress" if counts.in_progress else "completed"
        return StoreView(row, status, counts, usage)

    async def all(self, project: str) -> list[StoreView]:
        return [await self.view(r) for r in await self.rows.stores(project)]

    async def update(self, vector_store_id: str, project: str, body: Mapping[str, Any]) -> StoreView:
        row = await self.get(vector_store_id, project)
        if "name" in body:
            row = replace(row, name=parse_text(body["name"], "name", 256) or "")
        if "metadata" in body:
            row = replace(row, metadata=parse_metadata(body["metadata"]))
        if "expires_after" in body:
            days = parse_expires_after(body["expires_after"])
            row = replace(row, expires_days=days, expires_at=expiry(days, row.last_active_at))
        await self.rows.put_store(row)
        return await self.view(row)

    async def delete(self, vector_store_id: str, project: str) -> str:
        row = await self.get(vector_store_id, project)
        await self.rows.delete_store(row.id)
        self.ingestion.stop(row.id)
        await self.index.delete_store(row.id)
        return row.id

    # files

    async def _new_files(
        self,
        store: StoreRow,
        file_ids: Sequence[str],
        param: str,
        chunking: dict[str, Any],
        attributes: Attributes,
        batch_id: str | None,
    ) -> list[FileRow]:
        """Rows for the project's files `file_ids` (each checked: a 404 naming `param[i]`, or `param` for the one
        `file_id`), in progress; a 400 `expired` when the vector store has expired."""
        if self.expired(store):
            raise InvalidRequest(
                f"The vector store {store.id} has expired: it takes no more files.",
                param="vector_store_id",
                code="expired",
            )
        if param == "file_id":
            found = [await self.files.get(file_ids[0], store.project, param)]
        else:
            found = await self.files.get_all(list(file_ids), store.project, param)
        adding = sum(f.bytes for f in found)
        if found:
            await self.files.check(store.project, adding, param)
        now = self.clock()
        return [
            FileRow(
                store.id, f.id, store.project, batch_id, "in_progress", attributes, chunking, 0, None, now
            )
            for f in found
        ]

    async def _add(self, files: list[FileRow], batch: BatchRow | None = None) -> None:
        for f in files:  # a file added again: its work here on the earlier copy stops
            self.ingestion.stop(f.vector_store_id, f.file_id)
        await self.rows.add_files(files, batch)
        if files:
            self.ingestion.wake()

    async def add_file(self, vector_store_id: str, project: str, body: Mapping[str, Any]) -> FileRow:
        store = await self.get(vector_store_id, project)
        file_id = body.get("file_id")
        if not isinstance(file_id, str) or not file_id:
            raise InvalidRequest(
                "Missing required parameter: 'file_id'.", param="file_id", code="missing_required_parameter"
            )
        chunking = parse_chunking_strategy(body.get("chunking_strategy")).wire()
        attributes = check_attributes(body.get("attributes"))
        (row,) = await self._new_files(store, [file_id], "file_id", chunking, attributes, None)
        await self._add([row])
        return row

    async def get_file(self, vector_store_id: str, file_id: str, project: str) -> FileRow:
        store = await self.get(vector_store_id, project)
        row = await self.rows.get_file(store.id, file_id)
        if row is None:
            raise NotFound(
                f"No file found with id '{file_id}' in vector store '{vector_store_id}'.", param="file_id"
            )
        return row

    async def set_attributes(
        self, vector_store_id: str, file_id: str, project: str, body: Mapping[str, Any]
    ) -> FileRow:
        row = await self.get_file(vector_store_id, file_id, project)
        if "attributes" not in body:
            raise InvalidRequest(
                "Missing required parameter: 'attributes'.",
                param="attributes",
                code="missing_required_parameter",
            )
        attributes = check_attributes(body["attributes"])
        await self.rows.set_file_attributes(row.vector_store_id, row.file_id, attributes)
        await self.index.set_attributes(row.vector_store_id, row.file_id, attributes)
        return replace(row, attributes=attributes)

    async def delete_file(self, vector_store_id: str, file_id: str, project: str) -> str:
        row = await self.get_file(vector_store_id, file_id, project)
        await self._remove(row)
        return row.file_id

    async def _remove(self, row: FileRow) -> None:
        """The file's row and chunks removed from its vector store, its ingestion here stopped."""
        await self.rows.delete_file(row.vector_store_id, row.file_id)
        self.ingestion.stop(row.vector_store_id, row.file_id)
        await self.index.delete_file(row.vector_store_id, row.file_id)

    async def forget_file(self, file_id: str) -> int:
        """The Files API file `file_id` (deleted) removed from every vector store that holds it; how many."""
        held = await self.rows.holding(file_id)
        for row in held:
            await self._remove(row)
        return len(held)

    async def file_content(self, vector_store_id: str, file_id: str, project: str) -> list[str]:
        """The file's parsed text in its parts (a PDF's pages, a PPTX's slides, else one); none until it is
        completed."""
        row = await self.get_file(vector_store_id, file_id, project)
        if row.status != "completed":
            return []
        return await self.rows.content(row.vector_store_id, row.file_id) or []

    # batches

    async def create_batch(self, vector_store_id: str, project: str, body: Mapping[str, Any]) -> BatchRow:
        store = await self.get(vector_store_id, project)
        if ("files" in body) == ("file_ids" in body):
            raise InvalidRequest("Give either 'file_ids' or 'files', one of them.", param="file_ids")
        batch = BatchRow(new_batch_id(), store.id, project, "in_progress", self.clock())
        if "file_ids" in body:
            ids = parse_file_ids(body["file_ids"])
            chunking = parse_chunking_strategy(body.get("chunking_strategy")).wire()
            attributes = check_attributes(body.get("attributes"))
            rows = await self._new_files(store, ids, "file_ids", chunking, attributes, batch.id)
        else:
            rows = await self._batch_files(store, body["files"], batch.id)
        if not rows:
            raise InvalidRequest("A batch needs at least one file.", param="file_ids")
        await self._add(rows, batch)
        return batch

    async def _batch_files(self, store: StoreRow, files: object, batch_id: str) -> list[FileRow]:
        """`files`: objects each with a `file_id` and its own `attributes` and `chunking_strategy`."""
        items = files if isinstance(files, list) else None
        if items is None or not all(isinstance(f, Mapping) for f in items):
            raise InvalidRequest("Invalid type for 'files': expected an array of objects.", param="files")
        ids = parse_file_ids([f.get("file_id") for f in items], "files")
        rows = await self._new_files(store, ids, "files", {}, {}, batch_id)
        return [
            replace(
                row,
                chunking=parse_chunking_strategy(
                    f.get("chunking_strategy"), f"files[{i}].chunking_strategy"
                ).wire(),
                attributes=check_attributes(f.get("attributes"), f"files[{i}].attributes"),
            )
            for i, (row, f) in enumerate(zip(rows, items, strict=True))
        ]

    async def get_batch(self, vector_store_id: str, batch_id: str, project: str) -> BatchRow:
        store = await self.get(vector_store_id, project)
        batch = await self.rows.get_batch(batch_id) if is_batch_id(batch_id) else None
        if batch is None or batch.vector_store_id != store.id:
            raise NotFound(f"No file batch found with id '{batch_id}'.", param="batch_id")
        return batch

    async def batch_status(self, batch: BatchRow) -> tuple[str, FileCounts]:
        counts = await self.rows.counts("batch_id", batch.id)
        if batch.status != "in_progress" or counts.in_progress:
            return batch.status, counts
        return ("failed" if counts.failed == counts.total else "completed"), counts

    async def cancel_batch(self, vector_store_id: str, batch_id: str, project: str) -> BatchRow:
        batch = await self.get_batch(vector_store_id, batch_id, project)
        status, _ = await self.batch_status(batch)
        if status == "in_progress" and await self.rows.cancel_batch(batch.id):
            for row in await self.rows.files(batch.vector_store_id, status="cancelled", batch_id=batch.id):
                self.ingestion.stop(row.vector_store_id, row.file_id)
                await self.index.delete_file(row.vector_store_id, row.file_id)
            return replace(batch, status="cancelled")
        return batch

    # search

    async def search_one(
        self, vector_store_id: str, project: str, queries: Sequence[str], **options: Any
    ) -> list[FoundChunk]:
        """A search of one vector store of `project`'s (the `/search` route), which becomes active."""
        return await self.searcher.search(project, [vector_store_id], queries, **options)
