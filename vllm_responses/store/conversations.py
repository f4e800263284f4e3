"""Stored conversations: the in-memory half of `ConversationStore` (base.py), mixed into `MemoryStore`."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from vllm_responses.store.base import StoredConversation

__all__ = ["MemoryConversations"]


@dataclass
class _Held:
    conversation: StoredConversation
    items: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)


class MemoryConversations:
    """The conversation half of `MemoryStore`: at most `max_rows` conversations, least recently updated out."""

    max_rows: int
    max_conversation_items: int = 10_000

    def __init__(self) -> None:
        self._conversations: OrderedDict[str, _Held] = OrderedDict()

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
            held.items.setdefault(item["id"], item)
        while len(held.items) > self.max_conversation_items:
            held.items.popitem(last=False)
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
        return held is not None and held.items.pop(item_id, None) is not None
