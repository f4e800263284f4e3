"""One model call's plumbing around vLLM: what is prepared before tokenizing, and the tally of its deltas."""

from __future__ import annotations

from dataclasses import dataclass

from vllm_responses.engine.parsers.base import ToolParser
from vllm_responses.engine.types import Delta, ReasoningDelta, ToolCallEnd, ToolCallStart

__all__ = ["CallTally", "Prepared"]


@dataclass(frozen=True)
class Prepared:
    """One model call before tokenizing: prompt text (prefill included), prefill, the engine's own stop
    strings and banned words, the parser of its output and the tool-call format it is written in."""

    prompt: str
    prefill: str
    stop: list[str]
    bad_words: list[str]
    parser: ToolParser
    call_format: str  # the parser's name, or "hermes" for a forced call under a vLLM-only name
    keep_special_tokens: bool = False  # a vLLM parser whose markers are special tokens asked for them


class CallTally:
    """Counts the tool calls and collects the reasoning text of one model call's deltas. With `one_call`
    (`parallel_tool_calls: false`) it passes nothing after the first call's end and says `cut`: the engine
    stops the call there, in every format (the grammars stop there too where one applies)."""

    def __init__(self, *, one_call: bool = False) -> None:
        self.calls = 0
        self.reasoning: list[str] = []
        self.one_call = one_call
        self.cut = False

    def see(self, deltas: list[Delta]) -> list[Delta]:
        passed: list[Delta] = []
        for d in deltas:
            if self.cut:
                break
            passed.append(d)
            if isinstance(d, ToolCallStart):
                self.calls += 1
            elif isinstance(d, ReasoningDelta):
                self.reasoning.append(d.text)
            elif isinstance(d, ToolCallEnd) and self.one_call:
                self.cut = True
        return passed
