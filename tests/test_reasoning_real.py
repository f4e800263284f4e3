"""A reasoning model served in full, on vLLM: the tiny model given a Qwen3-style `<think>` template
(tests/support/reasoning_models.py), each model call forced to write the planned text (`ForcedEngine`), which records
what each call was asked; the prompt a call saw is `engine.render` of it.

Its reasoning is given back to it: to the next model call of one response's tool loop, across
`previous_response_id`, and to a `store: false` client through the sealed `encrypted_content` (an altered
blob is a 400); `reasoning.effort` reaches the template (`none`: an empty think block prefilled)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.clients.test_openai_agents import tool_call
from tests.support.real import TINY, ForcedEngine, hermes_call, tiny_model_server
from tests.support.reasoning_models import reasoning_tiny_model
from tests.support.serving import LiveServer
from tests.support.wire import validate_response
from vllm_responses.config import Config
from vllm_responses.engine.types import Reasoning, ToolCall

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
LOOK_UP = "<think>Look the weather up first.</think>" + tool_call("get_weather", {"city": "Paris"})
ANSWER = "<think>The tool said sunny.</think>It is sunny in Paris."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    model = reasoning_tiny_model(tmp_path_factory.mktemp("model"))
    config = Config(code_interpreter_timeout=20, reasoning_key="the test key")
    live = tiny_model_server(workers=1, model=model, config=config, wrap=ForcedEngine)
    yield live
    live.stop()


@pytest.fixture
def engine(server: LiveServer) -> ForcedEngine:
    forced: ForcedEngine = server.engine
    forced.requests.clear()
    forced.plan.clear()
    return forced


@pytest.fixture
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def dumped(items: list[Any]) -> list[dict[str, Any]]:
    return [it.model_dump(exclude_none=True) for it in items]


def test_each_calls_reasoning_reaches_the_next_call_of_the_tool_loop(
    engine: ForcedEngine, client: openai.OpenAI
) -> None:
    engine.plan = ["<think>Use Python for this.</think>" + hermes_call("print(6 * 7)"), ANSWER]
    tools: Any = [{"type": "code_interpreter", "container": {"type": "auto"}}]
    resp = client.responses.create(model=TINY, input="What is 6 * 7?", tools=tools)

    validate_response(resp.model_dump(mode="json"))
    kinds = [it.type for it in resp.output]
    assert kinds == ["reasoning", "code_interpreter_call", "reasoning", "message"], kinds
    assert resp.output[0].content[0].text == "Use Python for this."  # type: ignore[union-attr,index]
    first, second = engine.requests
    turns = list(second.turns)
    at = turns.index(Reasoning("Use Python for this."))
    assert isinstance(turns[at + 1], ToolCall)  # the reasoning, then the call it led to
    prompt = engine.render(second)
    assert "<|im_start|>assistant\n<think>\nUse Python for this.\n</think>\n\n\n<tool_call>" in prompt
    assert "Use Python for this." not in engine.render(first)


def test_reasoning_is_given_back_across_previous_response_id(
    engine: ForcedEngine, client: openai.OpenAI
) -> None:
    engine.plan = [LOOK_UP, ANSWER]
    first = client.responses.create(model=TINY, input="Weather in Paris?", tools=[WEATHER])  # type: ignore[list-item]
    call = next(it for it in first.output if it.type == "function_call")
    second = client.responses.create(
        model=TINY,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[WEATHER],  # type: ignore[list-item]
    )

    assert second.output_text == "It is sunny in Paris."
    assert Reasoning("Look the weather up first.") in engine.requests[1].turns
    assert "<think>\nLook the weather up first.\n</think>" in engine.render(engine.requests[1])


def test_a_stateless_client_gives_reasoning_back_sealed(engine: ForcedEngine, client: openai.OpenAI) -> None:
    engine.plan = [LOOK_UP, ANSWER]
    user = {"role": "user", "content": "Weather in Paris?"}
    first = client.responses.create(
        model=TINY,
        input=[user],  # type: ignore[list-item]
        tools=[WEATHER],  # type: ignore[list-item]
        store=False,
        include=["reasoning.encrypted_content"],
    )
    items = dumped(first.output)
    reasoning = next(it for it in items if it["type"] == "reasoning")
    sealed = reasoning["encrypted_content"]
    assert sealed and "weather" not in sealed.lower()
    del reasoning["content"]  # what the model gets back can only come from the sealed copy
    call = next(it for it in items if it["type"] == "function_call")
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}
    second = client.responses.create(
        model=TINY,
        input=[user, *items, output],  # type: ignore[list-item]
        tools=[WEATHER],  # type: ignore[list-item]
        store=False,
        include=["reasoning.encrypted_content"],
    )

    assert second.output_text == "It is sunny in Paris."
    assert Reasoning("Look the weather up first.") in engine.requests[1].turns
    assert "<think>\nLook the weather up first.\n</think>" in engine.render(engine.requests[1])

    # The blob altered (one character), or one of another server: a 400 at the item, no model call.
    index = 1 + items.index(reasoning)
    engine.requests.clear()
    flipped = sealed[:10] + ("A" if sealed[10] != "A" else "B") + sealed[11:]
    for blob in (flipped, "vr1:" + "TG9vayB0aGUgd2VhdGhlciB1cCBmaXJzdC4="):
        reasoning["encrypted_content"] = blob
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(
                model=TINY,
                input=[user, *items, output],  # type: ignore[list-item]
                tools=[WEATHER],  # type: ignore[list-item]
                store=False,
            )
        body: Any = err.value.body
        assert body["param"] == f"input[{index}].encrypted_content", body
        assert body["code"] == "invalid_encrypted_content"
    assert engine.requests == []


def test_effort_reaches_the_template(engine: ForcedEngine, client: openai.OpenAI) -> None:
    engine.plan = ["Hi.", "<think>Greet back.</think>Hi."]
    off = client.responses.create(model=TINY, input="Hi!", reasoning={"effort": "none"})
    on = client.responses.create(model=TINY, input="Hi!", reasoning={"effort": "high"})

    assert [it.type for it in off.output] == ["message"] and off.output_text == "Hi."
    assert [it.type for it in on.output] == ["reasoning", "message"]
    assert [r.reasoning_effort for r in engine.requests] == ["none", "high"]
    assert engine.render(engine.requests[0]).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert engine.render(engine.requests[1]).endswith("<|im_start|>assistant\n")
    assert off.usage is not None and on.usage is not None
    assert off.usage.input_tokens > on.usage.input_tokens  # the empty think block is in the prompt


def test_a_summary_streams_as_the_reasoning_is_generated(engine: ForcedEngine, client: openai.OpenAI) -> None:
    engine.plan = [ANSWER]
    summary: list[str] = []
    with client.responses.stream(model=TINY, input="Weather?", reasoning={"summary": "detailed"}) as s:
        for event in s:
            if event.type == "response.reasoning_summary_text.delta":
                summary.append(event.delta)
        resp = s.get_final_response()

    item = resp.output[0]
    assert item.type == "reasoning" and item.content is not None
    assert [p.text for p in item.summary] == [item.content[0].text] == ["".join(summary)]
    assert "The tool said sunny." in "".join(summary)


def test_a_concise_summary_of_long_reasoning_is_written_by_the_model(
    engine: ForcedEngine, client: openai.OpenAI
) -> None:
    thought = " ".join(f"Weigh option {i} against the rest and keep the better one." for i in range(14))
    engine.plan = [f"<think>{thought}</think>Option 13.", "Kept the best option."]
    resp = client.responses.create(model=TINY, input="Which?", reasoning={"summary": "concise"})

    validate_response(resp.model_dump(mode="json"))
    item = resp.output[0]
    assert item.type == "reasoning" and item.content is not None
    assert [p.text for p in item.summary] == ["Kept the best option."]
    assert thought in item.content[0].text
    first, summarising = engine.requests
    assert summarising.reasoning_effort == "none" and thought in engine.render(summarising)
    assert (
        resp.usage is not None
        and resp.usage.output_tokens > resp.usage.output_tokens_details.reasoning_tokens
    )
