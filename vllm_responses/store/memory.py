"""The store in this process's memory, bounded: `MemoryStore` (tests, or `--db :memory:`).

`MemoryStore` is the responses part of `ResponseStore` over one class per other part (conversations, events,
leases), each a `_Dicts`: the dictionaries and bound they all share; files and uploads are `MemoryFiles`'s."""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from vllm_responses.protocol.status import UNFINISHED
from vllm_responses.store.base import (
    DEFAULT_PROJECT,
    StoredConversation,
    StoredEvent,
    StoredResponse,
    own_items,
    stored_size,
)
from vllm_responses.store.memory_files import MemoryFiles
from vllm_responses.store.notify import LocalNotices

__all__ = ["MemoryStore"]


@dataclass
class _Held:
    conversation: StoredConversation
    items: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)
    sizes: dict[str, int] = field(default_factory=dict)  # item id -> its bytes (`stored_size`)


class _Dicts(MemoryFiles):
    """What every part of `MemoryStore` keeps: responses (oldest first), conversations (least recently
    updated first), stream events and leases, and the bound on responses and conversations."""

    shared = False

    def __init__(self, max_rows: int = 10_000) -> None:
        super().__init__()
        self._conversations: OrderedDict[str, _Held] = OrderedDict()
        self._events: dict[str, dict[int, str]] = {}
        self.max_rows = max_rows
        self._rows: dict[str, StoredResponse] = {}
        self._sizes: dict[str, int] = {}  # response id -> its bytes (`stored_size`)
        self._leases: dict[str, list[Any]] = {}  # response id -> [owner, expires_at, cancel requested]
        self.notices = LocalNotices()

    def _unfinished(self) -> list[StoredResponse]:
        return [r for r in self._rows.values() if r.response.get("status") in UNFINISHED]


class _Conversations(_Dicts):
    """Conversations and their items (`ConversationStore`): at most `max_rows` conversations, least recently
    updated out."""

    max_conversation_items: int = 10_000

    def _touch(self, conversation_id: str) -> _Held | None:
        held = self._conversations.get(conversation_id)
        if held is not None:
            self._conversations.move_to_end(conversation_id)
        return held

    async def create_conversation(
        self, conversation: StoredConversation, items: list[dict[str, Any]]
    ) -> None:
        self._conversations[conversation.id] = _Held(conversation)
        await self.add_conversation_items(conversation.id, items)
        while len(self._conversations) > self.max_rows:
            self._conversations.popitem(last=False)

    async def get_conversation(self, conversation_id: str) -> StoredConversation | None:
        held = self._conversations.get(conversation_id)
        return None if held is None else held.conversation

    async def update_conversation(
        self, conversation_id: str, metadata: dict[str, str]
    ) -> StoredConversation | None:
        held = self._touch(conversation_id)
        if held is None:
            return None
        held.conversation = replace(held.conversation, metadata=dict(metadata))
        return held.conversation

    async def delete_conversation(self, conversation_id: str) -> bool:
        return self._conversations.pop(conversation_id, None) is not None

    async def add_conversation_items(self, conversation_id: str, items: list[dict[str, Any]]) -> bool:
        held = self._touch(conversation_id)
        if held is None:
            return False
        for item in items:
            if item["id"] not in held.items:
                held.items[item["id"]] = item
                held.sizes[item["id"]] = stored_size(json.dumps(item))
        while len(held.items) > self.max_conversation_items:
            held.sizes.pop(held.items.popitem(last=False)[0], None)
        return True

    async def list_conversation_items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> list[dict[str, Any]]:
        held = self._conversations.get(conversation_id)
        if held is None:
            return []
        ordered = list(held.items.values())
        if descending:
            ordered.reverse()
        if after is not None:
            ids = [it["id"] for it in ordered]
            ordered = ordered[ids.index(after) + 1 :] if after in ids else []
        return ordered if limit is None else ordered[:limit]

    async def get_conversation_item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        held = self._conversations.get(conversation_id)
        return None if held is None else held.items.get(item_id)

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        held = self._conversations.get(conversation_id)
        if held is None:
            return False
        held.sizes.pop(item_id, None)
        return held.items.pop(item_id, None) is not None


class _Events(_Dicts):
    """Background responses' stream events (`EventStore`), dropped with their response (`_drop_events`)."""

    async def append_events(self, response_id: str, events: list[StoredEvent]) -> None:
        kept = self._events.setdefault(response_id, {})
        for seq, text in events:
            kept.setdefault(seq, text)

    async def events_after(self, response_id: str, after: int, limit: int = 1000) -> list[StoredEvent]:
        kept = self._events.get(response_id, {})
        return sorted((seq, text) for seq, text in kept.items() if seq > after)[:limit]

    def _drop_events(self, response_id: str) -> None:
        self._events.pop(response_id, None)


class _Leases(_Dicts):
    """Leases on running responses (`LeaseStore`; one process: its leases are its own runs)."""

    async def take_lease(self, response_id: str, owner: str, expires_at: float) -> None:
        self._leases[response_id] = [owner, expires_at, False]

    async def renew_leases(self, owner: str, expires_at: float) -> list[str]:
        mine = [(rid, lease) for rid, lease in self._leases.items() if lease[0] == owner]
        for _rid, lease in mine:
            lease[1] = expires_at
        return [rid for rid, lease in mine if lease[2]]

    async def release_lease(self, response_id: str) -> None:
        self._leases.pop(response_id, None)

    async def request_cancel(self, response_id: str) -> bool:
        lease = self._leases.get(response_id)
        if lease is not None:
            lease[2] = True
        return lease is not None

    async def abandoned(self, now: float, dead_owner: str | None = None) -> list[str]:
        def gone(rid: str) -> bool:
            lease = self._leases.get(rid)
            return lease is None or lease[1] < now or lease[0] == dead_owner

        return [r.id for r in self._unfinished() if gone(r.id)]


class MemoryStore(_Conversations, _Leases, _Events):
    """A bounded in-process store (tests, or `--db :memory:`): at most `max_rows` responses, oldest out."""

    async def open(self) -> None:
        return None

    async def aclose(self) -> None:
        self._rows.clear()

    async def prune(self) -> None:
        await self.sweep_files(time.time())  # responses are bounded as they go: `save` drops the oldest

    async def save(self, record: StoredResponse) -> None:
        self._rows.pop(record.id, None)
        self._rows[record.id] = record
        texts = (record.response, record.input_items, record.history)
        self._sizes[record.id] = stored_size(*(json.dumps(t) for t in texts))
        while len(self._rows) > self.max_rows:
            gone = self._rows.pop(next(iter(self._rows))).id
            self._drop_events(gone)
            self._sizes.pop(gone, None)

    async def get(self, response_id: str) -> StoredResponse | None:
        return self._rows.get(response_id)

    async def delete(self, response_id: str) -> bool:
        self._drop_events(response_id)
        self._sizes.pop(response_id, None)
        return self._rows.pop(response_id, None) is not None

    async def stored_bytes(self, project: str) -> int:
        responses = sum(self._sizes.get(r.id, 0) for r in self._rows.values() if r.project == project)
        held = [h for h in self._conversations.values() if h.conversation.project == project]
        return responses + sum(sum(h.sizes.values()) for h in held) + self._file_bytes(project)

    async def unfinished(self) -> list[StoredResponse]:
        return self._unfinished()

    async def find_item(self, item_id: str, project: str = DEFAULT_PROJECT) -> dict[str, Any] | None:
        for record in reversed(self._rows.values()):
            for item in own_items(record) if record.project == project else ():
                if item.get("id") == item_id:
                    return item
        return None
