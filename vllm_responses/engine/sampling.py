"""Map `Sampling`, tools and `tool_choice` to vLLM `SamplingParams` (incl. structured-output constraints)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from vllm_responses.engine.base import EngineRejected
from vllm_responses.engine.call_shapes import call_shape
from vllm_responses.engine.call_tags import (
    ANY_OBJECT,
    calls_or_json_tag,
    constrains_free_calls,
    forced_calls_tag,
    free_calls_tag,
)
from vllm_responses.engine.types import ForcedTool, GenerateRequest, Sampling, ToolSpec

if TYPE_CHECKING:
    from vllm import SamplingParams

__all__ = [
    "MARKDOWN_FORMATS",
    "GENERATION_DEFAULTS",
    "STRUCTURED_KEYS",
    "SPECIAL_TOKEN_FORMATS",
    "answer_beside_tools",
    "answer_constraint",
    "forced_call_constraint",
    "forced_tools",
    "structured_constraint",
    "to_sampling_params",
    "with_format_tokens",
]

STRUCTURED_KEYS = ("regex", "json", "choice", "grammar")
# Parser names whose (only) call is a ```python fenced block: forced by prefill, not by a grammar.
MARKDOWN_FORMATS = frozenset({"markdown_code", "markdown"})

# Parser names whose call markers are special tokens of their models (Mistral's `[TOOL_CALLS]` / `[ARGS]`,
# gpt-oss's `<|channel|>` ...): the output text keeps special tokens, or the parser would never see them.
SPECIAL_TOKEN_FORMATS = frozenset({"mistral", "harmony", "openai", "gpt_oss"})


def _bad_request(message: str) -> EngineRejected:
    return EngineRejected(message, code="invalid_request_error")


def forced_tools(request: GenerateRequest) -> tuple[ToolSpec, ...]:
    """The tools one of which the model must call (empty when the choice is free or no tools)."""
    choice = request.tool_choice
    if not request.tools or choice in ("auto", "none"):
        return ()
    if choice == "required":
        return request.tools
    if isinstance(choice, ForcedTool):
        named = tuple(t for t in request.tools if t.name == choice.name)
        if not named:
            raise _bad_request(f"tool_choice names {choice.name!r}, which is not among the tools offered")
        return named
    raise _bad_request(f"unsupported tool_choice {choice!r}")


def forced_call_constraint(
    tools: Sequence[ToolSpec], parser_name: str, *, parallel: bool = False
) -> dict[str, Any] | None:
    """The constraint forcing a call to one of `tools` in the format of `parser_name`: a structural tag
    (`call_shapes.SHAPES`); None for the markdown formats, whose one call (the code interpreter's) the
    engine forces by prefilling "```python\\n"; a 400 naming `tool_choice` where the format cannot write
    the forced call (a function in a markdown format; a format with no known call shape)."""
    if parser_name in MARKDOWN_FORMATS:
        if not any(t.code_interpreter for t in tools):
            raise EngineRejected(
                f"the {parser_name} tool-call format writes only code-interpreter calls (```python blocks); "
                "tool_choice cannot force a call to a function with this model",
                code="invalid_request_error",
            )
        return None
    shape = call_shape(parser_name, forced=True)
    if shape is None:
        raise EngineRejected(
            f"tool_choice cannot force a call with the {parser_name!r} tool-call format: "
            "use tool_choice 'auto' or a format listed in docs/parsers.md",
            code="invalid_request_error",
        )
    return forced_calls_tag(tools, parallel=parallel, shape=shape)


def _user_structured(structured: dict[str, Any]) -> dict[str, Any]:
    keys = [k for k in STRUCTURED_KEYS if k in structured]
    extra = set(structured) - set(STRUCTURED_KEYS)
    if len(keys) != 1 or extra:
        raise _bad_request(
            f"`structured` takes exactly one of {', '.join(STRUCTURED_KEYS)}; got {sorted(structured)}"
        )
    key = keys[0]
    value = structured[key]
    if key == "choice" and not (isinstance(value, list) and value and all(isinstance(c, str) for c in value)):
        raise _bad_request("`structured.choice` must be a non-empty list of strings")
    if key in ("regex", "grammar") and not (isinstance(value, str) and value):
        raise _bad_request(f"`structured.{key}` must be a non-empty string")
    if key == "json" and not isinstance(value, (dict, str)):
        raise _bad_request("`structured.json` must be a JSON schema object")
    return {key: value}


def _text_format(fmt: dict[str, Any]) -> dict[str, Any] | None:
    kind = fmt.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return {"json_object": True}
    if kind == "json_schema":
        schema = fmt.get("schema")
        if schema is None and isinstance(fmt.get("json_schema"), dict):  # chat-completions shape
            schema = fmt["json_schema"].get("schema")
        if not isinstance(schema, dict):
            raise _bad_request("text.format json_schema needs a `schema` object")
        return {"json": schema}
    raise _bad_request(f"unsupported text.format type {kind!r}")


def answer_beside_tools(request: GenerateRequest) -> bool:
    """Whether the call may call tools (`tool_choice` auto) and its answer must be JSON (`text.format`
    json_schema / json_object, no `structured` extension): the calls-or-JSON case of `answer_constraint`."""
    fmt = request.sampling.text_format or {}
    return (
        bool(request.tools)
        and request.tool_choice == "auto"
        and request.sampling.structured is None
        and fmt.get("type") not in (None, "text")
    )


def answer_constraint(
    text: dict[str, Any], tools: Sequence[ToolSpec], parser_name: str, *, parallel: bool
) -> dict[str, Any]:
    """`text` (the `text.format` constraint) for a call offered `tools`: calls or the JSON and nothing else
    (`call_tags.calls_or_json_tag`), the calls in the format's shape (the Hermes shape where the format forces
    Hermes calls: auto, fallback); `text` alone where no tool is offered or the format has no call shape
    (markdown, llama3_python_tag, none: that call answers, it calls no tool)."""
    shape = call_shape(parser_name, forced=True)
    if not tools or shape is None:
        return text
    schema = text["json"] if isinstance(text.get("json"), dict) else ANY_OBJECT
    return calls_or_json_tag(tools, schema, parallel=parallel, shape=shape)


def structured_constraint(
    request: GenerateRequest, parser_name: str, *, prefilled: bool = False
) -> dict[str, Any] | None:
    """Keyword arguments for vLLM's `StructuredOutputsParams`, or None for free decoding.

    Precedence: the `structured` extension; then a forced tool call (`forced_call_constraint`: a structural
    tag for well-formed calls in the parser's format only, one or several with `parallel_tool_calls`;
    markdown formats: None, the engine prefills "```python\\n"); then `text_format` (json_schema /
    json_object), beside the tools offered (`answer_constraint`: calls or the JSON), except in a call whose
    code call the engine opens by a prefill (`prefilled`: the format holds a later call); then, for formats
    with a call shape offering a strict function or a custom tool with a grammar, a structural tag holding
    free calls to them (`call_tags.free_calls_tag`).
    """
    sampling = request.sampling
    if sampling.structured is not None:
        return _user_structured(sampling.structured)
    forced = forced_tools(request)
    if forced:
        return forced_call_constraint(forced, parser_name, parallel=request.parallel_tool_calls)
    offered = request.tools if request.tool_choice != "none" else ()
    text = _text_format(sampling.text_format) if sampling.text_format and not prefilled else None
    if text is not None:
        return answer_constraint(text, offered, parser_name, parallel=request.parallel_tool_calls)
    shape = call_shape(parser_name)
    if shape is not None and constrains_free_calls(offered):
        return free_calls_tag(offered, parallel=request.parallel_tool_calls, shape=shape)
    return None


def with_format_tokens(sampling: Sampling, parser_name: str) -> Sampling:
    """`sampling` with special tokens kept in the output text where the format's markers are special tokens."""
    if parser_name in SPECIAL_TOKEN_FORMATS and sampling.skip_special_tokens:
        return replace(sampling, skip_special_tokens=False)
    return sampling


# `Sampling` fields passed to `SamplingParams` under the same name when set (None: the engine's default).
_OPTIONAL = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "seed",
    "logit_bias",
)
# The model's generation-config values vLLM applies when a request leaves them unset (as its own server does).
GENERATION_DEFAULTS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
)


def to_sampling_params(
    sampling: Sampling,
    *,
    max_tokens: int,
    structured: dict[str, Any] | None = None,
    stop: Sequence[str] = (),
    bad_words: Sequence[str] = (),
    defaults: Mapping[str, Any] | None = None,
) -> SamplingParams:
    """vLLM `SamplingParams` streaming DELTA outputs. A field the request leaves unset takes `defaults` (the
    model's generation config, `Engine.default_sampling`), else vLLM's own default. `stop` (the engine's own
    stop strings) is added to the request's; `bad_words` (the engine's) are never generated."""
    from vllm import SamplingParams
    from vllm.exceptions import VLLMClientError
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

    kwargs: dict[str, Any] = {"output_kind": RequestOutputKind.DELTA, "max_tokens": max_tokens}
    kwargs.update({k: v for k, v in (defaults or {}).items() if k in GENERATION_DEFAULTS})
    kwargs.update({k: getattr(sampling, k) for k in _OPTIONAL if getattr(sampling, k) is not None})
    if sampling.stop or stop:
        kwargs["stop"] = [*sampling.stop, *(s for s in stop if s not in sampling.stop)]
    if bad_words:
        kwargs["bad_words"] = list(bad_words)
    if sampling.stop_token_ids:
        kwargs["stop_token_ids"] = list(sampling.stop_token_ids)
    kwargs["ignore_eos"] = sampling.ignore_eos
    kwargs["min_tokens"] = sampling.min_tokens
    kwargs["include_stop_str_in_output"] = sampling.include_stop_str_in_output
    kwargs["skip_special_tokens"] = sampling.skip_special_tokens
    if sampling.logprobs is not None:  # the sampled token's logprob and the N most likely at its place
        kwargs["logprobs"] = sampling.logprobs
    try:
        if structured:
            kwargs["structured_outputs"] = StructuredOutputsParams(**structured)
        return SamplingParams(**kwargs)
    except (ValueError, TypeError, VLLMClientError) as exc:
        raise _bad_request(f"invalid sampling parameters: {exc}") from exc
