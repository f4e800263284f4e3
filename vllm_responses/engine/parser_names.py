"""Parser names: the path each `--tool-call-parser` / `--reasoning-parser` name takes, and the parser it builds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from vllm_responses.engine.base import EngineError
from vllm_responses.engine.parsers.base import ToolParser, get_parser

__all__ = [
    "HARMONY_REASONING_PARSERS",
    "THINK_REASONING_PARSERS",
    "check_parser_names",
    "load_parser",
    "parser_factory",
    "reasoning_parser_table",
    "reasoning_parser_route",
    "tool_parser_route",
    "tool_parser_table",
    "vllm_reasoning_parser_names",
    "vllm_tool_parser_names",
]

# `--reasoning-parser` names whose models think inside <think>...</think>: our streaming `ReasoningSplitter`
# handles them (text only, no token ids needed). The harmony format (gpt-oss) carries its own analysis
# channel, which our `harmony` tool parser reads. Every other name in vLLM's registry goes to vLLM's parser.
THINK_REASONING_PARSERS = frozenset({"deepseek_r1", "deepseek_v3", "qwen3", "glm45"})
HARMONY_REASONING_PARSERS = frozenset({"openai_gptoss", "gpt_oss"})

ToolRoute = Literal["ours", "vllm"]
ReasoningRoute = Literal["think", "harmony", "vllm"]


def vllm_tool_parser_names() -> list[str]:
    """Every name in vLLM's `ToolParserManager` (its `--tool-call-parser` names)."""
    from vllm.tool_parsers import ToolParserManager

    return ToolParserManager.list_registered()


def vllm_reasoning_parser_names() -> list[str]:
    """Every name in vLLM's `ReasoningParserManager` (its `--reasoning-parser` names)."""
    from vllm.reasoning import ReasoningParserManager

    return ReasoningParserManager.list_registered()


def tool_parser_route(name: str) -> ToolRoute:
    """`ours` for a name (or alias) our registry has, which wins; `vllm` for one only vLLM's has."""
    import vllm_responses.engine.parsers  # noqa: F401  # the package registers what it ships
    from vllm_responses.engine.parsers.base import parser_names

    if name in parser_names():
        return "ours"
    if name in vllm_tool_parser_names():
        return "vllm"
    known = sorted(set(parser_names()) | set(vllm_tool_parser_names()))
    raise EngineError(
        f"unknown tool-call parser {name!r}; valid names: {', '.join(known)}", code="parser_not_found"
    )


def reasoning_parser_route(name: str) -> ReasoningRoute:
    """`think` (our splitter), `harmony` (the harmony parser's own channels) or `vllm` (vLLM's parser)."""
    if name in THINK_REASONING_PARSERS:
        return "think"
    if name in HARMONY_REASONING_PARSERS:
        return "harmony"
    if name in vllm_reasoning_parser_names():
        return "vllm"
    known = sorted(THINK_REASONING_PARSERS | HARMONY_REASONING_PARSERS | set(vllm_reasoning_parser_names()))
    raise EngineError(
        f"reasoning parser {name!r} is not supported here; supported: {', '.join(known)}",
        code="parser_not_found",
    )


def check_parser_names(tool_parser: str | None, reasoning_parser: str | None) -> None:
    """Refuse unknown names before the model loads (an `EngineError` naming the valid ones)."""
    if tool_parser:
        tool_parser_route(tool_parser)
    if reasoning_parser:
        reasoning_parser_route(reasoning_parser)


def tool_parser_table() -> list[tuple[str, ToolRoute]]:
    """Every `--tool-call-parser` name (ours and vLLM's) with the path it takes."""
    import vllm_responses.engine.parsers  # noqa: F401
    from vllm_responses.engine.parsers.base import parser_names

    names = sorted(set(parser_names()) | set(vllm_tool_parser_names()))
    return [(n, tool_parser_route(n)) for n in names]


def reasoning_parser_table() -> list[tuple[str, ReasoningRoute]]:
    """Every `--reasoning-parser` name (vLLM's, and the aliases we take) with the path it takes."""
    names = sorted(THINK_REASONING_PARSERS | HARMONY_REASONING_PARSERS | set(vllm_reasoning_parser_names()))
    return [(n, reasoning_parser_route(n)) for n in names]


def load_parser(name: str) -> type[ToolParser]:
    import vllm_responses.engine.parsers  # noqa: F401  # the package registers what it ships

    try:
        return get_parser(name)
    except KeyError as exc:
        raise EngineError(
            f"tool-call parser {name!r} is not available: {exc}", code="parser_not_found"
        ) from exc


def parser_factory(
    tool_parser: str, reasoning_parser: str | None, tokenizer: Any, model_name: str
) -> Callable[..., ToolParser]:
    """Builds the parser of one model call: ours by name, or vLLM's (tool-call and/or reasoning parser) through
    `VllmParserAdapter` where the name is only vLLM's (`parser_names.py` decides)."""
    vllm_tool = tool_parser if tool_parser_route(tool_parser) == "vllm" else None
    vllm_reasoning = (
        reasoning_parser if reasoning_parser and reasoning_parser_route(reasoning_parser) == "vllm" else None
    )
    if vllm_tool is None and vllm_reasoning is None:
        return load_parser(tool_parser)
    from vllm_responses.engine.vllm_parser import vllm_parser_factory

    inner = None if vllm_tool else load_parser(tool_parser)
    try:
        return vllm_parser_factory(vllm_tool, vllm_reasoning, tokenizer, inner, model_name)
    except Exception as exc:  # vLLM's check against the tokenizer, or a package its parser needs
        raise EngineError(f"vLLM's parser cannot be used here: {exc}", code="parser_not_found") from exc
