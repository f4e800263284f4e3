"""Open Responses (`openresponses-types`, the spec's own pydantic models): our responses and stream events validate
against it wherever the two specs agree, and every place they differ is listed here (and in docs/clients.md).

The differences are asserted exactly, both ways: a gap that closes, or a new one, fails the test and names it.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

import httpx
import openresponses_types as ort
import pydantic
import pytest
from openai.types.responses import ResponseStreamEvent

from tests.support.real import TINY as MODEL
from tests.support.real import exactly, hermes_call
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]

CI = [{"type": "code_interpreter", "container": {"type": "auto"}}]

# Fields we send that Open Responses does not declare (the openai types do).
UNKNOWN_TO_OPEN_RESPONSES = {"user", "usage.input_tokens_details.cache_write_tokens"}
# Stream events we send that Open Responses has no type for: it has no hosted tools.
CODE_EVENTS = {
    "response.code_interpreter_call.in_progress",
    "response.code_interpreter_call_code.delta",
    "response.code_interpreter_call_code.done",
    "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call.completed",
}


def _literals(annotation: Any) -> list[str]:
    if inspect.isclass(annotation) and issubclass(annotation, str):  # a StrEnum
        return [m.value for m in annotation]  # type: ignore[attr-defined]
    return [a for a in typing.get_args(annotation) if isinstance(a, str)]


def _event_types(models: list[type[pydantic.BaseModel]]) -> dict[str, type[pydantic.BaseModel]]:
    return {t: m for m in models for t in _literals(m.model_fields["type"].annotation)}


OR_EVENTS = _event_types(
    [
        c
        for n, c in inspect.getmembers(ort, inspect.isclass)
        if n.endswith("StreamingEvent") and issubclass(c, pydantic.BaseModel)
    ]
)
OPENAI_EVENTS = _event_types(list(typing.get_args(typing.get_args(ResponseStreamEvent)[0])))


def unknown_fields(model: Any, data: Any, path: str = "") -> set[str]:
    """Fields in `data` that the parsed Open Responses model does not declare (its models ignore extras)."""
    if isinstance(model, pydantic.RootModel):
        return unknown_fields(model.root, data, path)
    found: set[str] = set()
    if isinstance(model, pydantic.BaseModel) and isinstance(data, dict):
        fields = type(model).model_fields
        for key, value in data.items():
            found |= (
                {path + key}
                if key not in fields
                else unknown_fields(getattr(model, key), value, f"{path}{key}.")
            )
    elif isinstance(model, list) and isinstance(data, list):
        for m, d in zip(model, data, strict=True):
            found |= unknown_fields(m, d, path)
    return found


def errors(model: type[pydantic.BaseModel], data: dict[str, Any]) -> set[tuple[str, str]]:
    try:
        model.model_validate(data)
    except pydantic.ValidationError as exc:
        return {(".".join(map(str, e["loc"])), e["type"]) for e in exc.errors()}
    return set()


def agreed(response: dict[str, Any]) -> dict[str, Any]:
    """The part of a response both specs describe: hosted-tool items and tools left out."""
    return {
        **response,
        "output": [it for it in response["output"] if it["type"] != "code_interpreter_call"],
        "tools": [t for t in response["tools"] if t["type"] == "function"],
    }


def post(server: LiveServer, body: dict[str, Any]) -> httpx.Response:
    r = httpx.post(server.base_url + "/v1/responses", json={"model": MODEL, **body}, timeout=300)
    assert r.status_code == 200, r.text
    return r


def test_event_names_the_two_specs_share_and_do_not() -> None:
    # Open Responses names the reasoning-text events differently; everything else it has, openai has too.
    assert set(OR_EVENTS) - set(OPENAI_EVENTS) == {"response.reasoning.delta", "response.reasoning.done"}
    assert CODE_EVENTS <= set(OPENAI_EVENTS) - set(OR_EVENTS)


def test_text_response_validates_as_is(real_server: LiveServer) -> None:
    body = post(real_server, {"input": "Hi.", "structured_outputs": exactly("Hello.")}).json()
    # Nothing stands between our response and Open Responses' ResponseResource: every field it requires is
    # sent (temperature and top_p with the values in effect, store and the penalties beyond the openai types).
    assert errors(ort.ResponseResource, body) == set()
    assert (body["temperature"], body["top_p"], body["presence_penalty"], body["store"]) == (
        1.0,
        1.0,
        0.0,
        True,
    )
    parsed = ort.ResponseResource.model_validate(body)
    assert unknown_fields(parsed, body) == UNKNOWN_TO_OPEN_RESPONSES
    message = ort.Message.model_validate(body["output"][0])
    assert message.content[0].text == "Hello." and unknown_fields(message, body["output"][0]) == set()  # type: ignore[union-attr]


def test_function_call_items_and_tool_echo_agree(real_server: LiveServer) -> None:
    tool = {
        "type": "function",
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
    }
    call = '<tool_call>\n{"name": "lookup", "arguments": {"key": "a"}}\n</tool_call>'
    bare = post(
        real_server, {"input": "Look a up.", "tools": [tool], "structured_outputs": exactly(call)}
    ).json()
    item = ort.FunctionCall.model_validate(bare["output"][0])
    assert item.name == "lookup" and unknown_fields(item, bare["output"][0]) == set()
    # A tool sent without description and strict is echoed with both null, as OpenAI does and Open Responses wants.
    assert errors(ort.ResponseResource, bare) == set()
    assert bare["tools"][0]["description"] is None and bare["tools"][0]["strict"] is None
    full = {**tool, "description": "Look a key up.", "strict": False}
    sent = post(
        real_server, {"input": "Look a up.", "tools": [full], "structured_outputs": exactly(call)}
    ).json()
    assert errors(ort.ResponseResource, sent) == set()
    # `allowed_tools` is echoed as sent, which both specs describe alike.
    choice = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "lookup"}]}
    allowed = post(real_server, {"input": "Look a up.", "tools": [full], "tool_choice": choice}).json()
    assert allowed["tool_choice"] == choice and allowed["output"][0]["name"] == "lookup"
    assert errors(ort.ResponseResource, allowed) == set()


def test_stream_events_validate_except_the_code_interpreter_ones(real_server: LiveServer) -> None:
    code = "print(2 ** 10)"
    events = parse_sse(
        post(
            real_server,
            {
                "input": "Power.",
                "tools": CI,
                "include": ["code_interpreter_call.outputs"],
                "stream": True,
                "structured_outputs": [exactly(hermes_call(code)), exactly("1024.")],
            },
        ).text
    )
    check_stream(events)
    assert {e["type"] for e in events} - set(OR_EVENTS) == CODE_EVENTS
    checked = 0
    for event in events:
        model = OR_EVENTS.get(event["type"])
        if model is None or event.get("item", {}).get("type") == "code_interpreter_call":
            continue  # no Open Responses type for these: hosted tools are outside the spec
        data = {**event, "response": agreed(event["response"])} if "response" in event else event
        parsed = model.model_validate(data)
        assert {
            f.removeprefix("response.") for f in unknown_fields(parsed, data)
        } <= UNKNOWN_TO_OPEN_RESPONSES, event
        checked += 1
    assert (
        checked == len(events) - len([e for e in events if e["type"] in CODE_EVENTS]) - 2
    )  # the code item's added/done


def test_compact_of_a_short_window_validates_with_its_compaction_item(real_server: LiveServer) -> None:
    """The suite's compaction check: a short conversation compacts to the window the next request sends, as
    OpenAI shapes it: the user message kept, then one compaction item, last (the assistant's reply in it)."""
    body = {
        "model": MODEL,
        "input": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}],
    }
    r = httpx.post(real_server.base_url + "/v1/responses/compact", json=body, timeout=60)
    assert r.status_code == 200, r.text
    got = ort.CompactResource.model_validate(r.json())
    assert [item.type for item in got.output] == ["message", "compaction"]  # type: ignore[union-attr]
    assert unknown_fields(got, r.json()) <= {"usage.input_tokens_details.cache_write_tokens"}
