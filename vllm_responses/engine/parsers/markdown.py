"""Markdown code blocks as code-interpreter calls, for models without a tool-call format."""

from __future__ import annotations

from vllm_responses.engine.parsers.base import register
from vllm_responses.engine.parsers.regions import CodeRegion, code_arguments
from vllm_responses.engine.parsers.scan import Region, ScanningParser
from vllm_responses.engine.types import CODE_TOOL_NAME, Delta, TextDelta, ToolCall, ToolResult

__all__ = ["MarkdownCodeParser", "MarkdownRegion", "FENCE", "PYTHON_LANGS"]

FENCE = "```"
PYTHON_LANGS = frozenset({"python", "py", "python3", "py3"})


class MarkdownRegion(Region):
    """After a fence: a python block is a call (its end is the closing fence or the output's end)."""

    end_markers = (FENCE,)

    def __init__(self, parser: ScanningParser) -> None:
        super().__init__(parser)
        self._info: str | None = ""
        self._code: CodeRegion | None = None

    def feed(self, text: str) -> list[Delta]:
        if self._info is None:
            return self._code.feed(text) if self._code else [TextDelta(text)]
        self._info += text
        nl = self._info.find("\n")
        if nl < 0:
            return []
        info, body, self._info = self._info[:nl], self._info[nl + 1 :], None
        if info.strip().lower() not in PYTHON_LANGS:
            return [TextDelta(FENCE + info + "\n" + body)]
        self._code = CodeRegion(self.parser)
        return self._code.begin() + (self._code.feed(body) if body else [])

    def close(self, marker: str | None) -> list[Delta]:
        if self._code is not None:
            return self._code.close(marker)
        if self._info is not None:
            return [TextDelta(FENCE + self._info + (marker or ""))]
        return [TextDelta(marker or "")]


@register("markdown_code", "markdown")
class MarkdownCodeParser(ScanningParser):
    """```` ```python ```` blocks run in the code interpreter; an unterminated block at the end counts
    (the engine stops generation at the closing fence)."""

    name = "markdown_code"
    openers = (FENCE,)

    def open(self, marker: str) -> Region | None:
        return MarkdownRegion(self)

    def render_call(self, call: ToolCall) -> str:
        code = code_arguments(call.arguments) if call.name == CODE_TOOL_NAME else None
        if code is None:
            return super().render_call(call)
        return f"{FENCE}python\n{code}\n{FENCE}"

    def render_result(self, result: ToolResult) -> str:
        # Weak models with no tool format need telling what the output is for.
        return (
            f"<tool_response>\n{result.output}\n</tool_response>\n"
            "That is what the code printed. Answer my question with it, in words."
        )
