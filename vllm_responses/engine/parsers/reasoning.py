"""`<think>...</think>` reasoning split off before a tool parser sees the rest (Qwen3 / DeepSeek-R1)."""

from __future__ import annotations

from vllm_responses.engine.parsers.base import ToolParser
from vllm_responses.engine.parsers.scan import merge_deltas, partial_suffix
from vllm_responses.engine.types import Delta, ReasoningDelta, ToolCall, ToolResult

__all__ = ["ReasoningSplitter"]

THINK, END_THINK = "<think>", "</think>"


class ReasoningSplitter(ToolParser):
    """Wraps a tool parser: text inside `<think>`..`</think>` is reasoning, the rest goes to `inner`.

    `in_reasoning=True` is for templates that put `<think>` in the prompt (output starts inside it).
    Only the first think block counts; later tags are plain text for the inner parser.
    """

    name = "reasoning"

    def __init__(self, inner: ToolParser, in_reasoning: bool = False) -> None:
        super().__init__(inner.tools)
        self.inner = inner
        self._state = "think" if in_reasoning else "start"  # start | think | strip | rest
        self._buf = ""

    def feed(self, text: str) -> list[Delta]:
        self._buf += text
        return merge_deltas(self._run(final=False))

    def finish(self) -> list[Delta]:
        out = self._run(final=True)
        return merge_deltas(out + self.inner.finish())

    def _run(self, final: bool) -> list[Delta]:
        out: list[Delta] = []
        if self._state == "start":
            s = self._buf.lstrip()
            if s.startswith(THINK):
                self._state, self._buf = "think", s[len(THINK) :]
            elif final or not THINK.startswith(s):
                self._state = "rest"
            else:
                return out
        if self._state == "think":
            at = self._buf.find(END_THINK)
            if at >= 0:
                out.append(ReasoningDelta(self._buf[:at]))
                self._state, self._buf = "strip", self._buf[at + len(END_THINK) :]
            else:
                keep = 0 if final else partial_suffix(self._buf, (END_THINK,))
                cut = len(self._buf) - keep
                out.append(ReasoningDelta(self._buf[:cut]))
                self._buf = self._buf[cut:]
                return out
        if self._state == "strip":  # newlines right after </think> are not part of the answer
            self._buf = self._buf.lstrip("\n")
            if self._buf:
                self._state = "rest"
        if self._state == "rest" and self._buf:
            out += self.inner.feed(self._buf)
            self._buf = ""
        return out

    def render_call(self, call: ToolCall) -> str:
        return self.inner.render_call(call)

    def render_result(self, result: ToolResult) -> str:
        return self.inner.render_result(result)
