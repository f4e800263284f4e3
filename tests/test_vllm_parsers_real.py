"""A vLLM-only `--tool-call-parser` name (xlam) on the real engine (tiny model, forced output) through the openai
SDK: vLLM's parser finds the call, the response holds a function_call item, the stream validates."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest
from openai.types.responses import ResponseFunctionToolCall

from tests.real import TINY, exactly, tiny_model_server
from tests.serving import LiveServer
from tests.wire import check_stream, parse_sse, validate_response

pytestmark = [pytest.mark.engine, pytest.mark.slow]

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
# xLAM's format: a JSON list of calls (vLLM's `xlam` parser; we have no parser of that name)
OUTPUT = json.dumps([{"name": "get_weather", "arguments": {"city": "Paris"}}])


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    s = tiny_model_server(workers=0, tool_parser="xlam")
    yield s
    s.stop()


def test_a_vllm_only_parser_makes_a_function_call(server: LiveServer) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)
    resp = client.responses.create(
        model=TINY,
        input="Weather in Paris?",
        tools=[WEATHER],  # type: ignore[list-item]
        max_output_tokens=256,
        extra_body={"structured_outputs": exactly(OUTPUT)},
    )
    validate_response(resp.model_dump(mode="json", exclude_unset=True, by_alias=True))
    (call,) = resp.output
    assert isinstance(call, ResponseFunctionToolCall) and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"} and call.status == "completed"

    body = {
        "model": TINY,
        "input": "Weather in Paris?",
        "tools": [WEATHER],
        "max_output_tokens": 256,
        "stream": True,
        "structured_outputs": exactly(OUTPUT),
    }
    r = httpx.post(server.base_url + "/v1/responses", json=body, timeout=300)
    events = parse_sse(r.text)
    check_stream(events)  # every event validates against the SDK's types
    types = [e["type"] for e in events]
    assert "response.output_text.delta" not in types
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert json.loads(done["arguments"]) == {"city": "Paris"}
    assert events[-1]["response"]["output"][0]["name"] == "get_weather"
