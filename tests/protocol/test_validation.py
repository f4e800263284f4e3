"""Semantic validation as OpenAI answers it: every enum at every depth, JSON types, call outputs that answer
no call; each a 4xx in the error shape naming the `param` (a table; the fuzz is in test_validation_fuzz.py)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine, function_call, say
from tests.support.serving import LiveServer

MODEL = "fake-model"
FN = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}


def msg(role: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": content, **extra}


def text(kind: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "text": "x", **extra}


# (name, body fields beside model, param, code): each refused with a 400.
BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("role", {"input": [msg("wizard", "hi")]}, "input[0].role", "invalid_value"),
    ("easy role", {"input": [{"role": "robot", "content": "hi"}]}, "input[0].role", "invalid_value"),
    ("part type", {"input": [msg("user", [text("bogus")])]}, "input[0].content[0].type", "invalid_value"),
    (
        "part without type",
        {"input": [msg("user", [{"text": "x"}])]},
        "input[0].content[0].type",
        "missing_required_parameter",
    ),
    (
        "user output_text",
        {"input": [msg("user", [text("output_text")])]},
        "input[0].content[0].type",
        "invalid_value",
    ),
    (
        "assistant input_text",
        {"input": [msg("user", "hi"), msg("assistant", [text("input_text")])]},
        "input[1].content[0].type",
        "invalid_value",
    ),
    (
        "part text missing",
        {"input": [msg("user", [{"type": "input_text"}])]},
        "input[0].content[0].text",
        "missing_required_parameter",
    ),
    (
        "part text type",
        {"input": [msg("user", [{"type": "input_text", "text": 5}])]},
        "input[0].content[0].text",
        "invalid_type",
    ),
    ("message status", {"input": [msg("user", "hi", status="done")]}, "input[0].status", "invalid_value"),
    (
        "message phase",
        {"input": [msg("assistant", "hi", phase="thinking")]},
        "input[0].phase",
        "invalid_value",
    ),
    (
        "call status",
        {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "status": "?"}]},
        "input[0].status",
        "invalid_value",
    ),
    (
        "call output status",
        {
            "input": [
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": "ok", "status": "finished"},
            ]
        },
        "input[1].status",
        "invalid_value",
    ),
    (
        "call output part",
        {
            "input": [
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": [text("output_text")]},
            ]
        },
        "input[1].output[0].type",
        "invalid_value",
    ),
    (
        "call output audio",
        {"input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_audio"}]}]},
        "input[0].output[0].type",
        "unsupported_value",
    ),
    (
        "call arguments type",
        {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}}]},
        "input[0].arguments",
        "invalid_type",
    ),
    (
        "code call status",
        {"input": [{"type": "code_interpreter_call", "id": "ci_1", "status": "exploded"}]},
        "input[0].status",
        "invalid_value",
    ),
    (
        "code output type",
        {"input": [{"type": "code_interpreter_call", "id": "ci_1", "outputs": [{"type": "files"}]}]},
        "input[0].outputs[0].type",
        "invalid_value",
    ),
    (
        "code output logs",
        {"input": [{"type": "code_interpreter_call", "id": "ci_1", "outputs": [{"type": "logs"}]}]},
        "input[0].outputs[0].logs",
        "missing_required_parameter",
    ),
    (
        "summary part",
        {"input": [{"type": "reasoning", "id": "rs_1", "summary": [text("text")]}]},
        "input[0].summary[0].type",
        "invalid_value",
    ),
    (
        "reasoning part",
        {"input": [{"type": "reasoning", "id": "rs_1", "summary": [], "content": [text("summary_text")]}]},
        "input[0].content[0].type",
        "invalid_value",
    ),
    (
        "reasoning status",
        {"input": [{"type": "reasoning", "summary": [], "status": "x"}]},
        "input[0].status",
        "invalid_value",
    ),
    (
        "item reference id",
        {"input": [{"type": "item_reference"}]},
        "input[0].id",
        "missing_required_parameter",
    ),
    ("text.format.type", {"text": {"format": {"type": "yaml"}}}, "text.format.type", "invalid_value"),
    ("text.verbosity", {"text": {"verbosity": "loud"}}, "text.verbosity", "invalid_value"),
    ("reasoning.effort", {"reasoning": {"effort": "extreme"}}, "reasoning.effort", "invalid_value"),
    ("reasoning.summary", {"reasoning": {"summary": "long"}}, "reasoning.summary", "invalid_value"),
    ("reasoning.context", {"reasoning": {"context": "some"}}, "reasoning.context", "invalid_value"),
    ("truncation", {"truncation": "middle"}, "truncation", "invalid_value"),
    ("tool_choice", {"tool_choice": "sometimes"}, "tool_choice", "invalid_value"),
    ("tool_choice.type", {"tool_choice": {"type": "image_generation"}}, "tool_choice.type", "invalid_value"),
    (
        "tool_choice.name",
        {"tools": [FN], "tool_choice": {"type": "function"}},
        "tool_choice.name",
        "missing_required_parameter",
    ),
    (
        "tool_choice.mode",
        {"tools": [FN], "tool_choice": {"type": "allowed_tools", "mode": "maybe", "tools": [FN]}},
        "tool_choice.mode",
        "invalid_value",
    ),
    ("service_tier", {"service_tier": "gold"}, "service_tier", "invalid_value"),
    (
        "prompt_cache_retention",
        {"prompt_cache_retention": "forever"},
        "prompt_cache_retention",
        "invalid_value",
    ),
    (
        "stream_options",
        {"stream_options": {"include_obfuscation": "yes"}},
        "stream_options.include_obfuscation",
        "invalid_type",
    ),
    (
        "memory_limit",
        {"tools": [{"type": "code_interpreter", "container": {"type": "auto", "memory_limit": "2g"}}]},
        "tools[0].container.memory_limit",
        "invalid_value",
    ),
    (
        "context_management",
        {"context_management": [{"type": "summarize", "compact_threshold": 5}]},
        "context_management[0].type",
        "invalid_value",
    ),
    ("include", {"include": ["bogus"]}, "include[0]", "unsupported_value"),
    ("stream type", {"stream": "yes"}, "stream", "invalid_type"),
    ("max_output_tokens type", {"max_output_tokens": "5"}, "max_output_tokens", "invalid_type"),
    ("max_output_tokens decimal", {"max_output_tokens": 5.5}, "max_output_tokens", "invalid_type"),
    ("temperature type", {"temperature": "hot"}, "temperature", "invalid_type"),
    ("metadata value", {"metadata": {"k": 1}}, "metadata.k", "invalid_type"),
    ("input type", {"input": 5}, "input", "invalid_type"),
    ("input item type", {"input": [5]}, "input[0].type", "unsupported_value"),
    (
        "message content",
        {"input": [{"type": "message", "role": "user"}]},
        "input[0].content",
        "missing_required_parameter",
    ),
    ("model type", {"model": 5}, "model", "invalid_type"),
    # What OpenAI checks that we once let through with any value (now honoured, checked, or refused).
    ("max_output_tokens below 16", {"max_output_tokens": 15}, "max_output_tokens", "integer_below_min_value"),
    ("temperature above 2", {"temperature": 2.5}, "temperature", "decimal_above_max_value"),
    ("malformed conversation id", {"conversation": "abc"}, "conversation", "invalid_value"),
    (
        "moderation",
        {"moderation": {"model": "omni-moderation-latest"}},
        "moderation",
        "unsupported_parameter",
    ),
    (
        "access program",
        {"access_programs": {"cyber": "daybreak_red"}},
        "access_programs.cyber",
        "invalid_value",
    ),
    (
        "a 2h window without background",
        {"background_options": {"completion_window": "2h"}},
        "background_options.completion_window",
        "invalid_value",
    ),
    (
        "prompt cache ttl",
        {"prompt_cache_options": {"ttl": "1d"}},
        "prompt_cache_options.ttl",
        "invalid_value",
    ),
    (
        "network allow-list",
        {
            "tools": [
                {
                    "type": "code_interpreter",
                    "container": {
                        "type": "auto",
                        "network_policy": {"type": "allowlist", "allowed_domains": ["x.io"]},
                    },
                }
            ]
        },
        "tools[0].container.network_policy.type",
        "invalid_value",
    ),
]


@pytest.mark.parametrize("name,fields,param,code", BAD, ids=[b[0] for b in BAD])
def test_bad_bodies_are_400_naming_the_param(
    fake_server: LiveServer, engine: FakeEngine, name: str, fields: dict[str, Any], param: str, code: str
) -> None:
    body = {"model": MODEL, "input": "hi", **fields}
    r = httpx.post(fake_server.base_url + "/v1/responses", json=body, timeout=10)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert (err["type"], err["param"], err["code"]) == ("invalid_request_error", param, code), err
    assert param in err["message"] or param.startswith("input[") or code == "unsupported_value", err
    assert engine.requests == []


def test_enum_errors_say_what_is_supported(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input=[{"role": "user", "content": "hi", "status": "done"}])  # type: ignore[list-item]
    assert err.value.body["message"] == (  # type: ignore[index]
        "Invalid value for 'input[0].status': 'done'. Supported values are: 'in_progress', 'completed' or "
        "'incomplete'."
    )
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(
            model=MODEL,
            input=[{"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}],  # type: ignore[list-item]
        )
    assert err.value.body["message"].startswith(  # type: ignore[index]
        "Invalid value: 'input_text'. Supported values are: 'output_text', 'refusal'"
    )


def test_what_clients_send_back_is_accepted(client: openai.OpenAI, engine: FakeEngine) -> None:
    """The tightened checks keep every shape a response's own output takes when sent back as input."""
    engine.reset(function_call("f", {}), say("Done."))
    first = client.responses.create(
        model=MODEL, input="go", tools=[FN], include=["reasoning.encrypted_content"]
    )  # type: ignore[list-item]
    again = [item.model_dump(mode="json", exclude_none=True) for item in first.output]
    call_id = first.output[0].call_id  # type: ignore[union-attr]
    body: list[Any] = [
        {"role": "system", "content": [{"type": "input_text", "text": "Be brief."}]},
        {"role": "user", "content": "go", "status": "completed"},
        *again,
        {
            "type": "function_call_output",
            "call_id": call_id,
            "output": [{"type": "input_text", "text": "ok"}],
        },
        {
            "role": "assistant",
            "content": [{"type": "output_text", "text": "a"}, {"type": "refusal", "refusal": "b"}],
        },
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "s"}],
            "content": [text("reasoning_text")],
        },
        {
            "type": "code_interpreter_call",
            "id": "ci_1",
            "code": "1",
            "status": "completed",
            "outputs": [{"type": "logs", "logs": "1"}, {"type": "image", "url": "data:,"}],
        },
    ]
    second = client.responses.create(
        model=MODEL,
        input=body,
        tools=[FN],
        reasoning={"effort": "low", "summary": "auto"},
        service_tier="auto",  # type: ignore[arg-type]
    )
    assert second.status == "completed"


# --- function call outputs must answer a call -----------------------------------------------------------


def _output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "sunny"}


def test_an_output_for_no_call_is_400_as_openai_words_it(client: openai.OpenAI, engine: FakeEngine) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input=[{"role": "user", "content": "hi"}, _output("call_nope")])  # type: ignore[list-item]
    body = err.value.body
    assert body["param"] == "input" and body["code"] == "invalid_value"  # type: ignore[index]
    assert body["message"].startswith("No tool call found for function call output with call_id call_nope")  # type: ignore[index]
    assert "input[1]" in body["message"]  # type: ignore[index]
    assert engine.requests == []


def test_an_output_finds_its_call_in_the_input_or_the_history(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    call = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
    inline = client.responses.create(model=MODEL, input=[call, _output("call_1")], tools=[FN])  # type: ignore[list-item]
    assert inline.status == "completed"
    engine.reset(function_call("f", {}), say("Sunny."))
    first = client.responses.create(model=MODEL, input="weather?", tools=[FN])  # type: ignore[list-item]
    call_id = first.output[0].call_id  # type: ignore[union-attr]
    chained = client.responses.create(
        model=MODEL, previous_response_id=first.id, input=[_output(call_id)], tools=[FN]
    )  # type: ignore[list-item]
    assert chained.output_text == "Sunny."
    with pytest.raises(openai.BadRequestError) as err:  # the history holds call_id, not this one
        client.responses.create(model=MODEL, previous_response_id=first.id, input=[_output("call_other")])  # type: ignore[list-item]
    assert err.value.body["param"] == "input"  # type: ignore[index]
    # by reference: the stored call is brought in, so its output may follow
    engine.reset(function_call("f", {}), say("Sunny."))
    stored = client.responses.create(model=MODEL, input="weather?", tools=[FN])  # type: ignore[list-item]
    ref = {"type": "item_reference", "id": stored.output[0].id}
    by_ref = client.responses.create(model=MODEL, input=[ref, _output(stored.output[0].call_id)], tools=[FN])  # type: ignore[union-attr,list-item]
    assert by_ref.status == "completed"


def test_an_output_finds_its_call_in_the_conversation(client: openai.OpenAI, engine: FakeEngine) -> None:
    conv = client.conversations.create()
    engine.reset(function_call("f", {}), say("Sunny."))
    first = client.responses.create(model=MODEL, conversation=conv.id, input="weather?", tools=[FN])  # type: ignore[list-item]
    call_id = first.output[0].call_id  # type: ignore[union-attr]
    ok = client.responses.create(model=MODEL, conversation=conv.id, input=[_output(call_id)], tools=[FN])  # type: ignore[list-item]
    assert ok.output_text == "Sunny."
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, conversation=conv.id, input=[_output("call_elsewhere")])  # type: ignore[list-item]


def test_input_tokens_and_compact_check_outputs_too(fake_server: LiveServer) -> None:
    for path in ("/v1/responses/input_tokens", "/v1/responses/compact"):
        r = httpx.post(
            fake_server.base_url + path, json={"model": MODEL, "input": [_output("call_nope")]}, timeout=10
        )
        assert r.status_code == 400 and r.json()["error"]["param"] == "input", (path, r.text)


def test_the_options_we_honour_or_that_change_nothing_here_are_accepted(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    """`access_programs: standard`, a `soonest` or (background) `8h` window, `prompt_cache_options`, a disabled
    network, `image` options, and `max_output_tokens` of 16: accepted (docs/api.md says what each does)."""
    engine.reset(say("ok"))
    no_network = {
        "type": "code_interpreter",
        "container": {"type": "auto", "network_policy": {"type": "disabled"}},
    }
    r = client.responses.create(
        model=MODEL,
        input="hi",
        max_output_tokens=16,
        tools=[no_network],  # type: ignore[list-item]
        extra_body={
            "access_programs": {"cyber": "standard"},
            "background_options": {"completion_window": "soonest"},
            "prompt_cache_options": {"mode": "explicit", "ttl": "12h"},
            "image": {"context_compression": "auto"},
        },
    )
    assert r.status == "completed" and r.max_output_tokens == 16
    assert r.tools[0].container.network_policy.type == "disabled"  # type: ignore[union-attr]
    bg = client.responses.create(
        model=MODEL,
        input="hi",
        background=True,
        extra_body={"background_options": {"completion_window": "8h"}},
    )
    assert bg.status in ("queued", "in_progress", "completed")


def test_compact_needs_something_to_compact(fake_server: LiveServer) -> None:
    r = httpx.post(fake_server.base_url + "/v1/responses/compact", json={"model": MODEL}, timeout=10)
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "input" and r.json()["error"]["code"] == "missing_required_parameter"
