"""Minimal stand-in parsers ("hermes", "markdown_code") for these tests, used only when the real ones are absent."""

from __future__ import annotations

import json

from vllm_responses.chat import CODE_TOOL_NAME, Delta, TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart
from vllm_responses.parsers.base import ToolParser, parser_names, register

__all__ = ["ensure_test_parsers"]


class _HermesStandIn(ToolParser):
    """Streams text up to the first "<"; buffers from there and on `finish` splits out
    `<tool_call>{json}</tool_call>` blocks."""

    name = "hermes"

    def __init__(self, tools=()) -> None:
        super().__init__(tools)
        self._buf = ""

    def feed(self, text: str) -> list[Delta]:
        if self._buf or "<" in text:
            head, lt, tail = text.partition("<") if not self._buf else ("", "", text)
            self._buf += lt + tail
            return [TextDelta(head)] if head else []
        return [TextDelta(text)] if text else []

    def finish(self) -> list[Delta]:
        out: list[Delta] = []
        rest, index = self._buf, 0
        while (start := rest.find("<tool_call>")) >= 0 and (end := rest.find("</tool_call>", start)) >= 0:
            if rest[:start].strip():
                out.append(TextDelta(rest[:start]))
            obj = json.loads(rest[start + len("<tool_call>") : end])
            out += [
                ToolCallStart(index, obj["name"]),
                ToolCallDelta(index, json.dumps(obj["arguments"])),
                ToolCallEnd(index),
            ]
            index += 1
            rest = rest[end + len("</tool_call>") :]
        if rest:
            out.append(TextDelta(rest))
        return out


class _MarkdownStandIn(ToolParser):
    """A ```python block is a call to the code tool (emitted on `finish`)."""

    name = "markdown_code"

    def __init__(self, tools=()) -> None:
        super().__init__(tools)
        self._buf = ""

    def feed(self, text: str) -> list[Delta]:
        self._buf += text
        return []

    def finish(self) -> list[Delta]:
        head, fence, code = self._buf.partition("```python\n")
        if not fence:
            return [TextDelta(self._buf)] if self._buf else []
        code = code.split("```", 1)[0]
        out: list[Delta] = [TextDelta(head)] if head else []
        return out + [
            ToolCallStart(0, CODE_TOOL_NAME),
            ToolCallDelta(0, json.dumps({"code": code})),
            ToolCallEnd(0),
        ]

    def render_call(self, call) -> str:
        return f"```python\n{json.loads(call.arguments)['code']}\n```"


def ensure_test_parsers() -> list[str]:
    """Register the stand-ins under names not yet taken; return the names registered."""
    import vllm_responses.parsers  # noqa: F401

    added = []
    for cls in (_HermesStandIn, _MarkdownStandIn):
        if cls.name not in parser_names():
            register(cls.name)(cls)
            added.append(cls.name)
    return added
