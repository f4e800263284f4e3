"""The response echoes the settings in effect; vLLM's sampling extensions reach the engine; unknown fields,
`allowed_tools` and `truncation` through the `openai` SDK, over the scripted engine."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine, code_call, function_call, say
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, validate_response
from vllm_responses.context.truncation import ELIDED
from vllm_responses.engine.types import Message, Sampling, ToolCall, ToolResult

MODEL = "fake-model"
CI = [{"type": "code_interpreter", "container": {"type": "auto"}}]


def fn(name: str, **extra: Any) -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}, **extra}


def post(server: LiveServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.base_url + "/v1/responses", json={"model": MODEL, **body}, timeout=30)


def error_of(err: pytest.ExceptionInfo[openai.BadRequestError]) -> dict[str, Any]:
    body = err.value.body
    assert isinstance(body, dict)
    return body


# --- echoes ---------------------------------------------------------------------------------------------


def test_unset_sampling_echoes_vllm_defaults(fake_server: LiveServer, engine: FakeEngine) -> None:
    body = post(fake_server, {"input": "hi"}).json()
    validate_response(body)
    assert (body["temperature"], body["top_p"]) == (1.0, 1.0)
    assert (body["presence_penalty"], body["frequency_penalty"], body["store"]) == (0.0, 0.0, True)
    assert (body["truncation"], body["tool_choice"], body["parallel_tool_calls"]) == (
        "disabled",
        "auto",
        True,
    )
    assert engine.requests[0].sampling.temperature is None  # the engine applies its own defaults


def test_unset_sampling_echoes_the_models_generation_config(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    engine.sampling_defaults = {"temperature": 0.6, "top_p": 0.95, "repetition_penalty": 1.1}
    body = post(fake_server, {"input": "hi", "temperature": 0.2}).json()
    assert (body["temperature"], body["top_p"], body["presence_penalty"]) == (0.2, 0.95, 0.0)
    engine.sampling_defaults = {"presence_penalty": 0.5}
    assert post(fake_server, {"input": "hi"}).json()["presence_penalty"] == 0.5


def test_sent_values_are_echoed_in_every_response_snapshot(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    sent = {
        "temperature": 0.3,
        "top_p": 0.5,
        "presence_penalty": 0.5,
        "frequency_penalty": -1.5,
        "store": False,
        "truncation": "auto",
        "parallel_tool_calls": False,
        "tools": [fn("f", strict=True, description="F.")],
        "tool_choice": {"type": "function", "name": "f"},
    }
    engine.reset(function_call("f", {}))
    events = parse_sse(post(fake_server, {"input": "hi", "stream": True, **sent}).text)
    check_stream(events)
    for event in events:
        if "response" in event:
            echoed = {k: event["response"][k] for k in sent}
            assert echoed == {**sent, "tools": [fn("f", strict=True, description="F.")]}, event["type"]
    request = engine.requests[0]
    assert (request.sampling.presence_penalty, request.sampling.frequency_penalty) == (0.5, -1.5)


def test_the_sdk_reads_the_echo(client: openai.OpenAI, engine: FakeEngine) -> None:
    r = client.responses.create(model=MODEL, input="hi", temperature=0.4, store=False)
    assert r.temperature == 0.4 and r.top_p == 1.0
    assert r.model_extra == {"store": False, "presence_penalty": 0.0, "frequency_penalty": 0.0}


def test_effort_reaches_every_model_call_and_the_echo_says_which_summary_is_made(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    r = client.responses.create(model=MODEL, input="hi", reasoning={"effort": "low", "summary": "auto"})
    assert r.reasoning is not None and (r.reasoning.effort, r.reasoning.summary) == ("low", "auto")
    assert [q.reasoning_effort for q in engine.requests] == ["low"]
    client.responses.create(model=MODEL, input="hi")
    assert engine.requests[-1].reasoning_effort is None
    r = client.responses.create(model=MODEL, input="hi", reasoning={"generate_summary": "concise"})
    assert (
        r.reasoning is not None and r.reasoning.summary == "concise"
    )  # the deprecated name, read as `summary`


# --- vLLM's sampling extensions -------------------------------------------------------------------------


def test_vllm_sampling_extensions_reach_the_engine(client: openai.OpenAI, engine: FakeEngine) -> None:
    extensions = {
        "top_k": 5,
        "min_p": 0.1,
        "repetition_penalty": 1.2,
        "seed": 42,
        "stop": "END",
        "stop_token_ids": [7, 8],
        "ignore_eos": True,
        "min_tokens": 3,
        "logit_bias": {"2": -100},
        "include_stop_str_in_output": True,
        "skip_special_tokens": False,
    }
    engine.reset(code_call("print(1)"), say("done"))
    client.responses.create(model=MODEL, input="hi", tools=CI, extra_body=extensions)  # type: ignore[arg-type]
    want = Sampling(
        top_k=5,
        min_p=0.1,
        repetition_penalty=1.2,
        seed=42,
        stop=("END",),
        stop_token_ids=(7, 8),
        ignore_eos=True,
        min_tokens=3,
        logit_bias={2: -100.0},
        include_stop_str_in_output=True,
        skip_special_tokens=False,
    )
    assert len(engine.requests) == 2  # every model call of the loop samples alike
    for request in engine.requests:
        assert request.sampling.__dict__ | {"max_tokens": None, "structured": None} == want.__dict__
    client.responses.create(model=MODEL, input="hi", extra_body={"stop": ["a", "b"]})
    assert engine.requests[-1].sampling.stop == ("a", "b")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("presence_penalty", 2.5),
        ("frequency_penalty", -3),
        ("top_k", -2),
        ("min_p", 1.5),
        ("repetition_penalty", 0),
        ("seed", 2**64),
        ("stop", 5),
        ("min_tokens", -1),
        ("ignore_eos", "maybe"),
        ("logit_bias", {"x": 1}),
    ],
)
def test_bad_sampling_values_are_400_naming_the_field(
    client: openai.OpenAI, engine: FakeEngine, field: str, value: Any
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="hi", extra_body={field: value})
    assert error_of(err)["param"].startswith(field)
    assert engine.requests == []


def test_unknown_field_is_400_named_streamed_or_not(fake_server: LiveServer, engine: FakeEngine) -> None:
    for stream in (False, True):
        r = post(fake_server, {"input": "hi", "stream": stream, "top_n": 3})
        assert r.status_code == 400
        assert r.json()["error"] | {"message": ""} == {
            "type": "invalid_request_error",
            "param": "top_n",
            "code": "unknown_parameter",
            "message": "",
        }
    assert engine.requests == []


# --- allowed_tools --------------------------------------------------------------------------------------


def test_allowed_tools_offers_only_those_and_is_echoed_as_sent(
    client: openai.OpenAI, fake_server: LiveServer, engine: FakeEngine
) -> None:
    choice = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "b"}]}
    r = client.responses.create(
        model=MODEL,
        input="hi",
        tools=[*CI, fn("a"), fn("b")],  # type: ignore[list-item]
        tool_choice=choice,  # type: ignore[arg-type]
    )
    request = engine.requests[0]
    assert [t.name for t in request.tools] == ["b"] and request.tool_choice == "auto"
    assert r.tool_choice.model_dump() == choice
    body = post(fake_server, {"input": "hi", "tools": [fn("a"), fn("b")], "tool_choice": choice}).json()
    assert body["tool_choice"] == choice
    validate_response(body)


def test_allowed_tools_required_forces_the_first_call_only(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(code_call("print(1)"), say("done"))
    choice = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "code_interpreter"}]}
    r = client.responses.create(
        model=MODEL,
        input="hi",
        tools=[*CI, fn("a")],  # type: ignore[list-item]
        tool_choice=choice,  # type: ignore[arg-type]
    )
    assert r.status == "completed" and [it.type for it in r.output] == ["code_interpreter_call", "message"]
    first, second = engine.requests
    assert [t.name for t in first.tools] == ["python"] and first.tool_choice == "required"
    assert [t.name for t in second.tools] == ["python"] and second.tool_choice == "auto"


@pytest.mark.parametrize(
    ("tools", "param"),
    [
        ([{"type": "function", "name": "a"}, {"type": "function", "name": "zzz"}], "tool_choice.tools[1]"),
        ([{"type": "code_interpreter"}], "tool_choice.tools[0]"),
        ([{"type": "web_search"}], "tool_choice.tools[0]"),
        ([], "tool_choice.tools"),
    ],
)
def test_allowed_tools_must_name_given_tools(
    client: openai.OpenAI, engine: FakeEngine, tools: list[dict[str, Any]], param: str
) -> None:
    choice = {"type": "allowed_tools", "mode": "auto", "tools": tools}
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="hi", tools=[fn("a")], tool_choice=choice)  # type: ignore[list-item, arg-type]
    assert error_of(err)["param"] == param
    assert engine.requests == []


# --- truncation -----------------------------------------------------------------------------------------


def history(n: int) -> list[dict[str, Any]]:
    """`n` rounds of a long user message, a function call, its output and an answer; then a last question."""
    items: list[dict[str, Any]] = []
    for i in range(n):
        items += [
            {"role": "user", "content": f"question {i} " + "x" * 200},
            {"type": "function_call", "call_id": f"c{i}", "name": "a", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": "y" * 200},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    return [*items, {"role": "user", "content": "the last question"}]


def test_truncation_auto_drops_the_oldest_turns_to_fit(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.context = 400  # the fake counts characters // 4: the whole history is about 1000 tokens
    r = client.responses.create(
        model=MODEL,
        input=history(8),  # type: ignore[arg-type]
        instructions="Be brief.",
        tools=[fn("a")],  # type: ignore[list-item]
        truncation="auto",
        max_output_tokens=50,
    )
    assert r.status == "completed" and r.truncation == "auto"
    turns = engine.requests[0].turns
    assert turns[0] == Message("system", "Be brief.") and turns[-1] == Message("user", "the last question")
    assert FakeEngine.prompt_tokens(engine.requests[0]) <= 400 - 50
    assert 2 < len(turns) < 1 + 8 * 4 + 1  # some dropped, not all
    ids = [t.call_id for t in turns if isinstance(t, (ToolCall, ToolResult))]
    assert all(ids.count(i) == 2 for i in ids)  # no call without its output
    # The kept ones are the newest, and nothing is kept that the next round would need dropped first.
    kept = [t.text for t in turns if isinstance(t, Message) and t.text.startswith("question")]
    assert kept == [f"question {i} " + "x" * 200 for i in range(8 - len(kept), 8)]


def test_truncation_disabled_keeps_the_400(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.context = 400
    for truncation in ("disabled", None):
        extra = {"truncation": truncation} if truncation else {}
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model=MODEL, input=history(8), **extra)  # type: ignore[arg-type]
        assert error_of(err)["code"] == "context_length_exceeded"


def test_truncation_auto_never_drops_the_last_user_message(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.context = 30
    with pytest.raises(openai.BadRequestError) as err:  # the last message alone is too long: nothing to drop
        client.responses.create(
            model=MODEL,
            input=[{"role": "user", "content": "a"}, {"role": "user", "content": "z" * 400}],
            truncation="auto",
        )
    assert error_of(err)["code"] == "context_length_exceeded"
    assert engine.prechecked[0].turns == (Message("user", "z" * 400),)  # refused before the model ran


def test_input_tokens_count_the_truncated_prompt(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.context = 400
    full = client.responses.input_tokens.count(model=MODEL, input=history(8))  # type: ignore[arg-type]
    cut = client.responses.input_tokens.count(model=MODEL, input=history(8), truncation="auto")  # type: ignore[arg-type]
    assert cut.input_tokens <= 400 - 400 // 8 < full.input_tokens


def test_truncation_auto_fits_every_call_of_a_long_tool_loop(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    """Inside one tool loop (after the last user message, where nothing is dropped) the oldest tool outputs
    are left out, each replaced by a note, until the call fits; the latest output is always kept. Without
    `truncation: "auto"` the same loop runs out of context."""
    big = "print('x' * 600)"
    loop = [code_call(big), code_call(big), code_call(big), code_call(big), say("done")]
    engine.reset(*loop)
    engine.context = 450  # each code output (600 characters of logs) is about 150 tokens
    r = client.responses.create(model=MODEL, input="go", tools=CI, truncation="auto", max_output_tokens=100)
    assert r.status == "completed" and r.output_text == "done"
    last = engine.requests[-1]
    outputs = [t.output for t in last.turns if isinstance(t, ToolResult)]
    assert outputs[-1] != ELIDED and ELIDED in outputs  # the oldest left out, the latest kept
    for req in engine.requests:  # each call leaves room for what is left of the output budget
        assert FakeEngine.prompt_tokens(req) + (req.sampling.max_tokens or 0) <= 450, req.sampling.max_tokens
    engine.reset(*loop)
    engine.context = 450
    failed = client.responses.create(model=MODEL, input="go", tools=CI, max_output_tokens=100)
    assert failed.status == "failed" or failed.status == "incomplete"
