"""The response's echo of its request: the settings in effect, as the response object reports them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from vllm_responses.protocol.items import ResponseEcho
from vllm_responses.protocol.lenient import undeclared
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.protocol.tool_choice import ToolChoiceWebSearch

__all__ = ["VLLM_DEFAULTS", "EchoedSampling", "echoed_sampling", "max_output_tokens", "response_echo"]

# vLLM's own defaults for the sampling fields a response echoes (`SamplingParams`, and its `/v1/responses`).
VLLM_DEFAULTS: dict[str, float] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}


class EchoedSampling(TypedDict):
    """The sampling values in effect, as a response echoes them."""

    temperature: float
    top_p: float
    presence_penalty: float
    frequency_penalty: float


def response_echo(
    req: CreateResponseRequest, model_name: str, default_sampling: Mapping[str, Any]
) -> ResponseEcho:
    """The echoed fields of a response to `req`: only those we model (unknown fields inside a tool are
    accepted and ignored, never echoed), with the sampling values in effect (`default_sampling`: the engine's)."""
    tools = [
        t.model_dump(mode="json", by_alias=True, exclude_none=True, exclude=undeclared(t)) for t in req.tools
    ]
    for tool in tools:  # as OpenAI echoes them: a function tool's description and strict always present
        if tool["type"] == "function":
            tool.setdefault("description", None)
            tool.setdefault("strict", None)
        if tool["type"] == "mcp":  # an MCP server's credentials are not echoed (nor stored with the response)
            tool.pop("headers", None)
            tool.pop("authorization", None)
    choice = req.tool_choice
    sampling = echoed_sampling(req, default_sampling)  # the values in effect
    echo: ResponseEcho = {
        "model": model_name,
        "instructions": req.instructions,
        "tools": tools,
        "tool_choice": _echoed_choice(choice),
        "parallel_tool_calls": req.parallel_tool_calls,
        "temperature": sampling["temperature"],
        "top_p": sampling["top_p"],
        "presence_penalty": sampling["presence_penalty"],
        "frequency_penalty": sampling["frequency_penalty"],
        "store": req.store,
        "max_output_tokens": max_output_tokens(req, default_sampling),  # the budget in effect
        "max_tool_calls": req.max_tool_calls,
        "previous_response_id": req.previous_response_id,
        "metadata": req.metadata or {},
        "background": req.background,
        "text": req.text.model_dump(mode="json", by_alias=True, exclude_none=True)
        if req.text
        else {"format": {"type": "text"}},
        "truncation": req.truncation or "disabled",
        "user": req.user,
        # As OpenAI's API reports them (Open Responses requires them too); `summary` is the one reasoning
        # items are given (`generate_summary`, deprecated, read as `summary`).
        "reasoning": {"effort": req.reasoning.effort, "summary": req.summary} if req.reasoning else None,
        "top_logprobs": req.top_logprobs or 0,
        "service_tier": "default",
        "safety_identifier": req.safety_identifier,
        "prompt_cache_key": req.prompt_cache_key,
    }
    if req.conversation:
        echo["conversation"] = {"id": req.conversation}
    return echo


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


def _echoed_choice(choice: Any) -> Any:
    """`tool_choice` as sent, except a web search's under a type the SDK's `ToolChoiceTypes` has (it names only
    the preview types: `web_search` and its dated type are echoed as `web_search_preview`)."""
    if isinstance(choice, str):
        return choice
    if isinstance(choice, ToolChoiceWebSearch) and not choice.type.startswith("web_search_preview"):
        return {"type": "web_search_preview"}
    return choice.model_dump(mode="json")
