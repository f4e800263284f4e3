"""A create request's sampling fields and tool choice, as the engine takes them."""

from __future__ import annotations

from typing import Any, Literal

from vllm_responses.engine.types import CODE_TOOL_NAME, ForcedTool, Sampling, ToolChoice
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.protocol.tool_choice import (
    ToolChoiceAllowed,
    ToolChoiceBuiltin,
    ToolChoiceCustom,
    ToolChoiceFunction,
    ToolChoiceMcp,
    ToolChoiceObject,
)

__all__ = ["engine_tool_choice", "request_sampling"]


def request_sampling(req: CreateResponseRequest, text_format: dict[str, Any] | None) -> Sampling:
    """The sampling every model call of the response starts from (the loop sets budget and constraints)."""
    stop = [req.stop] if isinstance(req.stop, str) else req.stop or []
    return Sampling(
        temperature=req.temperature,
        top_p=req.top_p,
        text_format=text_format,
        seed=req.seed,
        top_k=req.top_k,
        min_p=req.min_p,
        presence_penalty=req.presence_penalty,
        frequency_penalty=req.frequency_penalty,
        repetition_penalty=req.repetition_penalty,
        stop=tuple(stop),
        stop_token_ids=tuple(req.stop_token_ids or ()),
        ignore_eos=req.ignore_eos,
        min_tokens=req.min_tokens,
        logit_bias=req.logit_bias,
        include_stop_str_in_output=req.include_stop_str_in_output,
        skip_special_tokens=req.skip_special_tokens,
    )


def engine_tool_choice(choice: Literal["none", "auto", "required"] | ToolChoiceObject) -> ToolChoice:
    """A create body's `tool_choice` as the engine takes it (a named tool forced; `allowed_tools`: its mode, the
    tools offered being restricted by the service; an MCP choice: `auto`, the agent loop forces it once the
    server's tools are listed)."""
    if isinstance(choice, (ToolChoiceFunction, ToolChoiceCustom)):
        return ForcedTool(choice.name)
    if isinstance(choice, ToolChoiceBuiltin):
        return ForcedTool(CODE_TOOL_NAME)
    if isinstance(choice, ToolChoiceAllowed):
        return choice.mode
    if isinstance(choice, ToolChoiceMcp):
        return "auto"
    return choice
