"""`VectorStoreRows`: the interface of what the Vector Stores API keeps (migration 10): vector stores, the files each
holds and file batches, in the chunk index's database (`SQLiteVectorStoreRows`, `PostgresVectorStoreRows`).

A file's row is also its ingestion's state: `in_progress` until a replica `claim`s it (a lease of `lease_s`,
renewed while it works) and `finish`es it (`completed` with its parsed text, `failed` with its error, or nothing
when it was cancelled or removed meanwhile). A row still `in_progress` whose lease expired, or that has none, is
taken up by the next `claim` of any process sharing the database; two claims at once never take the same file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from vllm_responses.retrieval.attributes import Attributes
from vllm_responses.retrieval.vector_store_records import BatchRow, FileCounts, FileRow, StoreRow

__all__ = ["VectorStoreRows"]


class VectorStoreRows(Protocol):
    """The rows of vector stores, their files and batches; each method one statement or transaction."""

    # vector stores

    async def add_store(self, store: StoreRow) -> None: ...

    async def get_store(self, vector_store_id: str) -> StoreRow | None: ...

    async def stores(self, project: str) -> list[StoreRow]:
        """`project`'s vector stores, oldest first."""
        ...

    async def put_store(self, store: StoreRow) -> None:
        """The vector store's name, description, metadata, activity and expiry replaced."""
        ...

    async def touch(self, vector_store_id: str, now: float, expires_at: float | None) -> None:
        """The vector store used at `now` (a search): its `last_active_at` and expiry moved."""
        ...

    async def delete_store(self, vector_store_id: str) -> bool:
        """The vector store's row, its files' rows and its batches' rows deleted (its chunks are the index's)."""
        ...

    async def expired_stores(self, now: float, limit: int) -> list[str]:
        """Up to `limit` vector stores past their `expires_at` at `now` that still hold a file, longest expired
        first."""
        ...

    async def empty_store(self, vector_store_id: str) -> None:
        """The vector store's files' rows and its batches' rows deleted; the vector store stays."""
        ...

    async def counts(self, where: str, value: str) -> FileCounts:
        """Files by status of one vector store (`where` "vector_store_id") or one batch ("batch_id")."""
        ...

    async def usage_bytes(self, vector_store_id: str) -> int: ...

    async def project_bytes(self, project: str) -> int:
        """What `project`'s vector stores keep (their files' `usage_bytes`)."""
        ...

    # files

    async def add_files(self, files: Sequence[FileRow], batch: BatchRow | None = None) -> None:
        """The files added (a file already in the vector store is replaced, to be ingested again, its lease
        dropped), with the batch that adds them, in one transaction."""
        ...

    async def get_file(self, vector_store_id: str, file_id: str) -> FileRow | None: ...

    async def files(
        self, vector_store_id: str, *, status: str | None = None, batch_id: str | None = None
    ) -> list[FileRow]:
        """The vector store's files (of `status`, of the batch `batch_id`), oldest first."""
        ...

    async def holding(self, file_id: str) -> list[FileRow]:
        """Every vector store's row of the Files API file `file_id`."""
        ...

    async def file_ids(self, after: str, limit: int) -> list[str]:
        """Up to `limit` of the Files API files some vector store holds, in order of their ids after `after`."""
        ...

    async def content(self, vector_store_id: str, file_id: str) -> list[str] | None:
        """The file's parsed text in its parts, as its ingestion kept it (None: not kept, or not ingested)."""
        ...

    async def set_file_attributes(
        self, vector_store_id: str, file_id: str, attributes: Attributes
    ) -> bool: ...

    async def delete_file(self, vector_store_id: str, file_id: str) -> bool: ...

    # ingestion

    async def claim(self, owner: str, now: float, lease_s: float, limit: int) -> list[FileRow]:
        """Up to `limit` files `in_progress` with no live lease (none, expired, or `owner`'s own from a life
        before this one), now leased to `owner` until `now + lease_s`; oldest first."""
        ...

    async def release_own(self, owner: str) -> None:
        """`owner`'s leases dropped (its previous life's, at start: its files are free to claim at once)."""
        ...

    async def renew(self, owner: str, until: float) -> None:
        """`owner`'s leases of files still in progress extended to `until`."""
        ...

    async def finish(
        self,
        file: FileRow,
        owner: str,
        status: str,
        usage_bytes: int = 0,
        error: dict[str, str] | None = None,
        content: Sequence[str] | None = None,
    ) -> bool:
        """The file, still `in_progress` under `owner`'s lease (and not added again since `file` was read),
        marked `status` (with its parsed text in parts, `content`); False when it is not (cancelled, removed or
        taken up again meanwhile)."""
        ...

    # batches

    async def get_batch(self, batch_id: str) -> BatchRow | None: ...

    async def cancel_batch(self, batch_id: str) -> bool:
        """The batch marked cancelled, and its files still in progress; False when it was not in progress."""
        ...
