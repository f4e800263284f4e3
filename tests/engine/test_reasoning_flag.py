"""`--reasoning-parser`: the <think> family turns on reasoning items; names we cannot honour are refused."""

from __future__ import annotations

import pytest

from vllm_responses.engine.base import EngineError


def test_unknown_reasoning_parser_is_refused_at_start() -> None:
    from vllm_responses.engine.vllm import VLLMEngine

    with pytest.raises(EngineError, match="reasoning parser 'nope' is not supported"):
        VLLMEngine(None, "m", reasoning_parser="nope")  # type: ignore[arg-type]


def test_known_names_are_the_think_family() -> None:
    from vllm_responses.engine.vllm import HARMONY_REASONING_PARSERS, THINK_REASONING_PARSERS

    assert {"deepseek_r1", "qwen3"} <= THINK_REASONING_PARSERS
    assert "openai_gptoss" in HARMONY_REASONING_PARSERS
