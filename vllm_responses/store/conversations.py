"""Stored conversations: the SQLite and in-memory halves of `ConversationStore` (base.py), mixed into responses.py's stores."""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

import aiosqlite

from vllm_responses.store.base import StoredConversation

__all__ = ["MemoryConversations", "SQLiteConversations"]


class SQLiteConversations:
    """The conversation half of `SQLiteStore` (which provides `db`, `max_age_s` and `max_rows`)."""

    max_age_s: float
    max_rows: int
    max_conversation_items: int = 10_000
    _conversations_created: int = 0

    @property
    def db(self) -> aiosqlite.Connection:
        raise NotImplementedError

    async def create_conversation(
        self, conversation: StoredConversation, items: list[dict[str, Any]]
    ) -> None:
        await self.db.execute(
            "INSERT OR IGNORE INTO conversations VALUES (?, ?, ?, ?)",
            (conversation.id, conversation.created_at, time.time(), json.dumps(conversation.metadata)),
        )
        await self._insert_items(conversation.id, items)
        self._conversations_created += 1
        if self._conversations_created % 500 == 0:
            await self._prune_conversations()
        await self.db.commit()

    async def get_conversation(self, conversation_id: str) -> StoredConversation | None:
        async with self.db.execute(
            "SELECT id, created_at, metadata FROM conversations WHERE id = ?", (conversation_id,)
        ) as cur:
            row = await cur.fetchone()
        return None if row is None else StoredConversation(row[0], row[1], json.loads(row[2]))

    async def update_conversation(
        self, conversation_id: str, metadata: dict[str, str]
    ) -> StoredConversation | None:
        await self.db.execute(
            "UPDATE conversations SET metadata = ?, updated_at = ? WHERE id = ?",
            (json.dumps(metadata), time.time(), conversation_id),
        )
        await self.db.commit()
        return await self.get_conversation(conversation_id)

    async def delete_conversation(self, conversation_id: str) -> bool:
        cur = await self.db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        await self.db.execute("DELETE FROM conversation_items WHERE conversation_id = ?", (conversation_id,))
        await self.db.commit()
        return cur.rowcount > 0

    async def add_conversation_items(self, conversation_id: str, items: list[dict[str, Any]]) -> bool:
        cur = await self.db.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = ?", (time.time(), conversation_id)
        )
        if cur.rowcount == 0:
            return False
        await self._insert_items(conversation_id, items)
        await self.db.commit()
        return True

    async def _insert_items(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        await self.db.executemany(
            "INSERT OR IGNORE INTO conversation_items (conversation_id, id, item) VALUES (?, ?, ?)",
            [(conversation_id, it["id"], json.dumps(it)) for it in items],
        )
        await self.db.execute(  # the oldest items past the per-conversation bound
            "DELETE FROM conversation_items WHERE conversation_id = ? AND seq IN (SELECT seq FROM "
            "conversation_items WHERE conversation_id = ? ORDER BY seq DESC LIMIT -1 OFFSET ?)",
            (conversation_id, conversation_id, self.max_conversation_items),
        )

    async def list_conversation_items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> list[dict[str, Any]]:
        sql = "SELECT item FROM conversation_items WHERE conversation_id = ?"
        args: list[Any] = [conversation_id]
        if after is not None:
            sql += (
                f" AND seq {'<' if descending else '>'} "
                "(SELECT seq FROM conversation_items WHERE conversation_id = ? AND id = ?)"
            )
            args += [conversation_id, after]
        sql += f" ORDER BY seq {'DESC' if descending else 'ASC'} LIMIT ?"
        args.append(-1 if limit is None else limit)
        async with self.db.execute(sql, args) as cur:
            rows = await cur.fetchall()
        return [json.loads(row[0]) for row in rows]

    async def get_conversation_item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        async with self.db.execute(
            "SELECT item FROM conversation_items WHERE conversation_id = ? AND id = ?",
            (conversation_id, item_id),
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            return None
        item: dict[str, Any] = json.loads(row[0])
        return item

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        cur = await self.db.execute(
            "DELETE FROM conversation_items WHERE conversation_id = ? AND id = ?", (conversation_id, item_id)
        )
        await self.db.commit()
        return cur.rowcount > 0

    async def _prune_conversations(self) -> None:
        await self.db.execute(
            "DELETE FROM conversations WHERE updated_at < ?", (time.time() - self.max_age_s,)
        )
        await self.db.execute(
            "DELETE FROM conversations WHERE id IN "
            "(SELECT id FROM conversations ORDER BY updated_at DESC LIMIT -1 OFFSET ?)",
            (self.max_rows,),
        )
        await self.db.execute(
            "DELETE FROM conversation_items WHERE conversation_id NOT IN (SELECT id FROM conversations)"
        )


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
