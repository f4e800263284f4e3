"""Forced and strict calls in every tool-call format on vLLM (the tiny model) through the openai SDK: a forced named
strict function gives exactly one call whose arguments match the schema, `required` gives one call (several with
parallel calls), the code interpreter can be forced, and parallel_tool_calls false cuts a second call.

One vLLM engine serves the module; per format, the server's engine is a `VLLMEngine` over it built with that
`tool_parser`, as `--tool-call-parser` builds it (the tiny model's template is the same for every format: only
the grammar and the parser change)."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from openai.types.responses import ResponseCodeInterpreterToolCall, ResponseFunctionToolCall

from tests.support.real import TINY, exactly
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, event_runs, parse_sse, validate_response
from vllm_responses.config import Config

pytestmark = [pytest.mark.engine, pytest.mark.slow]

FORMATS = ("hermes", "function_tag", "llama3_json", "pythonic", "harmony", "mistral")
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Rome"]},
        "days": {"type": "integer", "enum": [1, 2, 3]},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
TRIP = {
    "type": "function",
    "name": "trip",
    "description": "Plans a trip.",
    "strict": True,
    "parameters": SCHEMA,
}
NOTE = {
    "type": "function",
    "name": "note",
    "description": "Takes a note.",
    "strict": True,
    "parameters": {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    },
}
SCHEMAS = {"trip": SCHEMA, "note": NOTE["parameters"]}


class Switch:
    """The server's engine: the real `VLLMEngine` of the format in use, all over one vLLM engine."""

    def __init__(self, engine: Any) -> None:
        self.base = self.engine = engine

    def use(self, fmt: str) -> None:
        from vllm_responses.engine.vllm import VLLMEngine

        self.engine = VLLMEngine(self.base.llm, TINY, tool_parser=fmt)
        assert self.engine.parser_name == fmt

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    from interpreter_service.pool import PoolConfig, WorkerPool
    from vllm_responses.engine.args import add_engine_cli_args, engine_args_from_namespace
    from vllm_responses.engine.models import tiny_model_path
    from vllm_responses.engine.vllm import VLLMEngine
    from vllm_responses.store.memory import MemoryStore

    @asynccontextmanager
    async def opener(cfg: Config) -> AsyncIterator[tuple[Any, Any, Any]]:
        async with AsyncExitStack() as stack:
            pool = await stack.enter_async_context(WorkerPool(PoolConfig(workers=1, timeout_s=20)))
            flags = ["--max-model-len", "2048", "--seed", "0"]
            ns = add_engine_cli_args(argparse.ArgumentParser()).parse_args(flags)
            engine = await VLLMEngine.start(
                engine_args_from_namespace(ns, str(tiny_model_path())), model_name=TINY
            )
            stack.push_async_callback(engine.aclose)
            yield Switch(engine), pool, MemoryStore()

    s = LiveServer(Config(code_interpreter_timeout=20), None, None, opener=opener).start(timeout=600)
    yield s
    s.stop()


@pytest.fixture
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def use(server: LiveServer, fmt: str) -> None:
    server.engine.use(fmt)


def calls(resp: Any) -> list[ResponseFunctionToolCall]:
    validate_response(resp.model_dump(mode="json", exclude_unset=True, by_alias=True))
    assert resp.status == "completed", resp.incomplete_details
    assert all(isinstance(item, ResponseFunctionToolCall) for item in resp.output), resp.output
    return list(resp.output)


def held(call: ResponseFunctionToolCall, fmt: str) -> None:
    """The call's arguments parse; they match the tool's schema (pythonic: not held, see docs/parsers.md)."""
    args = json.loads(call.arguments)
    if fmt != "pythonic":
        jsonschema.validate(args, SCHEMAS[call.name])


@pytest.mark.parametrize("fmt", FORMATS)
def test_forced_calls_in_every_format(server: LiveServer, client: openai.OpenAI, fmt: str) -> None:
    use(server, fmt)
    base: dict[str, Any] = {
        "model": TINY,
        "input": "Plan a trip.",
        "tools": [TRIP, NOTE],
        "max_output_tokens": 200,
    }
    # A named strict function, one call: exactly one function_call whose arguments match the schema.
    resp = client.responses.create(
        **base, tool_choice={"type": "function", "name": "trip"}, parallel_tool_calls=False
    )
    (call,) = calls(resp)
    assert call.name == "trip"
    held(call, fmt)
    # `required`, one call.
    (call,) = calls(client.responses.create(**base, tool_choice="required", parallel_tool_calls=False))
    assert call.name in SCHEMAS
    held(call, fmt)
    # `required` with parallel calls: one or more, each held (harmony: one, its call ends the turn). The random
    # model may go on writing calls until the token budget ends the response: the calls made are still held.
    resp = client.responses.create(**base, tool_choice="required", parallel_tool_calls=True)
    validate_response(resp.model_dump(mode="json", exclude_unset=True, by_alias=True))
    assert all(isinstance(item, ResponseFunctionToolCall) for item in resp.output), resp.output
    done = list(resp.output)
    if resp.status == "incomplete":  # the last call may be cut short (its arguments closed as they were)
        assert resp.incomplete_details is not None and resp.incomplete_details.reason == "max_output_tokens"
        done = done[:-1]
    assert len(resp.output) >= 1 and all(c.name in SCHEMAS for c in done)
    for c in done:
        held(c, fmt)


@pytest.mark.parametrize("fmt", ["mistral", "pythonic"])
def test_a_forced_call_streams(server: LiveServer, fmt: str) -> None:
    use(server, fmt)
    body = {
        "model": TINY,
        "input": "Plan a trip.",
        "tools": [TRIP],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "max_output_tokens": 200,
        "stream": True,
    }
    r = httpx.post(server.base_url + "/v1/responses", json=body, timeout=300)
    assert r.status_code == 200, r.text
    events = parse_sse(r.text)
    check_stream(events)  # every event validates against the SDK's types
    assert "response.function_call_arguments.delta" in event_runs(e["type"] for e in events)
    (item,) = events[-1]["response"]["output"]
    assert item["type"] == "function_call" and item["name"] == "trip"
    jsonschema.validate(json.loads(item["arguments"]), SCHEMA)


@pytest.mark.parametrize("fmt", ["mistral", "function_tag"])
def test_the_code_interpreter_forced(server: LiveServer, client: openai.OpenAI, fmt: str) -> None:
    use(server, fmt)
    resp = client.responses.create(
        model=TINY,
        input="Run some code.",
        tools=[{"type": "code_interpreter", "container": {"type": "auto"}}, TRIP],
        tool_choice={"type": "code_interpreter"},
        max_tool_calls=1,
        max_output_tokens=300,
    )
    validate_response(resp.model_dump(mode="json", exclude_unset=True, by_alias=True))
    first = resp.output[0]
    assert isinstance(first, ResponseCodeInterpreterToolCall) and isinstance(first.code, str)


def test_parallel_false_keeps_the_first_call_only(server: LiveServer, client: openai.OpenAI) -> None:
    # Free calls, no grammar: the model writes two calls (forced by the `structured_outputs` extension, which
    # comes first), and parallel_tool_calls false cuts the model call after the first (function_tag format).
    use(server, "function_tag")
    two = '<function=note>{"ok": true}</function><function=note>{"ok": false}</function>'
    kw: dict[str, Any] = {"model": TINY, "input": "Note.", "tools": [NOTE]}
    both = calls(client.responses.create(**kw, extra_body={"structured_outputs": exactly(two)}))
    assert [json.loads(c.arguments) for c in both] == [{"ok": True}, {"ok": False}]
    resp = client.responses.create(
        **kw, parallel_tool_calls=False, extra_body={"structured_outputs": exactly(two)}
    )
    (call,) = calls(resp)
    assert json.loads(call.arguments) == {"ok": True}
    assert resp.usage is not None and resp.usage.output_tokens < len(two)  # the rest was not generated


@pytest.mark.parametrize("choice", [{"type": "function", "name": "trip"}, "required"])
def test_markdown_forces_a_function_as_a_hermes_call(
    server: LiveServer, client: openai.OpenAI, choice: Any
) -> None:
    """The markdown format (the embedded default model's) writes code cells only: a forced function is
    written as a Hermes call under our grammar (the tool described to the model in a system turn) and read
    by our Hermes parser, as vLLM's own server forces a call on any model."""
    use(server, "markdown_code")
    resp = client.responses.create(
        model=TINY,
        input="Plan a trip.",
        tools=[TRIP],  # type: ignore[list-item]
        tool_choice=choice,
        parallel_tool_calls=False,
        max_output_tokens=200,
    )
    (call,) = calls(resp)
    assert call.name == "trip"
    jsonschema.validate(json.loads(call.arguments), SCHEMA)


def test_a_forced_call_under_a_vllm_only_parser_is_written_and_read_as_hermes(
    server: LiveServer, client: openai.OpenAI
) -> None:
    """`qwen3_xml` is vLLM's parser only (no grammar of ours writes its XML calls): a forced call is written as a
    Hermes call under our grammar and read by our Hermes parser, so the choice still holds."""
    use(server, "qwen3_xml")
    resp = client.responses.create(
        model=TINY,
        input="Plan a trip.",
        tools=[TRIP],  # type: ignore[list-item]
        tool_choice={"type": "function", "name": "trip"},
        parallel_tool_calls=False,
        max_output_tokens=200,
    )
    (call,) = calls(resp)
    assert call.name == "trip"
    jsonschema.validate(json.loads(call.arguments), SCHEMA)
