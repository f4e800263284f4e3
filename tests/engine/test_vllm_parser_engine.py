"""`VLLMEngine` with a vLLM-only parser name: token ids reach vLLM's parser, special tokens are kept, and the
deltas come out as ours (a stub in place of vLLM's AsyncLLM; vLLM's parser code is real)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from tests.engine.parsers.helpers import summarize
from tests.engine.parsers.vllm_transcripts import CASES, TOOLS, token_chunks, tokenizer
from vllm_responses.engine.base import EngineError
from vllm_responses.engine.types import Finish, GenerateRequest, Message, ToolCallDelta

TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}<assistant>"


class StubLLM:
    """What `VLLMEngine` uses of AsyncLLM: answers with `output`, one token per chunk as vLLM streams it."""

    def __init__(self, tok: Any, output: str) -> None:
        self.tok, self.output = tok, output
        self.model_config = SimpleNamespace(max_model_len=4096, get_diff_sampling_param=dict)
        self.params: list[Any] = []

    def get_tokenizer(self) -> Any:
        return self.tok

    async def generate(self, prompt: Any, params: Any, request_id: str) -> AsyncIterator[Any]:
        self.params.append(params)
        chunks = token_chunks(self.tok, self.output)
        for k, (text, ids) in enumerate(chunks):
            out = SimpleNamespace(token_ids=ids, text=text, finish_reason="stop")
            yield SimpleNamespace(outputs=[out], finished=k == len(chunks) - 1, num_cached_tokens=0)

    async def abort(self, request_id: str) -> None:
        return None

    def shutdown(self) -> None:
        return None


def _tokenizer(specials: tuple[str, ...]) -> Any:
    tok = tokenizer.__wrapped__(specials, ())  # a fresh one: the template is set on it
    tok.chat_template = TEMPLATE
    return tok


async def _run(llm: StubLLM, **options: Any) -> list[Any]:
    from vllm_responses.engine.vllm import VLLMEngine

    engine = VLLMEngine(llm, "m", **options)  # type: ignore[arg-type]
    request = GenerateRequest("r1", (Message("user", "Weather in Paris?"),), tools=TOOLS)
    return [e async for e in engine.generate(request)]


async def test_a_vllm_only_tool_parser_gets_token_ids_and_special_tokens() -> None:
    case = next(c for c in CASES if c.id == "kimi_k2")
    llm = StubLLM(_tokenizer(case.specials), case.output)
    events = await _run(llm, tool_parser="kimi_k2")
    got = summarize([e for e in events if not isinstance(e, Finish)])
    assert (got.text, got.calls) == (case.text, [(n, a) for n, a in case.calls])
    assert isinstance(events[-1], Finish) and events[-1].reason == "tool_calls"
    assert llm.params[0].skip_special_tokens is False  # kimi_k2's adjust_request asks for its markers
    code = [e.arguments for e in events if isinstance(e, ToolCallDelta) and e.index == 1]
    assert len(code) > 3 and json.loads("".join(code))["code"]


async def test_a_vllm_reasoning_parser_in_front_of_our_tool_parser() -> None:
    output = (
        "Here is my thought process: Look it up. Here is my response: "
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    )
    words = ("Here", " is", " my", " thought", " process", " response", ":")
    tok = tokenizer.__wrapped__((), words)
    tok.chat_template = TEMPLATE
    events = await _run(StubLLM(tok, output), tool_parser="hermes", reasoning_parser="granite")
    got = summarize([e for e in events if not isinstance(e, Finish)])
    assert got.reasoning == " Look it up. "
    assert got.calls == [("get_weather", {"city": "Paris"})] and got.text.strip() == ""


def test_a_tokenizer_without_the_parsers_tokens_is_a_start_up_error() -> None:
    from vllm_responses.engine.vllm import VLLMEngine

    llm = StubLLM(_tokenizer(()), "")
    with pytest.raises(EngineError, match="deepseek_v3 cannot be used with the tokenizer of 'm'"):
        VLLMEngine(llm, "m", tool_parser="deepseek_v3")  # type: ignore[arg-type]
    with pytest.raises(EngineError, match="ernie45 cannot be used with the tokenizer"):
        VLLMEngine(llm, "m", reasoning_parser="ernie45", tool_parser="xlam")  # type: ignore[arg-type]


@pytest.mark.skipif(
    importlib.util.find_spec("cohere_melody") is not None, reason="cohere_melody is installed"
)
def test_a_parser_needing_a_missing_package_is_a_start_up_error() -> None:
    """Listed as "not usable here" in docs/parsers.md."""
    from vllm_responses.engine.vllm import VLLMEngine

    with pytest.raises(EngineError, match="cohere_melody"):
        VLLMEngine(StubLLM(_tokenizer(()), ""), "m", tool_parser="cohere_command3")  # type: ignore[arg-type]
