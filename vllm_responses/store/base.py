"""The store's interface: what is kept (`StoredResponse`, `StoredConversation`, `StoredEvent`, `StoredFile`,
`StoredUpload`) and the `ResponseStore` protocol every backend implements, made of its conversation, event,
lease and file parts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from vllm_responses.protocol.items import ResponseObject
from vllm_responses.protocol.status import UNFINISHED
from vllm_responses.store.notify import LocalNotices

__all__ = [
    "CHUNK_BYTES",
    "DEFAULT_PROJECT",
    "UNFINISHED_SQL",
    "ConversationStore",
    "EventStore",
    "FileStore",
    "LeaseStore",
    "ResponseStore",
    "StoredConversation",
    "StoredEvent",
    "StoredFile",
    "StoredResponse",
    "StoredUpload",
    "chunked",
    "item_rows",
    "own_items",
    "stored_size",
]

# The project of everything made without a key of a keys file (no key, or `--api-key`), and of the rows kept
# before projects existed (migration 5).
DEFAULT_PROJECT = "default"

# `protocol.status.UNFINISHED` as an SQL list, written into queries as a literal (so the partial index `responses_unfinished`
# serves them).
UNFINISHED_SQL = "(" + ", ".join(f"'{status}'" for status in UNFINISHED) + ")"

# A file's bytes are kept in rows of at most this many bytes (`file_chunks`), so no one value is huge.
CHUNK_BYTES = 1024 * 1024

# A stream event of a background response: its sequence number and the one-line JSON its SSE `data:` line
# carries, so a replica that re-streams it writes the very bytes the running replica wrote.
StoredEvent = tuple[int, str]


@dataclass(frozen=True)
class StoredResponse:
    """One response as kept: the response object (with full code outputs), its input items, the whole
    conversation up to and including its output (what `previous_response_id` continues from),
    whether the client asked for code outputs, and the project whose API key made it (`DEFAULT_PROJECT`
    when the server has no keys file; another project's key finds it not at all)."""

    id: str
    response: ResponseObject
    input_items: list[dict[str, Any]]
    history: list[dict[str, Any]]
    include_outputs: bool
    created_at: float
    project: str = DEFAULT_PROJECT


@dataclass(frozen=True)
class StoredConversation:
    """A conversation's id, creation time, metadata and project (its items are kept apart, in order)."""

    id: str
    created_at: float
    metadata: dict[str, str] = field(default_factory=dict)
    project: str = DEFAULT_PROJECT


@dataclass(frozen=True)
class StoredFile:
    """A file of the Files API as kept: its row (the bytes are kept apart, in chunks of `CHUNK_BYTES` under
    its id); `expires_at` None: kept until deleted."""

    id: str
    project: str
    filename: str
    purpose: str
    bytes: int
    created_at: float
    expires_at: float | None = None


@dataclass(frozen=True)
class StoredUpload:
    """An upload of the Uploads API: what it will make (`bytes` of `filename`), its status (`pending`,
    `completed`, `cancelled`; one past `expires_at` while pending is expired), the file it made once completed
    and the `expires_after` seconds that file gets. Its parts' bytes are kept in chunks under each part's id."""

    id: str
    project: str
    filename: str
    purpose: str
    mime_type: str
    bytes: int
    created_at: float
    expires_at: float
    status: str = "pending"
    file_id: str | None = None
    file_expires_s: float | None = None


def chunked(data: bytes) -> list[bytes]:
    """`data` cut into the rows it is kept in (`CHUNK_BYTES` each; empty data is no row)."""
    return [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)]


def own_items(record: StoredResponse) -> list[dict[str, Any]]:
    """The items a response brought: its input, then its output (the full items kept in its history)."""
    own = {it.get("id") for it in [*record.input_items, *record.response.get("output", [])]}
    return [it for it in record.history if it.get("id") in own]


def stored_size(*texts: str) -> int:
    """The bytes a store writes for these JSON texts (UTF-8): what a project's stored bytes count."""
    return sum(len(t.encode()) for t in texts)


def item_rows(record: StoredResponse) -> list[tuple[str, str, str, str]]:
    """The `items` rows of a response's own items: (project, item id, response id, item as JSON). Item ids are
    keyed within their project (migration 7): input ids are the client's, and another project may use one."""
    return [(record.project, it["id"], record.id, json.dumps(it)) for it in own_items(record) if it.get("id")]


class ConversationStore(Protocol):
    """Conversations and their items. Items are kept in the order added; listing is by that order.

    A conversation is an id, a creation time, its metadata and an ordered list of items (Responses API items
    in wire form, each with an id unique within the conversation). Bounds: conversations idle past the
    store's age and past its row count are deleted (by last update, so a live conversation stays), and a
    conversation keeps at most `max_conversation_items` items (the oldest go).
    """

    async def create_conversation(
        self, conversation: StoredConversation, items: list[dict[str, Any]]
    ) -> None: ...
    async def get_conversation(self, conversation_id: str) -> StoredConversation | None: ...
    async def update_conversation(
        self, conversation_id: str, metadata: dict[str, str]
    ) -> StoredConversation | None:
        """The conversation with its metadata replaced; None when there is no such conversation."""
        ...

    async def delete_conversation(self, conversation_id: str) -> bool: ...
    async def add_conversation_items(self, conversation_id: str, items: list[dict[str, Any]]) -> bool:
        """Append `items` (each with an `id`; an id the conversation already holds is skipped); False when
        there is no such conversation."""
        ...

    async def list_conversation_items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> list[dict[str, Any]]:
        """Items in order (or reversed), those after item `after` in that order, at most `limit` of them."""
        ...

    async def get_conversation_item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None: ...
    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool: ...


class EventStore(Protocol):
    """The stream events of background responses, by response id and sequence number. Events go with their
    response (`delete`, and the store's bounds: `prune` drops the events of responses no longer kept)."""

    async def append_events(self, response_id: str, events: list[StoredEvent]) -> None:
        """Keep `events` of `response_id` (one transaction; a sequence number kept already is skipped)."""
        ...

    async def events_after(self, response_id: str, after: int, limit: int = 1000) -> list[StoredEvent]:
        """The kept events of `response_id` with a sequence number above `after`, in order, at most `limit`."""
        ...


class LeaseStore(Protocol):
    """Leases on running responses (the `leases` table, migration 3), which runs/replicas.py uses: one lease
    row per response a replica runs (taken before its first record is written, dropped after its last),
    renewed by that replica's heartbeat, and flagged when another replica asks for it to be cancelled. A
    response still `queued`/`in_progress` whose lease expired, or that has none, is abandoned: its replica
    stopped."""

    async def take_lease(self, response_id: str, owner: str, expires_at: float) -> None: ...
    async def renew_leases(self, owner: str, expires_at: float) -> list[str]:
        """Extend every lease of `owner`; returns the ids of its responses another replica asked to cancel."""
        ...

    async def release_lease(self, response_id: str) -> None: ...
    async def request_cancel(self, response_id: str) -> bool:
        """Flag the lease of `response_id` for cancelling; False when no replica holds one."""
        ...

    async def abandoned(self, now: float, dead_owner: str | None = None) -> list[str]:
        """Ids of the unfinished responses with no lease, a lease expired at `now`, or one of `dead_owner`."""
        ...


class FileStore(Protocol):
    """Files (the Files API) and uploads (the Uploads API), each of a project. A file is a row and its bytes in
    chunks (`chunked`) under its id; an upload is a row, and each of its parts a row with its bytes in chunks
    under the part's id, which `complete_upload` hands to the file it makes (no byte is copied). An expired
    file, and the parts of an upload past its expiry, are dropped by `sweep_files` (and `prune`)."""

    async def add_file(self, file: StoredFile, data: bytes) -> None:
        """Keep `file` and its bytes (one transaction)."""
        ...

    async def get_file(self, file_id: str) -> StoredFile | None: ...
    async def list_files(
        self,
        project: str,
        *,
        purpose: str | None = None,
        after: str | None = None,
        limit: int | None = None,
        descending: bool = True,
    ) -> list[StoredFile]:
        """`project`'s files (of `purpose`) by creation, newest first (or oldest), those after file `after` in
        that order (an `after` not among them: none), at most `limit`; expired ones are left out."""
        ...

    async def read_chunks(self, owner_id: str, start: int, count: int) -> list[bytes]:
        """Chunks `start` .. `start + count - 1` of the bytes kept under `owner_id` (a file or a part), in order."""
        ...

    async def delete_file(self, file_id: str) -> bool:
        """Delete the file and its bytes; False when there was none."""
        ...

    async def add_upload(self, upload: StoredUpload) -> None: ...
    async def get_upload(self, upload_id: str) -> StoredUpload | None: ...
    async def add_upload_part(self, upload_id: str, part_id: str, created_at: float, data: bytes) -> bool:
        """Keep a part of the upload (and its bytes); False when the upload is not pending."""
        ...

    async def upload_parts(self, upload_id: str) -> dict[str, int]:
        """The parts of a pending upload: their ids and sizes in bytes."""
        ...

    async def complete_upload(self, upload_id: str, part_ids: list[str], file: StoredFile) -> bool:
        """In one transaction: the upload, if still pending, marked completed with `file`, which is kept with
        the parts' bytes in the order of `part_ids` (the other parts are dropped); False when not pending."""
        ...

    async def cancel_upload(self, upload_id: str) -> bool:
        """A pending upload marked cancelled, its parts dropped; False when it was not pending."""
        ...

    async def sweep_files(self, now: float) -> None:
        """Delete the files expired at `now`, and the parts of pending uploads past their expiry (the upload
        marked `expired`); upload rows are kept a day past their expiry."""
        ...


class ResponseStore(ConversationStore, LeaseStore, EventStore, FileStore, Protocol):
    """Where responses (and conversations) live between requests: `MemoryStore` (memory.py: one process),
    `SQLiteStore` (sqlite.py: one machine, the default), `PostgresStore` (postgres.py: replicas share it).
    `store_for` (open.py) picks one from `--db`. Every method is one atomic step (a write that spans tables
    is one transaction), so a replica sharing the database sees a response whole or not at all. Opening
    migrates the schema (migrations.py). Bounds: responses older than `max_age_s` or past the newest
    `max_rows` go (at open, then every few hundred writes of this process, and at `prune()`); an item found
    by `find_item` goes with its response, and so do the stream events of a background response
    (`EventStore`).
    """

    notices: LocalNotices  # wake-ups from other replicas (Postgres LISTEN/NOTIFY; others: none, waits poll)
    # Made for several replicas (Postgres): a stored foreground response is recorded (and leased) when it
    # starts too, so that the other replicas see it running, not a 404.
    shared: bool

    async def open(self) -> None:
        """Connect and migrate (`SchemaTooNew` when the database is newer than this code), then prune."""
        ...

    async def aclose(self) -> None: ...
    async def save(self, record: StoredResponse) -> None:
        """Insert or replace the response `record.id`, with its own items (input, then output)."""
        ...

    async def get(self, response_id: str) -> StoredResponse | None: ...
    async def delete(self, response_id: str) -> bool:
        """Delete the response, its items and its stream events; False when there was none."""
        ...

    async def unfinished(self) -> list[StoredResponse]:
        """The responses kept while still `queued` or `in_progress` (those kept as acknowledged: background
        ones, and on a shared store foreground ones too)."""
        ...

    async def find_item(self, item_id: str, project: str = DEFAULT_PROJECT) -> dict[str, Any] | None:
        """An input or output item of a stored response of `project`, by its id (what an `item_reference`
        names)."""
        ...

    async def prune(self) -> None:
        """Apply the bounds now: responses and conversations past their age or row count are deleted."""
        ...

    async def stored_bytes(self, project: str) -> int:
        """What `project` keeps: the bytes of its responses (the response, its input items and history, as
        written), of its conversations' items (`stored_size`), of its files and of its pending uploads' parts;
        stream events are not counted."""
        ...
