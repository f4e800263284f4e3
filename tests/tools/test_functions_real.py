"""Custom tools and strict functions on vLLM (the tiny model, Hermes format) through the openai SDK: a forced custom
call's input follows its regex or Lark grammar, an exact call round-trips with its output, strict arguments hold."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseCustomToolCall, ResponseFunctionToolCall

from tests.support.real import TINY, exactly, tiny_model_server
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, event_runs, parse_sse, validate_response

pytestmark = [pytest.mark.engine, pytest.mark.slow]

DIGITS = {
    "type": "custom",
    "name": "digits",
    "description": "Takes three digits.",
    "format": {"type": "grammar", "syntax": "regex", "definition": "[0-9]{3}"},
}
SQL = {
    "type": "custom",
    "name": "run_sql",
    "description": "Runs a query.",
    "format": {
        "type": "grammar",
        "syntax": "lark",
        "definition": 'start: "SELECT " COL " FROM t"\nCOL: /[a-z]{1,4}/',
    },
}
SHELL = {"type": "custom", "name": "shell", "description": "Runs a shell command."}


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    s = tiny_model_server(workers=0)
    yield s
    s.stop()


@pytest.fixture
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def hermes(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def test_a_forced_custom_call_follows_its_regex(client: openai.OpenAI) -> None:
    for _ in range(2):  # the model is random: two calls, two inputs, each matching
        resp = client.responses.create(
            model=TINY,
            input="Three digits, please.",
            tools=[DIGITS, SHELL],  # type: ignore[list-item]
            tool_choice={"type": "custom", "name": "digits"},
            parallel_tool_calls=False,
            max_output_tokens=256,  # one token a byte: room for the whole call
            temperature=1.0,
        )
        validate_response(resp.model_dump(mode="json", exclude_unset=True, by_alias=True))
        (call,) = resp.output
        assert isinstance(call, ResponseCustomToolCall) and call.name == "digits"
        assert re.fullmatch("[0-9]{3}", call.input), call.input


def test_a_forced_custom_call_follows_its_lark_grammar_streamed(
    server: LiveServer, client: openai.OpenAI
) -> None:
    body = {
        "model": TINY,
        "input": "Query.",
        "tools": [SQL],
        "tool_choice": {"type": "custom", "name": "run_sql"},
        "max_output_tokens": 256,
        "parallel_tool_calls": False,  # exactly one call
        "stream": True,
    }
    r = httpx.post(server.base_url + "/v1/responses", json=body, timeout=300)
    assert r.status_code == 200, r.text
    events = parse_sse(r.text)
    check_stream(events)  # every event validates against the SDK's types
    assert "response.custom_tool_call_input.delta" in event_runs(e["type"] for e in events)
    (item,) = events[-1]["response"]["output"]
    assert item["type"] == "custom_tool_call" and re.fullmatch("SELECT [a-z]{1,4} FROM t", item["input"])
    with client.responses.stream(**{k: v for k, v in body.items() if k != "stream"}) as stream:  # type: ignore[arg-type]
        deltas = "".join(ev.delta for ev in stream if ev.type == "response.custom_tool_call_input.delta")
        final = stream.get_final_response()
    (call,) = final.output
    assert isinstance(call, ResponseCustomToolCall) and call.input == deltas
    assert re.fullmatch("SELECT [a-z]{1,4} FROM t", call.input)


def test_an_exact_custom_call_round_trips_with_its_output(client: openai.OpenAI) -> None:
    command = 'echo "hi"\nls'
    first = client.responses.create(
        model=TINY,
        input="Say hi in the shell.",
        tools=[SHELL],  # type: ignore[list-item]
        extra_body={"structured_outputs": exactly(hermes("shell", {"input": command}))},
    )
    (call,) = first.output
    assert isinstance(call, ResponseCustomToolCall) and call.input == command
    second = client.responses.create(
        model=TINY,
        previous_response_id=first.id,
        input=[{"type": "custom_tool_call_output", "call_id": call.call_id, "output": "hi"}],
        tools=[SHELL],  # type: ignore[list-item]
        extra_body={"structured_outputs": exactly("It printed hi.")},
    )
    assert second.output_text == "It printed hi."
    assert [it.type for it in client.responses.input_items.list(second.id).data] == [
        "custom_tool_call_output"
    ]
    # The model saw the call and its output: the prompt holds both (more input tokens than without them).
    alone = client.responses.input_tokens.count(model=TINY, input="x", tools=[SHELL])  # type: ignore[list-item]
    assert second.usage is not None and second.usage.input_tokens > alone.input_tokens


def test_a_forced_strict_function_follows_its_schema(client: openai.OpenAI) -> None:
    tool = {
        "type": "function",
        "name": "pick",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"color": {"type": "string", "enum": ["red", "blue"]}},
            "required": ["color"],
            "additionalProperties": False,
        },
    }
    resp = client.responses.create(
        model=TINY,
        input="Pick.",
        tools=[tool],
        tool_choice="required",
        max_output_tokens=256,  # type: ignore[list-item]
        parallel_tool_calls=False,
    )
    (call,) = resp.output
    assert isinstance(call, ResponseFunctionToolCall) and json.loads(call.arguments)["color"] in (
        "red",
        "blue",
    )


def test_a_bad_grammar_is_a_400(client: openai.OpenAI) -> None:
    bad = {**DIGITS, "format": {"type": "grammar", "syntax": "regex", "definition": "[0-9"}}
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=TINY, input="x", tools=[bad])  # type: ignore[list-item]
    assert err.value.body["param"] == "tools[0].format.definition"  # type: ignore[index]


def test_deferred_tools_shrink_the_prompt(client: openai.OpenAI) -> None:
    """A catalogue of 40 functions given with `defer_loading` and a `tool_search` tool: the first prompt (the
    model's template, counted with its tokenizer) holds the search tool only, a fraction of the catalogue's."""
    catalogue = [
        {
            "type": "function",
            "name": f"service_{i}",
            "description": f"Calls internal service number {i} of the billing platform.",
            "parameters": {"type": "object", "properties": {"account": {"type": "string"}}},
        }
        for i in range(40)
    ]

    def count(tools: list[dict[str, Any]]) -> int:
        return client.responses.input_tokens.count(model=TINY, input="Bill Ada.", tools=tools).input_tokens  # type: ignore[arg-type]

    full = count(catalogue)
    deferred = count([{"type": "tool_search"}, *({**t, "defer_loading": True} for t in catalogue)])
    print(f"40 functions: {full} prompt tokens offered, {deferred} deferred behind tool_search")
    assert deferred * 10 < full


def test_effort_is_refused_where_the_template_has_no_reasoning_control(client: openai.OpenAI) -> None:
    """The tiny model's template takes no reasoning variable: an effort is a 400 at `reasoning.effort`, as
    OpenAI's for a model that does not reason; "none" (no reasoning) and a summary alone (Codex CLI's
    `reasoning`) are served."""
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=TINY, input="Hi.", reasoning={"effort": "high"})
    body = err.value.body
    assert isinstance(body, dict) and body["param"] == "reasoning.effort"
    assert body["code"] == "unsupported_parameter"
    for reasoning in ({"effort": "none"}, {"summary": "auto"}):
        r = client.responses.create(
            model=TINY,
            input="Hi.",
            reasoning=reasoning,  # type: ignore[arg-type]
            extra_body={"structured_outputs": exactly("Hello.")},
        )
        assert r.output_text == "Hello."
