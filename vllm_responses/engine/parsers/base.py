"""The parser contract (an incremental decoder) and the registry of parsers by name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar, TypeVar

from vllm_responses.engine.types import Delta, TextDelta, ToolCall, ToolResult, ToolSpec

__all__ = ["ToolParser", "PlainTextParser", "register", "get_parser", "parser_names"]


class ToolParser(ABC):
    """Turns a model's output text into deltas, fed in arbitrary chunks.

    Contract (checked by the shared suite in `tests/engine/parsers/`):
    - `feed(chunk)` returns the deltas that are certain after this chunk; it keeps only an unfinished
      tail (a possible partial tag) and never re-scans the whole output.
    - `finish()` flushes the tail: an open call is closed with `ToolCallEnd`, and text that turned out
      not to be a call is returned as `TextDelta`. Nothing raises: unparseable output stays text.
    - Any chunking of the same output yields the same calls and the same concatenated text.
    - Tool calls are numbered 0, 1, ... per parser instance; each call is `ToolCallStart`, then
      `ToolCallDelta`s whose `arguments` concatenate to JSON object text, then `ToolCallEnd`.

    `render_call` / `render_result` write an earlier call and its result back as text in this
    format, for chat templates that have no tool-call or tool role of their own.
    """

    name: ClassVar[str]

    def __init__(self, tools: Sequence[ToolSpec] = ()) -> None:
        self.tools = tuple(tools)

    @abstractmethod
    def feed(self, text: str) -> list[Delta]: ...

    @abstractmethod
    def finish(self) -> list[Delta]: ...

    def feed_tokens(self, text: str, token_ids: Sequence[int] | None) -> list[Delta]:
        """`feed` with the token ids the text decodes from (what the engine calls); parsers that read
        token ids (vLLM's, through `engine/vllm_parser.py`) use them, text parsers ignore them."""
        return self.feed(text)

    def render_call(self, call: ToolCall) -> str:
        return f'<tool_call>\n{{"name": "{call.name}", "arguments": {call.arguments}}}\n</tool_call>'

    def render_result(self, result: ToolResult) -> str:
        return f"<tool_response>\n{result.output}\n</tool_response>"


_REGISTRY: dict[str, type[ToolParser]] = {}
P = TypeVar("P", bound=type[ToolParser])


def register(*names: str) -> Callable[[P], P]:
    """Class decorator: make a parser available under `names` (the first is its canonical name)."""

    def decorate(cls: P) -> P:
        for n in names:
            _REGISTRY[n] = cls
        return cls

    return decorate


def get_parser(name: str) -> type[ToolParser]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown tool-call parser {name!r}; known: {', '.join(parser_names())}") from None


def parser_names() -> list[str]:
    return sorted(_REGISTRY)


@register("none", "plain")
class PlainTextParser(ToolParser):
    """No tool calls: everything is text."""

    name = "none"

    def feed(self, text: str) -> list[Delta]:
        return [TextDelta(text)] if text else []

    def finish(self) -> list[Delta]:
        return []
