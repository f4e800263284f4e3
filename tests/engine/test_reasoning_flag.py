"""`--reasoning-parser`: the <think> family turns on reasoning items; names we cannot honour are refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from vllm_responses.engine.base import EngineError
from vllm_responses.engine.types import Finish, GenerateRequest, Message, ReasoningDelta, TextDelta

OUTPUT = "<think>Add them.</think>It is 5."


class StubTokenizer:
    """A template without tools or `<think>`: one line per message; a byte per token."""

    chat_template = None

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        tokenize: bool = False,
        add_generation_prompt: bool = False,
        **kwargs: Any,
    ) -> str:
        text = "".join(f"<|{m['role']}|>{m.get('content') or ''}\n" for m in messages)
        return text + ("<|assistant|>" if add_generation_prompt else "")

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(text.encode())


class StubLLM:
    """What `VLLMEngine` uses of vLLM's AsyncLLM, answering every call with `OUTPUT` in one piece."""

    model_config = SimpleNamespace(max_model_len=4096, get_diff_sampling_param=dict)

    def get_tokenizer(self) -> StubTokenizer:
        return StubTokenizer()

    async def generate(self, prompt: Any, params: Any, request_id: str) -> AsyncIterator[Any]:
        out = SimpleNamespace(token_ids=list(OUTPUT.encode()), text=OUTPUT, finish_reason="stop")
        yield SimpleNamespace(outputs=[out], finished=True, num_cached_tokens=0)

    async def abort(self, request_id: str) -> None:
        return None

    def shutdown(self) -> None:
        return None


def test_unknown_reasoning_parser_is_refused_at_start() -> None:
    from vllm_responses.engine.vllm import VLLMEngine

    with pytest.raises(EngineError, match="reasoning parser 'nope' is not supported"):
        VLLMEngine(None, "m", reasoning_parser="nope")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "splits"), [("deepseek_r1", True), ("qwen3", True), ("openai_gptoss", False), (None, False)]
)
async def test_the_think_family_splits_reasoning_from_the_answer(name: str | None, splits: bool) -> None:
    """With a <think>-family name the think block becomes reasoning, even when the template does not
    mention <think>; gpt-oss (harmony: its own analysis channel) is accepted and leaves the text alone."""
    from vllm_responses.engine.vllm import VLLMEngine

    engine = VLLMEngine(StubLLM(), "m", reasoning_parser=name)  # type: ignore[arg-type]
    events = [e async for e in engine.generate(GenerateRequest("r1", (Message("user", "2+3?"),)))]
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert (reasoning, text) == (("Add them.", "It is 5.") if splits else ("", OUTPUT))
    assert isinstance(events[-1], Finish) and events[-1].reason == "stop"
