"""`VllmParserAdapter`: vLLM's streaming tool-call / reasoning parsers behind our `ToolParser` contract."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vllm_responses.engine.parsers.base import ToolParser
from vllm_responses.engine.parsers.scan import merge_deltas
from vllm_responses.engine.types import (
    Delta,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    ToolSpec,
)

__all__ = ["VllmParserAdapter", "added_tokens", "split_at_added_tokens", "vllm_parser_factory"]

_log = logging.getLogger(__name__)


def chat_request(tools: Sequence[ToolSpec]) -> Any:
    """The `ChatCompletionRequest` vLLM's parsers read (its tools; tool_choice auto: forcing is ours)."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    specs = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]
    return ChatCompletionRequest.model_validate(
        {"messages": [], "model": "model", **({"tools": specs, "tool_choice": "auto"} if specs else {})}
    )


def added_tokens(tokenizer: Any) -> dict[int, str]:
    """The tokenizer's added tokens (the special markers of most formats), by id."""
    get = getattr(tokenizer, "get_added_vocab", None)
    return {i: t for t, i in get().items()} if get is not None else {}


def split_at_added_tokens(text: str, ids: list[int], added: Mapping[int, str]) -> list[tuple[str, list[int]]]:
    """A several-token delta cut so that each added token (a format's marker) arrives as a delta of its own,
    as it does when the engine streams one token at a time: several of vLLM's parsers drop or misfile the
    text that shares a delta with a marker. Left whole when the text does not show the markers."""
    if len(ids) < 2 or not any(i in added for i in ids):
        return [(text, ids)]
    out: list[tuple[str, list[int]]] = []
    rest, run = text, []
    for i in ids:
        if i not in added:
            run.append(i)
            continue
        at = rest.find(added[i])
        if at < 0:
            return [(text, ids)]
        if run or at:
            out.append((rest[:at], run))
        out.append((added[i], [i]))
        rest, run = rest[at + len(added[i]) :], []
    if run or rest:
        out.append((rest, run))
    return out


def _without_repeat(sent: str, more: str) -> str:
    """`more` up to the end of the JSON object that `sent + more` completes: at the end of the output, vLLM
    hands over the arguments a parser has not marked as streamed, which some parsers had streamed already."""
    total = sent + more
    start = len(total) - len(total.lstrip())
    try:
        _value, end = json.JSONDecoder().raw_decode(total, start)
    except ValueError:
        return more
    return more[: max(0, end - len(sent))] if total[end:].strip() else more


class VllmParserAdapter(ToolParser):
    """Drives one vLLM `Parser` (`vllm.parser.ParserManager` composes the named tool-call and reasoning parsers,
    as `vllm serve` does) over a model call's output and turns its `DeltaMessage`s into our deltas.

    - `feed_tokens(text, token_ids)` is what the engine calls (vLLM's parsers read special-token ids);
      `feed(text)` tokenizes the text itself (a prefill, or text a `ReasoningSplitter` passes on).
    - Content goes to `inner` when set (vLLM reasoning in front of one of our tool parsers), else is text.
    - vLLM's call indices become ours, 0, 1, ...; a call ends when the next one starts or at `finish()`.
      Arguments are the JSON text fragments vLLM streams, so a code-interpreter call's `{"code": "..."}`
      streams its code. A call with no argument text gets `{}`.
    - A several-token delta is cut at the added tokens (`split_at_added_tokens`).
    - `finish()` flushes the parser (`finished=True`); when streaming produced no call at all, the whole
      output is parsed once more non-streaming and the calls found there are emitted.
    - `see_prompt(ids)` before the first feed tells a reasoning parser where the prompt left off.
    - `keep_special_tokens`: the parser asked for `skip_special_tokens=False` (its markers are special tokens).
    """

    name = "vllm"

    def __init__(
        self,
        parser_cls: type[Any],
        tokenizer: Any,
        tools: Sequence[ToolSpec] = (),
        inner: ToolParser | None = None,
        added: Mapping[int, str] | None = None,
    ) -> None:
        super().__init__(tools)
        self._tokenizer = tokenizer
        request = chat_request(self.tools)
        self._parser = parser_cls(tokenizer, request.tools)
        self._request = self._parser.adjust_request(request)
        self.keep_special_tokens = not self._request.skip_special_tokens
        self.inner = inner
        self._text = ""
        self._calls: dict[int, int] = {}  # vLLM's call index -> ours
        self._args: dict[int, str] = {}  # our index -> arguments sent
        self._pending: dict[int, str] = {}  # vLLM index -> argument text seen before the call's name
        self._open: int | None = None
        self._broken = False
        self._finishing = False
        self._added = added if added is not None else added_tokens(tokenizer)
        self._prompt_ids: list[int] | None = []  # given to the parser with the first delta, then None

    def see_prompt(self, token_ids: Sequence[int]) -> None:
        """The prompt's token ids (before the first `feed`): reasoning parsers read whether the prompt
        already opened (or closed) the reasoning block."""
        if self._prompt_ids is not None:
            self._prompt_ids = list(token_ids)

    def feed(self, text: str) -> list[Delta]:
        return self.feed_tokens(text, None) if text else []

    def feed_tokens(self, text: str, token_ids: Sequence[int] | None) -> list[Delta]:
        ids = list(token_ids) if token_ids is not None else self._encode(text)
        if not text and not ids:
            return []
        self._text += text
        out: list[Delta] = []
        for piece, piece_ids in split_at_added_tokens(text, ids, self._added):
            out += self._step(piece, piece_ids, finished=False)
        return merge_deltas(out)

    def finish(self) -> list[Delta]:
        self._finishing = True
        out = self._step("", [], finished=True)
        if not self._calls and not self._broken and self.inner is None:
            out += self._whole_output_calls()
        if self._open is not None:
            out += self._end(self._open)
        if self.inner is not None:
            out += self.inner.finish()
        return merge_deltas(out)

    def render_call(self, call: ToolCall) -> str:
        return self.inner.render_call(call) if self.inner is not None else super().render_call(call)

    def render_result(self, result: ToolResult) -> str:
        return self.inner.render_result(result) if self.inner is not None else super().render_result(result)

    def _encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False)) if text else []

    def _step(self, text: str, ids: list[int], finished: bool) -> list[Delta]:
        if self._broken:
            return self._content(text, ids) if text else []
        try:
            prompt, self._prompt_ids = self._prompt_ids, None
            message = self._parser.parse_delta(text, ids, self._request, prompt, finished=finished)
        except Exception:  # a parser bug must not end the response: the rest of the output stays text
            _log.warning("vLLM parser failed; the rest of the output is text", exc_info=True)
            self._broken = True
            return self._content(text, ids) if text else []
        if message is None:
            return []
        out: list[Delta] = []
        if message.reasoning:
            out.append(ReasoningDelta(message.reasoning))
        if message.content:
            out += self._content(message.content, ids if message.content == text else None)
        for call in message.tool_calls or ():
            out += self._call_delta(
                call.index,
                call.function.name if call.function else None,
                call.function.arguments if call.function else None,
            )
        return out

    def _content(self, text: str, ids: Sequence[int] | None) -> list[Delta]:
        if self.inner is None:
            return [TextDelta(text)]
        return self.inner.feed_tokens(text, ids)

    def _call_delta(self, vllm_index: int, name: str | None, arguments: str | None) -> list[Delta]:
        out: list[Delta] = []
        ours = self._calls.get(vllm_index)
        if ours is None:
            if not name:  # arguments before the name: held until the call starts
                self._pending[vllm_index] = self._pending.get(vllm_index, "") + (arguments or "")
                return out
            if self._open is not None:
                out += self._end(self._open)
            ours = self._calls[vllm_index] = len(self._calls)
            self._args[ours] = ""
            self._open = ours
            out.append(ToolCallStart(ours, name))
            arguments = self._pending.pop(vllm_index, "") + (arguments or "")
        if arguments:
            if ours != self._open:
                _log.warning("vLLM parser sent arguments for call %d after it ended; dropped", ours)
                return out
            if self._finishing:
                arguments = _without_repeat(self._args[ours], arguments)
                if not arguments:
                    return out
            self._args[ours] += arguments
            out.append(ToolCallDelta(ours, arguments))
        return out

    def _end(self, ours: int) -> list[Delta]:
        self._open = None
        out: list[Delta] = [] if self._args[ours].strip() else [ToolCallDelta(ours, "{}")]
        return [*out, ToolCallEnd(ours)]

    def _whole_output_calls(self) -> list[Delta]:
        """The calls a non-streaming parse of the whole output finds (when streaming found none)."""
        if not self.tools or not self._text:
            return []
        try:
            fresh = type(self._parser)(self._tokenizer, self._request.tools)
            _reasoning, _content, calls = fresh.parse(self._text, self._request, enable_auto_tools=True)
        except Exception:
            _log.debug("vLLM non-streaming parse failed", exc_info=True)
            return []
        out: list[Delta] = []
        for i, call in enumerate(calls or ()):
            out += self._call_delta(-1 - i, call.name, call.arguments or "")
        return out


def vllm_parser_factory(
    tool_parser: str | None,
    reasoning_parser: str | None,
    tokenizer: Any,
    inner: Callable[[Sequence[ToolSpec]], ToolParser] | None = None,
    model_name: str | None = None,
) -> Callable[..., ToolParser]:
    """A parser factory (tools -> `VllmParserAdapter`) for vLLM's named parsers, checked against `tokenizer`
    now: a tokenizer without the tokens a parser needs is a `TypeError` (vLLM's message) at start-up.
    `inner` builds our tool parser for the content when only the reasoning parser is vLLM's."""
    from vllm.parser.parser_manager import ParserManager

    parser_cls = ParserManager.get_parser(
        tool_parser_name=tool_parser,
        reasoning_parser_name=reasoning_parser,
        enable_auto_tools=tool_parser is not None,
        model_name=model_name,
        tokenizer=tokenizer,
    )
    if parser_cls is None:
        raise TypeError("no vLLM parser named")

    added = added_tokens(tokenizer)

    def build(tools: Sequence[ToolSpec] = ()) -> ToolParser:
        return VllmParserAdapter(
            parser_cls, tokenizer, tools, inner(tools) if inner is not None else None, added
        )

    return build
