"""`ConversationService`: conversations and their items over the store, and the two steps responses take with them.

It knows no HTTP: unknown ids raise `NotFound` naming the parameter (`conversation_id`, `item_id`, or
`conversation` when a create-response names it). A response created with `conversation` reads the
conversation's items before its own input (`history`) and, once it has ended, `append`s its input and
output items; `RunDriver` decides which endings append (`APPENDING_STATUSES` in driver.py).
Every item a conversation keeps has an id unique within it: an item sent with an id the conversation
already holds (or twice in one batch) is kept under a fresh one. A conversation belongs to the project that
created it (`project`: the caller's, from its API key); to any other project it does not exist (`NotFound`).
"""

from __future__ import annotations

import json
import logging
import time
from functools import partial
from typing import Any

from vllm_responses.context.images import check_input_images_off_loop
from vllm_responses.context.input_budget import InputBudget
from vllm_responses.context.references import resolve_stored_items
from vllm_responses.context.turns import input_to_items
from vllm_responses.protocol.conversations import conversation_item
from vllm_responses.protocol.errors import InvalidRequest, NotFound
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.inputs import InputItem
from vllm_responses.service.admission import Admission
from vllm_responses.service.quotas import ProjectLimits
from vllm_responses.store.base import DEFAULT_PROJECT, ResponseStore, StoredConversation, stored_size
from vllm_responses.store.sealing import ReasoningSeal
from vllm_responses.tools.file_inputs import FileInputs

__all__ = ["ConversationService"]

logger = logging.getLogger(__name__)


class ConversationService:
    """`files` reads the `input_file` parts of the items added (None: they are kept unread); items with files to
    read or images to fetch are added under `admission` (a running slot, as a response takes; None: not
    admitted); `seal` opens the sealed copies of the reasoning items added (None: such an item is kept without
    its text)."""

    def __init__(
        self,
        store: ResponseStore,
        files: FileInputs | None = None,
        limits: ProjectLimits | None = None,
        admission: Admission | None = None,
        seal: ReasoningSeal | None = None,
    ) -> None:
        self.store = store
        self.files = files
        self.limits = limits
        self.admission = admission
        self.seal = seal

    async def create(
        self, items: list[InputItem], metadata: dict[str, str] | None, project: str = DEFAULT_PROJECT
    ) -> StoredConversation:
        raw = input_to_items(items)
        budget = await self._budget(items, raw)  # before anything is read or stored
        conversation = StoredConversation(new_id("conv"), time.time(), dict(metadata or {}), project)
        kept = await self._kept(
            conversation.id, await self._resolved(raw, budget, project), check_store=False
        )
        await self._check_store(project, kept)
        await self.store.create_conversation(conversation, kept)
        return conversation

    async def get(
        self, conversation_id: str, project: str = DEFAULT_PROJECT, *, param: str = "conversation_id"
    ) -> StoredConversation:
        found = await self.store.get_conversation(conversation_id)
        if found is None or found.project != project:
            raise NotFound(f"Conversation with id {conversation_id!r} not found.", param=param)
        return found

    async def update(
        self, conversation_id: str, metadata: dict[str, str], project: str = DEFAULT_PROJECT
    ) -> StoredConversation:
        await self.get(conversation_id, project)
        updated = await self.store.update_conversation(conversation_id, metadata)
        if updated is None:
            raise NotFound(f"Conversation with id {conversation_id!r} not found.", param="conversation_id")
        return updated

    async def delete(self, conversation_id: str, project: str = DEFAULT_PROJECT) -> None:
        await self.get(conversation_id, project)
        if not await self.store.delete_conversation(conversation_id):
            raise NotFound(f"Conversation with id {conversation_id!r} not found.", param="conversation_id")

    # --- items ----------------------------------------------------------------------------------------

    async def add_items(
        self, conversation_id: str, items: list[InputItem], project: str = DEFAULT_PROJECT
    ) -> list[dict[str, Any]]:
        """Append input items; the items as kept (with their ids)."""
        raw = input_to_items(items)
        budget = await self._budget(items, raw)  # before anything is read or stored
        await self.get(conversation_id, project)
        kept = await self._kept(conversation_id, await self._resolved(raw, budget, project))
        await self._check_store(project, kept)
        if not await self.store.add_conversation_items(conversation_id, kept):
            raise NotFound(f"Conversation with id {conversation_id!r} not found.", param="conversation_id")
        return kept

    async def _check_store(self, project: str, items: list[dict[str, Any]]) -> None:
        """The project's stored bytes bound `items` (a 400 or a 429, `ProjectLimits.check_store`)."""
        if self.limits is not None:
            adding = stored_size(*(json.dumps(it) for it in items))
            await self.limits.check_store(self.store, project, adding, "items")

    async def _budget(self, items: list[InputItem], raw: list[dict[str, Any]]) -> InputBudget | None:
        """The images and files of items to add (wire form) counted and their inline bytes summed, from the
        body alone (a 400 naming the part past a limit: `FileInputs.check`), then their inline images decoded
        and checked as a response's are (format, bytes, pixels; on the image threads): the budget their
        reading spends."""
        if self.files is None:
            return None
        budget = self.files.check(raw, "items")
        await check_input_images_off_loop(items, self.files.image_limits, "items")
        return budget

    async def _resolved(
        self, raw: list[dict[str, Any]], budget: InputBudget | None, project: str
    ) -> list[dict[str, Any]]:
        """Items to add (wire form) as stored items: their files read, their references to stored items
        resolved."""
        if self.files is not None and self.files.reads(raw):
            slot = await self.admission.acquire() if self.admission is not None else None  # a 429 when full
            try:
                raw = await self.files.read(raw, "items", project, budget)
            finally:
                if slot is not None:
                    slot.release()
        opener = None if self.seal is None else partial(self.seal.open, project=project)
        return await resolve_stored_items(self.store, raw, "items", project, opener)

    async def page(
        self,
        conversation_id: str,
        project: str = DEFAULT_PROJECT,
        *,
        order: str,
        limit: int,
        after: str | None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """One page of items in `order` after item `after`, and whether more follow."""
        await self.get(conversation_id, project)
        if after is not None and await self.store.get_conversation_item(conversation_id, after) is None:
            raise InvalidRequest(f"No item with id {after!r} in this conversation.", param="after")
        items = await self.store.list_conversation_items(
            conversation_id, after=after, limit=limit + 1, descending=order == "desc"
        )
        return items[:limit], len(items) > limit

    async def item(
        self, conversation_id: str, item_id: str, project: str = DEFAULT_PROJECT
    ) -> dict[str, Any]:
        await self.get(conversation_id, project)
        found = await self.store.get_conversation_item(conversation_id, item_id)
        if found is None:
            raise NotFound(f"No item {item_id!r} in conversation {conversation_id!r}.", param="item_id")
        return found

    async def delete_item(
        self, conversation_id: str, item_id: str, project: str = DEFAULT_PROJECT
    ) -> StoredConversation:
        """Delete one item; the conversation (what the API answers with)."""
        conversation = await self.get(conversation_id, project)
        if not await self.store.delete_conversation_item(conversation_id, item_id):
            raise NotFound(f"No item {item_id!r} in conversation {conversation_id!r}.", param="item_id")
        return conversation

    # --- the steps of a response created with `conversation` ------------------------------------------

    async def history(self, conversation_id: str, project: str = DEFAULT_PROJECT) -> list[dict[str, Any]]:
        """The conversation's items, oldest first, to go before a response's input; 404 naming `conversation`
        (another project's too)."""
        await self.get(conversation_id, project, param="conversation")
        return await self.store.list_conversation_items(conversation_id)

    async def append(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        """Append a finished response's items; a conversation deleted meanwhile is only logged."""
        kept = await self._kept(conversation_id, items)
        if not await self.store.add_conversation_items(conversation_id, kept):
            logger.info(
                "conversation %s was deleted before its response ended: nothing appended", conversation_id
            )

    async def _kept(
        self, conversation_id: str, items: list[dict[str, Any]], *, check_store: bool = True
    ) -> list[dict[str, Any]]:
        """Items as the conversation keeps them, each with an id it does not hold yet."""
        kept: list[dict[str, Any]] = []
        seen: set[str] = set()
        for item in items:
            out = conversation_item(item)
            taken = out["id"] in seen or (
                check_store and await self.store.get_conversation_item(conversation_id, out["id"]) is not None
            )
            if taken:
                out["id"] = new_id(str(out["id"]).split("_", 1)[0] if "_" in str(out["id"]) else "item")
            seen.add(out["id"])
            kept.append(out)
        return kept
