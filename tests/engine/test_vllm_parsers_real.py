"""A vLLM-only `--tool-call-parser` name (qwen3_xml, Qwen3-Coder's XML calls) on the real engine (tiny model,
forced output) through the openai SDK: vLLM's parser finds a function call, and a code-interpreter call streams
its code, runs in the sandbox and the answer follows; every event validates."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest
from openai.types.responses import ResponseFunctionToolCall

from tests.support.real import TINY, exactly, tiny_model_server
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, validate_response

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CI = [{"type": "code_interpreter", "container": {"type": "auto"}}]


def qwen3_xml(name: str, **params: str) -> str:
    """A call as Qwen3-Coder writes it (vLLM's `qwen3_xml` parser reads it; we have no parser of that name)."""
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    s = tiny_model_server(workers=1, tool_parser="qwen3_xml")
    yield s
    s.stop()


@pytest.fixture
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def test_a_vllm_only_parser_makes_a_function_call(server: LiveServer, client: openai.OpenAI) -> None:
    output = qwen3_xml("get_weather", city="Paris")
    resp = client.responses.create(
        model=TINY,
        input="Weather in Paris?",
        tools=[WEATHER],  # type: ignore[list-item]
        max_output_tokens=256,
        extra_body={"structured_outputs": exactly(output)},
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
        "structured_outputs": exactly(output),
    }
    events = parse_sse(httpx.post(server.base_url + "/v1/responses", json=body, timeout=300).text)
    check_stream(events)  # every event validates against the SDK's types
    assert "response.output_text.delta" not in [e["type"] for e in events]
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert json.loads(done["arguments"]) == {"city": "Paris"}


def test_a_code_call_through_a_vllm_parser_streams_its_code(client: openai.OpenAI) -> None:
    code = 'print("sum:", sum(range(10)))'
    with client.responses.stream(
        model=TINY,
        input="Sum 0..9.",
        tools=CI,  # type: ignore[arg-type]
        include=["code_interpreter_call.outputs"],
        max_output_tokens=256,
        extra_body={"structured_outputs": [exactly(qwen3_xml("python", code=code)), exactly("It is 45.")]},
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "response.code_interpreter_call_code.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == code
    assert len(deltas) > 3, "the code should stream in several deltas, as the model writes it"
    call, message = final.output
    assert call.type == "code_interpreter_call" and call.status == "completed" and call.code == code
    assert call.outputs is not None and call.outputs[0].type == "logs" and call.outputs[0].logs == "sum: 45\n"
    assert message.type == "message" and final.output_text == "It is 45."
