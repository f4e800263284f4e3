"""`POST /v1/responses/input_tokens` through the SDK's `client.responses.input_tokens.count`, over the fake engine."""

from __future__ import annotations

import httpx
import openai
import pytest
from openai.types.responses import InputTokenCountResponse

from tests.support.fakes import FakeEngine, say
from tests.support.serving import LiveServer
from tests.support.wire import validate_as

MODEL = "fake-model"
FN = {
    "type": "function",
    "name": "lookup",
    "description": "Look a word up.",
    "parameters": {"type": "object"},
}


def test_count_equals_the_usage_of_create(client: openai.OpenAI, engine: FakeEngine) -> None:
    kwargs = {
        "input": "How many tokens is this question?",
        "instructions": "Answer in one line.",
        "tools": [FN],
    }
    counted = client.responses.input_tokens.count(model=MODEL, **kwargs)  # type: ignore[arg-type]
    engine.reset(say("One."))
    created = client.responses.create(model=MODEL, **kwargs)  # type: ignore[arg-type]
    assert created.usage is not None and counted.input_tokens == created.usage.input_tokens
    assert counted.input_tokens == FakeEngine.prompt_tokens(engine.requests[0])
    assert counted.object == "response.input_tokens"


def test_count_sees_tools_instructions_and_history(client: openai.OpenAI, engine: FakeEngine) -> None:
    def count(**kw: object) -> int:
        return client.responses.input_tokens.count(**kw).input_tokens  # type: ignore[arg-type]

    plain = count(model=MODEL, input="hello there")
    assert count(model=MODEL, input="hello there", tools=[FN]) > plain
    assert count(model=MODEL, input="hello there", tools=[FN], tool_choice="none") == plain
    assert count(model=MODEL, input="hello there", instructions="x" * 400) >= plain + 100
    assert count(input="hello there") == plain  # model is optional
    engine.reset(say("A long answer " * 20))
    first = client.responses.create(model=MODEL, input="hello there")
    assert count(model=MODEL, input="more", previous_response_id=first.id) > count(model=MODEL, input="more")


def test_wire_shape(fake_server: LiveServer) -> None:
    r = httpx.post(fake_server.base_url + "/v1/responses/input_tokens", json={"input": "hi"}, timeout=10)
    assert r.status_code == 200
    validate_as(InputTokenCountResponse, r.json())
    assert set(r.json()) == {"object", "input_tokens"} and r.json()["input_tokens"] >= 1


@pytest.mark.parametrize(
    "body,status,param",
    [
        ({"model": "gpt-9", "input": "hi"}, 404, "model"),
        ({"input": "hi", "tools": [{"type": "image_generation"}]}, 400, "tools[0].type"),
        ({"input": [{"role": "wizard", "content": "hi"}]}, 400, "input[0].role"),
        ({"input": "hi", "previous_response_id": "resp_nope"}, 404, "previous_response_id"),
        ({"input": "hi", "conversation": "conv_1"}, 404, "conversation"),
        ({"input": "hi", "tool_choice": "required"}, 400, "tool_choice"),
        ({"input": "hi", "include": ["nonsense"]}, 400, "include[0]"),
        ([1, 2], 400, "body"),
    ],
)
def test_bad_requests_name_the_param(fake_server: LiveServer, body: object, status: int, param: str) -> None:
    r = httpx.post(fake_server.base_url + "/v1/responses/input_tokens", json=body, timeout=10)
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] == param


def test_personality_is_taken_as_the_sdk_sends_it(client: openai.OpenAI, fake_server: LiveServer) -> None:
    """`personality` (a count's field in the SDK, not a create's): accepted; the served models have no style
    presets, so the count is the one create would use. A value that is no string or is too long is a 400."""
    plain = client.responses.input_tokens.count(model=MODEL, input="hello there").input_tokens
    styled = client.responses.input_tokens.count(model=MODEL, input="hello there", personality="friendly")
    assert styled.input_tokens == plain
    custom = client.responses.input_tokens.count(input="hello there", personality="a-newer-preset")
    assert custom.input_tokens == plain
    for bad in (3, "x" * 65, ""):
        r = httpx.post(
            fake_server.base_url + "/v1/responses/input_tokens",
            json={"input": "hi", "personality": bad},
            timeout=10,
        )
        assert r.status_code == 400 and r.json()["error"]["param"] == "personality", r.text
