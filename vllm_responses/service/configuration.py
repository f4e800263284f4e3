"""The settings a context's `configuration_update` items carry, applied to the request that continues it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vllm_responses.protocol.configuration_items import ConfigurationUpdateInput
from vllm_responses.protocol.options import TextConfig
from vllm_responses.protocol.requests import CreateResponseRequest

__all__ = ["configured"]


def configured(req: CreateResponseRequest, items: Iterable[Mapping[str, Any]]) -> CreateResponseRequest:
    """`req` with the reasoning effort and text format of the context's updates, the latest of each (an
    update holds until a later one replaces it, over what the request itself sets); `req` when none."""
    reasoning, text = req.reasoning, req.text
    for raw in items:
        if raw.get("type") != "configuration_update":
            continue
        update = ConfigurationUpdateInput.model_validate(raw)
        reasoning = update.applied_to(reasoning)
        if update.text is not None:
            text = (text or TextConfig()).model_copy(update={"format": update.text.format})
    if reasoning is req.reasoning and text is req.text:
        return req
    return req.model_copy(update={"reasoning": reasoning, "text": text})
