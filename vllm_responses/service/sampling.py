"""A create request's sampling fields: as `chat.Sampling` for the engine, and as the response echoes them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

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

__all__ = [
    "VLLM_DEFAULTS",
    "EchoedSampling",
    "echoed_sampling",
    "engine_tool_choice",
    "max_output_tokens",
    "request_sampling",
]

# vLLM's own defaults for the sampling fields a response echoes (`SamplingParams`, and its `/v1/responses`).
VLLM_DEFAULTS: dict[str, float] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}


class EchoedSampling(TypedDict):
    temperature: float
    top_p: float
    presence_penalty: float
    frequency_penalty: float


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


def echoed_sampling(req: CreateResponseRequest, defaults: Mapping[str, Any]) -> EchoedSampling:
    """The values in effect: the request's, else the engine's defaults (the model's generation config, as
    `Engine.default_sampling` reports it), else vLLM's."""

    def value(name: str, sent: float | None) -> float:
        return float(sent if sent is not None else defaults.get(name, VLLM_DEFAULTS[name]))

    return {
        "temperature": value("temperature", req.temperature),
        "top_p": value("top_p", req.top_p),
        "presence_penalty": value("presence_penalty", req.presence_penalty),
        "frequency_penalty": value("frequency_penalty", req.frequency_penalty),
    }


def max_output_tokens(req: CreateResponseRequest, defaults: Mapping[str, Any]) -> int | None:
    """The response's output-token budget: the request's, else the model's generation config
    (`max_new_tokens`, which vLLM reports as `max_tokens`; the embedded default model sets one), else none."""
    if req.max_output_tokens is not None:
        return req.max_output_tokens
    value = defaults.get("max_tokens")
    return int(value) if value is not None else None


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
