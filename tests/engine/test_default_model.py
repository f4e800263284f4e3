"""The default model (SmolLM2-135M-Instruct) in vLLM: with the "```python" prefill, a code call comes out."""

from __future__ import annotations

import argparse
import json
import time

import pytest

from vllm_responses.engine.types import (
    Finish,
    GenerateRequest,
    Message,
    Sampling,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    code_tool_spec,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture(scope="module")
async def smol():
    from vllm_responses.engine.args import add_engine_cli_args, engine_args_from_namespace
    from vllm_responses.engine.models import default_model_path
    from vllm_responses.engine.vllm import VLLMEngine

    path = default_model_path()  # scripts/setup.sh builds it: missing is a failure, not a skip
    ns = add_engine_cli_args(argparse.ArgumentParser()).parse_args(["--seed", "0"])
    async with await VLLMEngine.start(engine_args_from_namespace(ns, str(path))) as eng:
        yield eng


async def test_prefilled_code_call_is_well_formed(smol):
    assert smol.parser_name == "markdown_code"  # ChatML template without a tools section
    assert not smol.caps.tools_section and not smol.caps.tool_calls
    turns = (Message("user", "What is 6*7? Compute it with Python."),)
    sampling = Sampling(max_tokens=96, temperature=0.0)
    request = GenerateRequest("d1", turns, tools=(code_tool_spec(),), sampling=sampling)
    t0 = time.monotonic()
    events = [e async for e in smol.generate(request)]
    elapsed = time.monotonic() - t0
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert starts and starts[0] == ToolCallStart(0, "python")
    assert any(isinstance(e, ToolCallEnd) and e.index == 0 for e in events)
    args = json.loads("".join(e.arguments for e in events if isinstance(e, ToolCallDelta) and e.index == 0))
    assert isinstance(args["code"], str) and args["code"].strip()
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason in ("tool_calls", "length")
    print(f"\n[smol] code call in {elapsed:.2f} s, {finish.usage}: {args['code']!r}")


async def test_second_turn_folds_the_result_into_a_user_turn(smol):
    turns = (
        Message("user", "What is 6*7? Compute it with Python."),
        ToolCall("c1", "python", json.dumps({"code": "print(6*7)"})),
        ToolResult("c1", "python", "42"),
    )
    sampling = Sampling(max_tokens=24, temperature=0.0)
    request = GenerateRequest("d2", turns, tools=(code_tool_spec(),), sampling=sampling)
    prompt = smol.render(request)
    assert "<|im_start|>assistant\n```python\nprint(6*7)\n```<|im_end|>" in prompt
    result_turn = (
        "<|im_start|>user\n<tool_response>\n42\n</tool_response>\n"
        "That is what the code printed. Answer my question with it, in words.<|im_end|>\n"
    )
    assert result_turn + "<|im_start|>assistant\n" in prompt
    events = [e async for e in smol.generate(request)]  # code already ran: no prefill, free answer
    assert isinstance(events[-1], Finish) and events[-1].usage.output_tokens > 0
