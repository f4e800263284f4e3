"""What the Vector Stores API keeps (migration 10): `StoreRow`, `FileRow`, `BatchRow`, `FileCounts`, their
columns and how a row read back becomes one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm_responses.retrieval.attributes import Attributes

__all__ = [
    "BATCH_COLUMNS",
    "FILE_COLUMNS",
    "STORE_COLUMNS",
    "DAY_S",
    "BatchRow",
    "FileCounts",
    "FileRow",
    "StoreRow",
    "expiry",
    "file_row",
    "store_row",
]

STORE_COLUMNS = (
    "id, project, name, description, metadata, created_at, last_active_at, expires_days, expires_at"
)
FILE_COLUMNS = (
    "vector_store_id, file_id, project, batch_id, status, attributes, chunking, usage_bytes, last_error, "
    "created_at"
)
BATCH_COLUMNS = "id, vector_store_id, project, status, created_at"


DAY_S = 86400.0


def expiry(days: int | None, last_active_at: float) -> float | None:
    """When a vector store expires: `days` after its last activity (None: never)."""
    return None if days is None else last_active_at + days * DAY_S


@dataclass(frozen=True)
class StoreRow:
    """A vector store: its project, name, description, metadata, times and expiry (`expires_days` after
    `last_active_at`; None: never)."""

    id: str
    project: str
    name: str
    description: str | None
    metadata: dict[str, str]
    created_at: float
    last_active_at: float
    expires_days: int | None = None
    expires_at: float | None = None


@dataclass(frozen=True)
class FileRow:
    """A file in a vector store: its status, attributes, chunking strategy (as reported), bytes used, error
    (`{"code", "message"}`) and the batch that added it last."""

    vector_store_id: str
    file_id: str
    project: str
    batch_id: str | None
    status: str
    attributes: Attributes
    chunking: dict[str, Any]
    usage_bytes: int = 0
    last_error: dict[str, str] | None = None
    created_at: float = 0.0


@dataclass(frozen=True)
class BatchRow:
    id: str
    vector_store_id: str
    project: str
    status: str
    created_at: float


@dataclass(frozen=True)
class FileCounts:
    """Files by status, as `file_counts` reports them."""

    in_progress: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    total: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        total = self.in_progress + self.completed + self.failed + self.cancelled
        object.__setattr__(self, "total", total)

    def wire(self) -> dict[str, int]:
        return {
            "in_progress": self.in_progress,
            "completed": self.completed,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "total": self.total,
        }


def store_row(row: Sequence[Any]) -> StoreRow:
    days, expires_at = row[7], row[8]
    return StoreRow(
        id=str(row[0]),
        project=str(row[1]),
        name=str(row[2]),
        description=row[3],
        metadata=json.loads(row[4]),
        created_at=float(row[5]),
        last_active_at=float(row[6]),
        expires_days=None if days is None else int(days),
        expires_at=None if expires_at is None else float(expires_at),
    )


def file_row(row: Sequence[Any]) -> FileRow:
    return FileRow(
        str(row[0]), str(row[1]), str(row[2]), row[3], str(row[4]), json.loads(row[5]), json.loads(row[6]),
        int(row[7]), None if row[8] is None else json.loads(row[8]), float(row[9]),
    )  # fmt: skip
