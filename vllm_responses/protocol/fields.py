"""Which top-level fields a create body may carry: ours, and every one the `openai` SDK knows."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from vllm_responses.protocol.errors import InvalidRequest

__all__ = ["SDK_CREATE_FIELDS", "check_known_fields"]

logger = logging.getLogger(__name__)

# Every top-level field of the `openai` SDK's `ResponseCreateParams` (3.57; tests/protocol holds this to the
# installed SDK). Those the request model does not declare are accepted and ignored (logged), unless
# `parse_create_request` refuses them by name.
SDK_CREATE_FIELDS = frozenset(
    {
        "access_programs",
        "background",
        "background_options",
        "context_management",
        "conversation",
        "image",
        "include",
        "input",
        "instructions",
        "max_output_tokens",
        "max_tool_calls",
        "metadata",
        "model",
        "moderation",
        "parallel_tool_calls",
        "previous_response_id",
        "prompt",
        "prompt_cache_key",
        "prompt_cache_options",
        "prompt_cache_retention",
        "reasoning",
        "safety_identifier",
        "service_tier",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "text",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "truncation",
        "user",
    }
)


def check_known_fields(body: Mapping[str, Any], modelled: Collection[str]) -> None:
    """A top-level field neither in `modelled` nor known to the openai SDK is an `InvalidRequest` naming it
    (code `unknown_parameter`); SDK fields we do not model are logged as ignored."""
    for key in body:
        if key not in modelled and key not in SDK_CREATE_FIELDS:
            raise InvalidRequest(f"Unknown parameter: '{key}'.", param=str(key), code="unknown_parameter")
    ignored = sorted(k for k in body if k not in modelled)
    if ignored:
        logger.info("ignoring request fields this server does not use: %s", ", ".join(ignored))
