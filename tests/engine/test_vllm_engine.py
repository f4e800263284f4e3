"""Real-engine tests: the tiny random-weight model in vLLM's AsyncLLM, outputs forced by structured output."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import TYPE_CHECKING

import pytest

from tests.support.conformance import assert_implements
from vllm_responses.engine.base import Engine, EngineError, EngineRejected
from vllm_responses.engine.types import (
    Finish,
    ForcedTool,
    GenerateRequest,
    Message,
    Sampling,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    ToolSpec,
    code_tool_spec,
)

if TYPE_CHECKING:
    from vllm_responses.engine.vllm import VLLMEngine

pytestmark = pytest.mark.engine

CALL = '<tool_call>{"name": "python", "arguments": {"code": "print(6*7)"}}</tool_call>'
USER = (Message("user", "What is 6*7?"),)


def regex_escape(text: str) -> str:
    import re

    return re.escape(text)


@pytest.fixture(scope="module")
async def engine(tiny_model):
    from vllm_responses.engine.args import add_engine_cli_args, engine_args_from_namespace
    from vllm_responses.engine.vllm import VLLMEngine

    parser = add_engine_cli_args(argparse.ArgumentParser())
    args = engine_args_from_namespace(parser.parse_args(["--seed", "0"]), str(tiny_model))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticker = asyncio.create_task(tick())
    t0 = time.monotonic()
    try:
        eng = await VLLMEngine.start(args, model_name="tiny", tool_parser="hermes")
    finally:
        ticker.cancel()
    build_s = time.monotonic() - t0
    print(f"\n[engine] tiny model AsyncLLM built in {build_s:.1f} s; loop ticks meanwhile: {ticks}")
    eng.start_ticks = (ticks, build_s)  # checked by test_start_does_not_block_the_loop
    async with eng:
        yield eng
    assert eng._closed


async def collect(engine, request: GenerateRequest) -> list:
    return [event async for event in engine.generate(request)]


def text_of(events) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def as_engine(engine: VLLMEngine) -> Engine:
    """Type-checks that VLLMEngine implements Engine (the protocol is not runtime-checkable)."""
    return engine


async def test_engine_protocol_and_template_caps(engine):
    assert_implements(type(engine), Engine)
    assert as_engine(engine) is engine
    assert engine.model_name == "tiny"
    assert engine.caps.tools_section and engine.caps.tool_calls
    assert engine.max_model_len == 4096


async def test_vllm_loaded_our_spin_wait_plugin(engine):
    """vLLM's plugin loader ran ours in this process, as it does in the engine's and the model worker's."""
    from vllm.distributed.device_communicators.shm_broadcast import SpinCondition

    assert getattr(SpinCondition.wait, "_vr_spin", None) == 0.005


async def test_start_does_not_block_the_loop(engine):
    ticks, build_s = engine.start_ticks
    assert build_s > 1 and ticks >= build_s / 0.05 / 4  # the loop kept running during the build


async def test_forced_text_streams_exactly(engine):
    want = 'Hello, {"json": [1, 2]} <b>world</b>!'
    request = GenerateRequest("t1", USER, sampling=Sampling(structured={"regex": regex_escape(want)}))
    events = await collect(engine, request)
    assert text_of(events) == want
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "stop"
    assert [e for e in events if isinstance(e, Finish)] == [finish]
    # byte-level tokenizer: one token per byte, plus the end-of-turn token the grammar ends with
    assert finish.usage.output_tokens == len(want.encode()) + 1
    assert finish.usage.input_tokens == await engine.count_tokens(request)


async def test_free_calls_to_a_strict_tool_run_under_a_triggered_tag(engine):
    schema = {"type": "object", "properties": {"c": {"enum": ["red", "blue"]}}, "required": ["c"]}
    strict = ToolSpec("pick", "", schema, strict=True)
    request = GenerateRequest("t-strict", USER, tools=(strict,), sampling=Sampling(max_tokens=24))
    _ids, _prefill, _parser, params = engine._call(request)
    assert params.structured_outputs is not None
    tag = json.loads(params.structured_outputs.structural_tag)
    assert tag["format"]["type"] == "triggered_tags" and tag["format"]["triggers"] == ["<tool_call>"]
    assert await engine.precheck(request) > 0  # xgrammar compiles it
    events = await collect(engine, request)  # and vLLM decodes under it (free text: the model calls nothing)
    assert isinstance(events[-1], Finish) and events[-1].usage.output_tokens > 0
    loose = GenerateRequest("t-loose", USER, tools=(ToolSpec("pick", "", schema),))
    assert engine._call(loose)[3].structured_outputs is None  # not strict: free decoding


async def test_forced_hermes_call_becomes_tool_call_events(engine):
    tools = (code_tool_spec(),)
    request = GenerateRequest(
        "t2", USER, tools=tools, sampling=Sampling(structured={"regex": regex_escape(CALL)})
    )
    events = await collect(engine, request)
    calls = [e for e in events if isinstance(e, (ToolCallStart, ToolCallDelta, ToolCallEnd))]
    assert calls[0] == ToolCallStart(0, "python")
    assert calls[-1] == ToolCallEnd(0)
    args = "".join(e.arguments for e in calls if isinstance(e, ToolCallDelta))
    assert json.loads(args) == {"code": "print(6*7)"}
    assert text_of(events).strip() == ""
    finish = events[-1]
    assert finish.reason == "tool_calls"
    assert finish.usage.input_tokens == await engine.count_tokens(request)
    without_tools = await engine.count_tokens(GenerateRequest("t2b", USER))
    assert finish.usage.input_tokens > without_tools  # the tools section
    assert await engine.count_tokens(GenerateRequest("t2c", USER, tools=tools, tool_choice="none")) == (
        await engine.count_tokens(GenerateRequest("t2d", USER))
    )


async def test_tool_choice_constrains_to_the_hermes_wrapper(engine):
    # no `structured`: the forced tool alone must make the random model open a well-formed call
    request = GenerateRequest(
        "t3",
        USER,
        tools=(code_tool_spec(),),
        tool_choice=ForcedTool("python"),
        sampling=Sampling(max_tokens=80),
    )
    events = await collect(engine, request)
    raw = text_of(events)
    started = [e for e in events if isinstance(e, ToolCallStart)]
    if started:  # the call was parsed: it is the forced tool's
        assert started[0] == ToolCallStart(0, "python"), started
    else:  # the random model's arguments never closed: the text is still the forced wrapper
        assert raw.startswith('<tool_call>\n{"name": "python", "arguments": '), raw


async def test_max_tokens_gives_length(engine):
    request = GenerateRequest("t4", USER, sampling=Sampling(max_tokens=5, structured={"regex": "a{50}"}))
    events = await collect(engine, request)
    assert text_of(events) == "aaaaa"
    assert events[-1].reason == "length" and events[-1].usage.output_tokens == 5


async def test_closing_the_stream_aborts_the_request(engine):
    request = GenerateRequest("t5", USER, sampling=Sampling(structured={"regex": "b{3000}"}))
    stream = engine.generate(request)
    first = await anext(stream)
    assert isinstance(first, TextDelta)
    assert engine.llm.get_num_unfinished_requests() == 1
    await stream.aclose()
    assert engine.llm.get_num_unfinished_requests() == 0


async def test_cancelling_the_consumer_aborts_the_request(engine):
    request = GenerateRequest("t6", USER, sampling=Sampling(structured={"regex": "c{3000}"}))
    seen = asyncio.Event()

    async def consume() -> None:
        async for _ in engine.generate(request):
            seen.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(seen.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert engine.llm.get_num_unfinished_requests() == 0
    # the engine still serves afterwards
    after = GenerateRequest("t6b", USER, sampling=Sampling(structured={"regex": "ok"}))
    events = await collect(engine, after)
    assert text_of(events) == "ok"


async def test_tool_result_renders_with_the_template_tool_role(engine):
    turns = USER + (
        ToolCall("call_1", "python", json.dumps({"code": "print(6*7)"})),
        ToolResult("call_1", "python", "42\n"),
    )
    sampling = Sampling(structured={"regex": "42"})
    request = GenerateRequest("t7", turns, tools=(code_tool_spec(),), sampling=sampling)
    prompt = engine.render(request)
    call = '<tool_call>\n{"name": "python", "arguments": {"code": "print(6*7)"}}\n</tool_call>'
    assert f"<|im_start|>assistant\n{call}<|im_end|>" in prompt
    result = "<|im_start|>user\n<tool_response>\n42\n\n</tool_response><|im_end|>\n"
    assert result + "<|im_start|>assistant\n" in prompt
    events = await collect(engine, request)
    assert text_of(events) == "42" and events[-1].reason == "stop"
    assert events[-1].usage.input_tokens == await engine.count_tokens(request)


async def test_prompt_longer_than_the_context_is_a_400(engine):
    request = GenerateRequest("t8", (Message("user", "x" * 5000),))
    with pytest.raises(EngineError) as ei:
        await collect(engine, request)
    assert isinstance(ei.value, EngineRejected) and ei.value.code == "context_length_exceeded"


async def test_precheck_refuses_what_generate_refuses_before_any_output(engine):
    """`precheck` (run before a response starts) and `generate` refuse the same calls, with the same code."""
    refused = {
        "context_length_exceeded": GenerateRequest("p1", (Message("user", "x " * 5000),)),
        "invalid_request": GenerateRequest("p2", USER, sampling=Sampling(logit_bias={10**7: 1.0})),
    }
    refused["stop"] = GenerateRequest("p3", USER, sampling=Sampling(stop_token_ids=(10**7,)))
    refused["min"] = GenerateRequest("p4", USER, sampling=Sampling(max_tokens=4, min_tokens=8))
    refused["regex"] = GenerateRequest("p5", USER, sampling=Sampling(structured={"regex": "(unclosed"}))
    for what, request in refused.items():
        with pytest.raises(EngineRejected) as checked:
            await engine.precheck(request)
        with pytest.raises(EngineRejected) as generated:
            await collect(engine, request)
        assert checked.value.code == generated.value.code, what
        if what == "context_length_exceeded":
            assert checked.value.code == what and "maximum context length is" in checked.value.message
    ok = GenerateRequest("p6", USER, sampling=Sampling(structured={"regex": "42"}))
    assert await engine.precheck(ok) == await engine.count_tokens(ok)
    assert engine.max_num_seqs >= 1


async def test_concurrent_streams(engine):
    reqs = [
        GenerateRequest(f"t9-{i}", USER, sampling=Sampling(structured={"regex": regex_escape(f"stream {i}")}))
        for i in range(4)
    ]
    results = await asyncio.gather(*(collect(engine, r) for r in reqs))
    assert [text_of(ev) for ev in results] == [f"stream {i}" for i in range(4)]


async def test_template_errors_are_400(engine, monkeypatch):
    def refuse(*args, **kwargs):
        raise ValueError("Conversation roles must alternate user/assistant")

    monkeypatch.setattr(engine._tokenizer, "apply_chat_template", refuse)
    with pytest.raises(EngineError) as ei:
        await collect(engine, GenerateRequest("t10", USER))
    assert isinstance(ei.value, EngineRejected) and "alternate" in ei.value.message
    with pytest.raises(EngineError):
        await engine.count_tokens(GenerateRequest("t11", USER))


async def test_choice_and_text_format_json_schema_constrain_the_output(engine):
    choice = GenerateRequest("t11", USER, sampling=Sampling(structured={"choice": ["yes", "no"]}, seed=1))
    assert text_of(await collect(engine, choice)) in ("yes", "no")
    schema = {
        "type": "object",
        "properties": {"a": {"enum": ["x", "y"]}},
        "required": ["a"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "name": "ab", "schema": schema}
    request = GenerateRequest("t12", USER, sampling=Sampling(text_format=fmt, max_tokens=400, seed=1))
    events = await collect(engine, request)
    assert events[-1].reason == "stop", text_of(events)
    assert json.loads(text_of(events)) in ({"a": "x"}, {"a": "y"})


async def test_start_failure_is_an_engine_error(tmp_path):
    from vllm.engine.arg_utils import AsyncEngineArgs

    from vllm_responses.engine.vllm import VLLMEngine

    with pytest.raises(EngineError) as ei:
        await VLLMEngine.start(AsyncEngineArgs(model=str(tmp_path / "no-such-model"), enforce_eager=True))
    assert ei.value.code == "engine_start" and "no-such-model" in ei.value.message


async def test_think_templates_split_reasoning(engine):
    from vllm_responses.engine.types import ReasoningDelta
    from vllm_responses.engine.vllm import VLLMEngine

    gen = "{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    template = engine._tokenizer.chat_template.replace(gen, gen.replace("\\n'", "\\n<think>\\n'"))
    assert template != engine._tokenizer.chat_template
    thinking = VLLMEngine(engine.llm, "tiny-think", tool_parser="hermes", chat_template=template)
    assert thinking.reasoning
    want = "six sevens</think>\n\nIt is 42."
    request = GenerateRequest("t13", USER, sampling=Sampling(structured={"regex": regex_escape(want)}))
    assert thinking.render(request).endswith("<|im_start|>assistant\n<think>\n")
    events = await collect(thinking, request)
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "six sevens"
    assert text_of(events) == "It is 42."
    assert events[-1].usage.reasoning_tokens == len("six sevens")
    assert not engine.reasoning


async def test_prechecks_and_the_call_tokenize_the_prompt_once(engine, monkeypatch):
    """A response's prechecks (the first call, and it with a later constraint) and the call itself render the
    same prompt: it is tokenized once, and all three see the same length."""
    seen: list[str] = []
    tokenize = engine._tokenize

    def counted(text: str) -> list[int]:
        seen.append(text)
        return tokenize(text)

    monkeypatch.setattr(engine._recent_ids, "_encode", counted)
    first = GenerateRequest("once-1", (Message("user", "Tokenized once? (a prompt of its own)"),))
    later = GenerateRequest(first.request_id, first.turns, sampling=Sampling(structured={"regex": "ok"}))
    lengths = [await engine.precheck(first), await engine.precheck(later), await engine.count_tokens(first)]
    events = await collect(engine, GenerateRequest("once-2", first.turns, sampling=Sampling(max_tokens=2)))
    assert len(set(lengths)) == 1 and lengths[0] > 0
    assert isinstance(events[-1], Finish) and events[-1].usage.input_tokens == lengths[0]
    assert len(seen) == 1, seen


async def test_prechecks_convert_a_constraint_once(engine, monkeypatch):
    """Two prechecks with the same constraint convert its grammar once (vLLM starts a thread for each
    conversion of a regex); a refused constraint is refused each time; a known one with a bad other parameter
    is still refused."""
    from vllm.v1.structured_output import backend_xgrammar

    converted: list[str | None] = []
    convert = backend_xgrammar.validate_xgrammar_grammar

    def counted(params):
        converted.append(params.structured_outputs.regex)
        return convert(params)

    monkeypatch.setattr(backend_xgrammar, "validate_xgrammar_grammar", counted)
    forced = Sampling(structured={"regex": regex_escape("converted once")})
    for n in range(2):
        assert await engine.precheck(GenerateRequest(f"conv-{n}", USER, sampling=forced)) > 0
    assert len(converted) == 1
    for n in range(2):
        with pytest.raises(EngineRejected):
            await engine.precheck(
                GenerateRequest(f"bad-{n}", USER, sampling=Sampling(structured={"regex": "(x"}))
            )
    assert converted[1:] == ["(x", "(x"]
    with pytest.raises(EngineRejected):
        biased = Sampling(structured=forced.structured, logit_bias={10**7: 1.0})
        await engine.precheck(GenerateRequest("bias", USER, sampling=biased))
    assert len(converted) == 3
