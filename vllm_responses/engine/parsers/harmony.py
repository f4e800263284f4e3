"""OpenAI harmony (gpt-oss): analysis -> reasoning, final -> text, `to=functions.X` / `to=python` -> calls."""

from __future__ import annotations

import re

from vllm_responses.engine.parsers.base import register
from vllm_responses.engine.parsers.regions import ArgsRegion, CodeRegion, StreamRegion, code_arguments
from vllm_responses.engine.parsers.scan import Region, ScanningParser
from vllm_responses.engine.types import CODE_TOOL_NAME, Delta, ToolCall, ToolResult

__all__ = ["HarmonyParser", "HarmonyRegion"]

START, CHANNEL, MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
END_MARKERS = ("<|end|>", "<|call|>", "<|return|>")
# what generation can begin with when the prompt ends with `<|start|>assistant`
_HEADER_STARTS = (CHANNEL, " to=", "to=", "<|constrain|>", MESSAGE)
_RECIPIENT = re.compile(r"to=([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*([^\s<]+)")


class HarmonyRegion(Region):
    """One message: its header up to `<|message|>`, then a body decoded by channel and recipient."""

    end_markers = END_MARKERS

    def __init__(self, parser: ScanningParser, header: str = "", channel: str | None = None) -> None:
        super().__init__(parser)
        self._head = header
        self._body: Region | None = None
        if channel is not None:
            self._body = self._make_body(channel, None)

    def _make_body(self, channel: str, recipient: str | None) -> Region:
        if recipient is None or recipient == "assistant":
            return StreamRegion(self.parser, END_MARKERS, reasoning=channel == "analysis")
        if recipient == "python" or recipient.startswith("python."):
            return CodeRegion(self.parser, END_MARKERS)
        name = recipient.removeprefix("functions.")
        return ArgsRegion(self.parser, name, "", END_MARKERS)

    def feed(self, text: str) -> list[Delta]:
        if self._body is not None:
            return self._body.feed(text)
        self._head += text
        at = self._head.find(MESSAGE)
        if at < 0:
            return []
        head, body = self._head[:at], self._head[at + len(MESSAGE) :]
        ch, to = _CHANNEL.search(head), _RECIPIENT.search(head)
        self._body = self._make_body(ch.group(1) if ch else "final", to.group(1) if to else None)
        return self._body.begin() + (self._body.feed(body) if body else [])

    def close(self, marker: str | None) -> list[Delta]:
        return self._body.close(marker) if self._body is not None else []


@register("harmony", "openai", "gpt_oss")
class HarmonyParser(ScanningParser):
    """Parses the harmony text format (no `openai-harmony` dependency); streams within messages."""

    name = "harmony"
    openers = (START, CHANNEL)

    def open(self, marker: str) -> Region | None:
        return HarmonyRegion(self, "" if marker == START else marker)

    def open_start(self, buf: str, final: bool) -> tuple[Region | None, int] | None:
        if buf.startswith(START):
            return None, 0
        if buf.startswith(_HEADER_STARTS):
            return HarmonyRegion(self), 0
        if not final and any(h.startswith(buf) for h in (*_HEADER_STARTS, START)):
            return None
        return HarmonyRegion(self, channel="final"), 0

    def render_call(self, call: ToolCall) -> str:
        code = code_arguments(call.arguments) if call.name == CODE_TOOL_NAME else None
        if code is not None:
            return f"{START}assistant{CHANNEL}analysis to=python code{MESSAGE}{code}<|call|>"
        return (
            f"{START}assistant{CHANNEL}commentary to=functions.{call.name} <|constrain|>json"
            f"{MESSAGE}{call.arguments}<|call|>"
        )

    def render_result(self, result: ToolResult) -> str:
        author = "python" if result.name == CODE_TOOL_NAME else f"functions.{result.name}"
        return f"{START}{author} to=assistant{CHANNEL}commentary{MESSAGE}{result.output}<|end|>"
