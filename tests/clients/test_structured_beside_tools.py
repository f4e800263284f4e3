"""`text.format` beside tools, on the real engine (the tiny random-weight model, Hermes calls) through the `openai`
SDK's `responses.parse` and openai-agents' `Agent(output_type=...)`: every model call either calls a tool, well
formed, or answers in JSON matching the schema, so the final answer always parses.

The model's outputs are random; only the grammar holds them. Several seeds show that whatever the model picks,
the client gets a call it can run or an answer that validates. Where a test needs the path exact (the tool must
run), the first call is forced: by `tool_choice: required`, or by the `structured_outputs` extension through
`ForcedEngine`, which wins over everything and so is never used where the holding itself is shown.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Literal

import openai
import pytest
from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled
from agents.items import ToolCallItem, ToolCallOutputItem
from agents.models.openai_responses import OpenAIResponsesModel
from pydantic import BaseModel, ConfigDict

from tests.support.real import TINY as MODEL
from tests.support.real import ForcedEngine, tiny_model_server
from tests.support.serving import LiveServer
from vllm_responses.engine.types import EngineEvent, GenerateRequest

pytestmark = [pytest.mark.engine, pytest.mark.slow]

SEEDS = range(4)
ROUNDS = 6  # model calls a conversation may take before the test gives up on an answer


class Answer(BaseModel):
    """What every final answer must be."""

    model_config = ConfigDict(extra="forbid")
    color: Literal["red", "green"]
    ok: bool


class Lookup(BaseModel):
    """Look a word up in the glossary."""

    model_config = ConfigDict(extra="forbid")
    key: Literal["sky", "grass"]


def glossary(key: str) -> str:
    return {"sky": "blue", "grass": "green"}[key]


class PlannedEngine(ForcedEngine):
    """`ForcedEngine` while it has a plan; the real engine, unforced, once the plan is spent."""

    def generate(self, request: GenerateRequest) -> AsyncIterator[EngineEvent]:
        if self.plan:
            return super().generate(request)
        self.requests.append(request)
        return self.engine.generate(request)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    server = tiny_model_server(workers=0, wrap=PlannedEngine)
    yield server
    server.stop()


@pytest.fixture
def engine(server: LiveServer) -> Iterator[PlannedEngine]:
    planned = server.engine
    assert isinstance(planned, PlannedEngine)
    planned.plan.clear()
    planned.requests.clear()
    yield planned
    planned.plan.clear()


@pytest.fixture
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def _run_function_calls(resp: Any) -> list[dict[str, Any]]:
    """The client's side of the loop: each call is well formed (its arguments validate), run, answered."""
    outputs = []
    for item in resp.output:
        assert item.type in ("function_call", "message"), item
        if item.type == "function_call":
            assert item.name == "Lookup"
            key = Lookup.model_validate_json(item.arguments).key
            outputs.append({"type": "function_call_output", "call_id": item.call_id, "output": glossary(key)})
    return outputs


def _parse_until_answer(client: openai.OpenAI, seed: int, **first: Any) -> tuple[Answer, int]:
    """`responses.parse` with the function tool and `text_format=Answer`, the client running every call and
    sending its output back, until the model answers: (the answer, how many calls it ran)."""
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "tools": [openai.pydantic_function_tool(Lookup)],
        "text_format": Answer,
        "max_output_tokens": 400,
        "temperature": 1.0,
    }
    resp = client.responses.parse(
        input="What color is the grass?", extra_body={"seed": seed}, **kwargs, **first
    )
    ran = 0
    for round_no in range(1, ROUNDS + 1):
        assert resp.status == "completed", (resp.status, resp.incomplete_details, resp.output)
        outputs = _run_function_calls(resp)
        if not outputs:
            assert resp.output_parsed is not None, resp.output_text
            assert isinstance(resp.output_parsed, Answer)
            Answer.model_validate_json(resp.output_text)
            return resp.output_parsed, ran
        ran += len(outputs)
        resp = client.responses.parse(
            input=outputs, previous_response_id=resp.id, extra_body={"seed": seed * 100 + round_no}, **kwargs
        )
    raise AssertionError(f"seed {seed}: no answer after {ROUNDS} model calls")


def test_responses_parse_with_a_function_tool_answers_in_the_schema(
    client: openai.OpenAI, engine: PlannedEngine
) -> None:
    """Unforced: whatever each seed's model does (call the function or answer), every answer validates."""
    ran = [_parse_until_answer(client, seed)[1] for seed in SEEDS]
    assert 0 in ran and any(ran), ran  # some seeds answered at once, others called the function first
    assert all(r.tools and r.sampling.text_format and r.tool_choice == "auto" for r in engine.requests)


def test_responses_parse_runs_the_function_then_answers_in_the_schema(
    client: openai.OpenAI, engine: PlannedEngine
) -> None:
    """The first call is forced to call (`tool_choice: required`); the calls after are free, and held."""
    for seed in SEEDS:
        _answer, ran = _parse_until_answer(client, seed, tool_choice="required")
        assert ran >= 1


def test_tool_choice_none_answers_in_the_schema_alone(client: openai.OpenAI, engine: PlannedEngine) -> None:
    for seed in SEEDS:
        answer, ran = _parse_until_answer(client, seed, tool_choice="none")
        assert ran == 0 and isinstance(answer, Answer)


looked_up: list[str] = []


@function_tool
def lookup(key: Literal["sky", "grass"]) -> str:
    """Look a word up in the glossary."""
    looked_up.append(key)
    return glossary(key)


class SeededModel(OpenAIResponsesModel):
    """`OpenAIResponsesModel` sending a seed of its own with each request (`seed`, `seed` + 1, ...): each model
    call of a run samples differently, and every run is repeatable."""

    def __init__(self, seed: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed = seed

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: ModelSettings, *a: Any, **k: Any
    ) -> Any:
        self.seed += 1
        settings = dataclasses.replace(model_settings, extra_body={"seed": self.seed})
        return await super().get_response(system_instructions, input, settings, *a, **k)


def _agent(sdk: openai.AsyncOpenAI, seed: int) -> Agent[Any]:
    model = SeededModel(
        seed * 100,
        model=MODEL,
        openai_client=sdk,
    )
    return Agent(
        name="colors",
        instructions="Look words up, then answer.",
        model=model,
        model_settings=ModelSettings(temperature=1.0, max_tokens=400),
        tools=[lookup],
        output_type=Answer,
    )


async def test_agent_output_type_with_a_tool_the_tool_runs_then_the_answer(
    server: LiveServer, engine: PlannedEngine, async_sdk: Callable[..., openai.AsyncOpenAI]
) -> None:
    """The path made exact: the model calls the tool, the agent runs it, the model answers in the schema."""
    set_tracing_disabled(True)
    looked_up.clear()
    call = '<tool_call>\n{"name": "lookup", "arguments": {"key": "grass"}}\n</tool_call>'
    engine.plan.extend([call, '{"color": "green", "ok": true}'])
    sdk = async_sdk(server.base_url + "/v1", timeout=300)
    result = await Runner.run(_agent(sdk, 0), "What color is the grass?")
    assert result.final_output == Answer(color="green", ok=True)
    assert looked_up == ["grass"]
    assert [
        type(i).__name__ for i in result.new_items if isinstance(i, ToolCallItem | ToolCallOutputItem)
    ] == [
        "ToolCallItem",
        "ToolCallOutputItem",
    ]
    assert [bool(r.tools and r.sampling.text_format) for r in engine.requests] == [True, True]


async def test_agent_output_type_with_a_tool_unforced_always_ends_in_the_schema(
    server: LiveServer, engine: PlannedEngine, async_sdk: Callable[..., openai.AsyncOpenAI]
) -> None:
    """Unforced, several seeds: the run ends with an `Answer` (never a `ModelBehaviorError` over bad JSON), the
    tool running whenever the model called it."""
    set_tracing_disabled(True)
    ran: list[int] = []
    sdk = async_sdk(server.base_url + "/v1", timeout=300)
    for seed in SEEDS:
        looked_up.clear()
        result = await Runner.run(_agent(sdk, seed), "What color is the grass?", max_turns=ROUNDS)
        assert isinstance(result.final_output, Answer)
        calls = [i for i in result.new_items if isinstance(i, ToolCallItem)]
        assert len(looked_up) == len(calls)
        for item in calls:
            assert json.loads(item.raw_item.arguments)["key"] in ("sky", "grass")  # type: ignore[union-attr]
        ran.append(len(calls))
    assert 0 in ran and any(ran), ran  # some runs answered at once, others ran the tool first
    assert all(r.tools and r.sampling.text_format for r in engine.requests)
