"""The agent loop on its own (`agent/loop.py`, `agent/open_calls.py`): the fake engine and interpreter, no server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from interpreter_service import PoolExhausted
from tests.support.fakes import FakeEngine, FakeInterpreter, code_call, echo_fields, function_call, say
from tests.support.wire import CODE_TURN_EVENT_RUNS, check_stream, event_runs
from vllm_responses.agent.loop import AgentLoop, AgentPlan
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.engine.base import EngineRejected
from vllm_responses.engine.types import (
    CODE_TOOL_NAME,
    Finish,
    Message,
    Sampling,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    ToolSpec,
    Usage,
    code_tool_spec,
)
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.tools.code_interpreter import CodeContainer
from vllm_responses.tools.containers import ContainerService

ECHO = echo_fields()
WEATHER = ToolSpec("weather", "", {"type": "object", "properties": {"city": {"type": "string"}}})


def plan(**overrides: Any) -> AgentPlan:
    fields: dict[str, Any] = {
        "turns": (Message("user", "hi"),),
        "tools": (),
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "sampling": Sampling(),
        "max_output_tokens": None,
        "max_tool_calls": None,
        "max_turns": 8,
        "code_timeout_s": 5.0,
        "container": None,
    }
    return AgentPlan(**{**fields, **overrides})


async def run(loop: AgentLoop) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [dict(ev) for ev in [ev async for ev in loop.events()]]
    check_stream(events)
    return events


class Scripted:
    """A response's code container as a test scripts it: `get` is the given coroutine function."""

    def __init__(self, get: Callable[[], Awaitable[str]]) -> None:
        self.get = get

    def release(self) -> None:
        return None


def with_code(interpreter: FakeInterpreter, **overrides: Any) -> AgentPlan:
    async def container() -> str:
        return (await interpreter.create_container()).id

    return plan(tools=(code_tool_spec(),), container=Scripted(container), **overrides)


def loop_of(engine: FakeEngine, the_plan: AgentPlan, interpreter: FakeInterpreter | None = None) -> AgentLoop:
    return AgentLoop(the_plan, ResponseBuilder(ECHO, include_outputs=True), engine, interpreter, "resp_test")


async def test_text_only_completes_with_the_calls_usage() -> None:
    engine = FakeEngine()
    engine.reset(say("Hello there."))
    loop = loop_of(engine, plan())
    events = await run(loop)
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "Hello there."
    assert loop.usage == Usage(engine.prompt_tokens(engine.requests[0]), len(say("Hello there.")) - 1)
    assert loop.failure is None and len(engine.requests) == 1


async def test_code_call_runs_and_its_output_goes_back_to_the_model() -> None:
    engine, interp = FakeEngine(), FakeInterpreter()
    engine.reset(code_call("print(6 * 7)"), say("It is 42."))
    loop = loop_of(engine, with_code(interp), interp)
    events = await run(loop)
    assert event_runs(e["type"] for e in events) == CODE_TURN_EVENT_RUNS
    call = events[-1]["response"]["output"][0]
    assert call["code"] == "print(6 * 7)" and call["outputs"] == [{"type": "logs", "logs": "42\n"}]
    second = engine.requests[1].turns
    assert second[-2] == ToolCall(call["id"], CODE_TOOL_NAME, '{"code": "print(6 * 7)"}')
    assert second[-1] == ToolResult(call["id"], CODE_TOOL_NAME, "42\n")
    assert loop.turns[-3:-1] == list(second[-2:]) and loop.tool_calls == 1
    assert loop.turns[-1] == Message("assistant", "It is 42.")  # its text kept as a turn too
    # Usage sums both model calls.
    assert loop.usage.input_tokens == sum(engine.prompt_tokens(r) for r in engine.requests)


async def test_output_budget_shrinks_across_calls_and_ends_incomplete() -> None:
    engine, interp = FakeEngine(), FakeInterpreter()
    engine.reset(code_call("1"), say("a long answer that goes on and on and on"))
    loop = loop_of(engine, with_code(interp, max_output_tokens=8), interp)
    events = await run(loop)
    first_out = 1 + len(code_call("1")) - 2  # start + deltas + end, before the finish
    assert [r.sampling.max_tokens for r in engine.requests] == [8, 8 - first_out]
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


async def test_a_spent_budget_makes_no_further_model_call() -> None:
    engine, interp = FakeEngine(), FakeInterpreter()
    engine.reset(code_call("1"), say("never asked"))
    loop = loop_of(engine, with_code(interp, max_output_tokens=2), interp)
    events = await run(loop)
    assert len(engine.requests) == 1 and events[-1]["type"] == "response.incomplete"


async def test_max_tool_calls_withdraws_the_tools() -> None:
    engine, interp = FakeEngine(), FakeInterpreter()
    engine.reset(code_call("1"), say("done"))
    await run(loop_of(engine, with_code(interp, max_tool_calls=1), interp))
    assert engine.requests[0].tools and not engine.requests[1].tools
    assert engine.requests[1].tool_choice == "none"


async def test_one_tool_call_left_makes_the_model_call_a_single_call_one() -> None:
    """With one call left under `max_tool_calls`, the engine is asked for one call only (it cuts the rest)."""
    engine, interp = FakeEngine(), FakeInterpreter()
    engine.reset(code_call("1"), code_call("2"), say("done"))
    await run(loop_of(engine, with_code(interp, max_tool_calls=2), interp))
    assert [r.parallel_tool_calls for r in engine.requests] == [True, False, False]


async def test_a_forced_choice_applies_to_the_first_call_only() -> None:
    engine, interp = FakeEngine(), FakeInterpreter()
    engine.reset(code_call("1"), say("done"))
    await run(loop_of(engine, with_code(interp, tool_choice="required"), interp))
    assert [r.tool_choice for r in engine.requests] == ["required", "auto"]


async def test_last_call_gets_no_tools() -> None:
    engine, interp = FakeEngine(), FakeInterpreter()
    engine.reset(code_call("1"))
    events = await run(loop_of(engine, with_code(interp, max_turns=2), interp))
    assert len(engine.requests) == 2 and not engine.requests[1].tools
    assert events[-1]["type"] == "response.completed"


async def test_function_call_ends_the_response_with_compact_arguments() -> None:
    engine = FakeEngine()
    engine.reset(function_call("weather", {"city": "Oslo"}))
    events = await run(loop_of(engine, plan(tools=(WEATHER,))))
    item = events[-1]["response"]["output"][0]
    assert item["type"] == "function_call" and item["arguments"] == '{"city": "Oslo"}'
    assert events[-1]["type"] == "response.completed" and len(engine.requests) == 1


async def test_a_call_to_a_tool_not_offered_is_dropped() -> None:
    engine = FakeEngine()
    engine.reset([*function_call("weather", {"city": "Oslo"}, finish=False), *say("plain")])
    events = await run(loop_of(engine, plan()))
    assert [it["type"] for it in events[-1]["response"]["output"]] == ["message"]


async def test_a_code_call_cut_off_by_length_is_closed_and_run() -> None:
    engine, interp = FakeEngine(), FakeInterpreter()
    cut = [
        ToolCallStart(0, CODE_TOOL_NAME),
        ToolCallDelta(0, '{"code": "print(1)'),
        Finish("length", Usage()),
    ]
    engine.reset(cut, say("one"))
    events = await run(loop_of(engine, with_code(interp), interp))
    call = events[-1]["response"]["output"][0]
    assert call["code"] == "print(1)" and call["status"] == "completed"
    assert events[-1]["type"] == "response.completed"


async def test_no_container_to_be_had_is_a_tool_error_and_the_response_completes() -> None:
    """The sandbox is full past the queue timeout: the call's item says so (failed, the error in its logs),
    the model is told and answers, and the response completes (it used to fail with a server error)."""
    engine = FakeEngine()
    engine.reset(code_call("1 + 1"), say("The sandbox is busy, so: 2."))
    tries = []

    async def container() -> str:
        tries.append(1)
        raise PoolExhausted("no code-interpreter container became free within 2 s (all 2 in use)")

    interp = FakeInterpreter()
    loop = loop_of(engine, plan(tools=(code_tool_spec(),), container=Scripted(container)), interp)
    events = await run(loop)
    assert loop.failure is None and events[-1]["type"] == "response.completed"
    call, answer = events[-1]["response"]["output"]
    assert call["type"] == "code_interpreter_call" and call["status"] == "failed"
    assert call["container_id"] == "" and call["code"] == "1 + 1"
    (logs,) = call["outputs"]
    assert logs["type"] == "logs" and "The code was not run" in logs["logs"]
    assert "no code-interpreter container became free within 2 s" in logs["logs"]
    assert answer["content"][0]["text"] == "The sandbox is busy, so: 2."
    assert interp.executions == [] and len(tries) == 1
    told = engine.requests[1].turns[-1]
    assert isinstance(told, ToolResult) and "The code was not run" in told.output
    done = [e for e in events if e["type"] == "response.output_item.done"][0]["item"]
    assert done["status"] == "failed"  # no code_interpreter_call.completed for a failed call
    assert not any(e["type"] == "response.code_interpreter_call.completed" for e in events)


async def test_two_code_calls_without_a_container_wait_once() -> None:
    engine = FakeEngine()
    engine.reset([*code_call("1", 0, finish=False), *code_call("2", 1)], say("done"))
    tries = []

    async def container() -> str:
        tries.append(1)
        raise PoolExhausted("full")

    events = await run(
        loop_of(engine, plan(tools=(code_tool_spec(),), container=Scripted(container)), FakeInterpreter())
    )
    calls = [it for it in events[-1]["response"]["output"] if it["type"] == "code_interpreter_call"]
    assert [c["status"] for c in calls] == ["failed", "failed"] and len(tries) == 1


async def test_the_container_is_pinned_while_the_response_runs() -> None:
    engine, interp = FakeEngine(), FakeInterpreter()
    engine.reset(code_call("1"), code_call("2"), say("done"))
    container = CodeContainer(ContainerService(interp))  # created on first use, then the same

    loop = loop_of(engine, plan(tools=(code_tool_spec(),), container=container), interp)
    events = await run(loop)
    assert events[-1]["type"] == "response.completed"
    (cid,) = {c for c, _ in interp.executions}
    assert interp.pins_seen == [1, 1]  # pinned during both calls (and between them)
    assert interp.pins[cid] == 0  # unpinned when the loop ended


async def test_an_engine_refusal_fails_with_a_client_error() -> None:
    def refuse(request: Any) -> list[Any]:
        raise EngineRejected("the prompt is too long", code="context_length_exceeded")

    engine = FakeEngine()
    engine.reset(refuse)
    loop = loop_of(engine, plan())
    events = await run(loop)
    assert isinstance(loop.failure, InvalidRequest) and loop.failure.code == "context_length_exceeded"
    assert events[-1]["response"]["error"] == {"code": "invalid_prompt", "message": "the prompt is too long"}


async def test_text_before_a_code_call_is_closed_before_the_call_starts() -> None:
    engine, interp = FakeEngine(), FakeInterpreter()
    engine.reset([TextDelta("Let me compute. "), *code_call("print(2)")], say("2"))
    events = await run(loop_of(engine, with_code(interp), interp))
    kinds = [it["type"] for it in events[-1]["response"]["output"]]
    assert kinds == ["message", "code_interpreter_call", "message"]


@pytest.mark.parametrize("outputs", [True, False])
async def test_outputs_are_kept_inside_whatever_goes_out(outputs: bool) -> None:
    engine, interp = FakeEngine(), FakeInterpreter()
    engine.reset(code_call("print(3)"), say("3"))
    builder = ResponseBuilder(ECHO, include_outputs=outputs)
    loop = AgentLoop(with_code(interp), builder, engine, interp, "resp_test")
    events = [dict(ev) async for ev in loop.events()]
    sent = events[-1]["response"]["output"][0]["outputs"]
    assert sent == ([{"type": "logs", "logs": "3\n"}] if outputs else None)
    assert builder.state.code_call(0)["outputs"] == [{"type": "logs", "logs": "3\n"}]
    assert engine.requests[1].turns[-1].output == "3\n"  # type: ignore[union-attr]


async def test_upfront_requests_are_the_first_call_and_every_later_constraint() -> None:
    """What the service asks the engine to check before a response starts (admission)."""
    engine = FakeEngine()
    loop = loop_of(engine, plan(max_output_tokens=50))
    (first,) = loop.upfront_requests()
    assert first.request_id == "resp_test-0" and first.sampling.max_tokens == 50 and engine.requests == []
    schema = {"type": "json_schema", "schema": {"type": "object"}}
    checks = loop_of(
        engine, with_code(FakeInterpreter(), sampling=Sampling(text_format=schema))
    ).upfront_requests()
    # Beside tools the first call carries the format too (calls or the JSON); alone it is checked as well.
    assert [(bool(c.tools), c.sampling.text_format) for c in checks] == [(True, schema), (False, schema)]
    a, b = {"regex": "a"}, {"regex": "b"}
    checks = loop_of(engine, plan(structured=(a, b, a))).upfront_requests()
    assert [c.sampling.structured for c in checks] == [a, b]
