"""The request model's rules: include values (create and retrieve alike), the accepted item and tool types."""

from __future__ import annotations

import httpx
import pytest

from tests.support.serving import LiveServer
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.inputs import INPUT_ITEM_TYPES, TOOL_TYPES
from vllm_responses.protocol.requests import SUPPORTED_INCLUDES, check_includes, parse_create_request

MODEL = "fake-model"


def test_check_includes_names_the_first_refused_value() -> None:
    check_includes(SUPPORTED_INCLUDES)
    check_includes([])
    with pytest.raises(InvalidRequest) as known:
        check_includes(["code_interpreter_call.outputs", "computer_call_output.output.image_url"])
    assert known.value.param == "include[1]" and known.value.code == "unsupported_value"
    assert (
        "'computer_call_output.output.image_url' is an include value this server does not"
        in known.value.message
    )
    with pytest.raises(InvalidRequest) as unknown:
        check_includes(["nonsense"])
    assert unknown.value.param == "include[0]" and "'nonsense' is unknown" in unknown.value.message


def test_create_refuses_include_values_with_the_same_check() -> None:
    body = {"model": MODEL, "input": "hi", "include": ["reasoning.encrypted_content", "nonsense"]}
    with pytest.raises(InvalidRequest) as created:
        parse_create_request(body)
    with pytest.raises(InvalidRequest) as checked:
        check_includes(body["include"])
    assert created.value.body() == checked.value.body()


def test_create_and_retrieve_refuse_an_include_value_alike(fake_server: LiveServer) -> None:
    base = fake_server.base_url + "/v1/responses"
    include = ["code_interpreter_call.outputs", "computer_call_output.output.image_url"]
    created = httpx.post(base, json={"model": MODEL, "input": "hi", "include": include}, timeout=10)
    rid = httpx.post(base, json={"model": MODEL, "input": "hi"}, timeout=10).json()["id"]
    retrieved = httpx.get(f"{base}/{rid}", params={"include[]": include}, timeout=10)
    assert created.status_code == retrieved.status_code == 400
    assert created.json() == retrieved.json()
    assert created.json()["error"]["param"] == "include[1]"


@pytest.mark.parametrize("kind", INPUT_ITEM_TYPES)
def test_every_input_item_type_reaches_its_model(kind: str) -> None:
    # Each accepted type passes the up-front type check and is validated by its own model: a missing field
    # is named plainly (`input[0].call_id`), without the union-branch label pydantic puts in the location.
    try:
        parse_create_request({"model": MODEL, "input": [{"type": kind}]})
    except InvalidRequest as exc:
        assert exc.param is not None and exc.param.startswith("input[0].") and exc.param != "input[0].type"
        assert kind not in exc.param.split(".")


@pytest.mark.parametrize("kind", TOOL_TYPES)
def test_every_tool_type_reaches_its_model(kind: str) -> None:
    try:
        parse_create_request({"model": MODEL, "input": "hi", "tools": [{"type": kind}]})
    except InvalidRequest as exc:
        assert exc.param is not None and exc.param.startswith("tools[0].") and exc.param != "tools[0].type"
        assert kind not in exc.param.split(".")


def test_an_unsupported_item_type_lists_the_supported_ones() -> None:
    with pytest.raises(InvalidRequest) as item:
        parse_create_request({"model": MODEL, "input": [{"type": "image_generation_call"}]})
    assert item.value.param == "input[0].type"
    assert all(kind in item.value.message for kind in INPUT_ITEM_TYPES)
    with pytest.raises(InvalidRequest) as tool:
        parse_create_request({"model": MODEL, "input": "hi", "tools": [{"type": "image_generation"}]})
    assert tool.value.param == "tools[0].type"
    assert all(repr(kind) in tool.value.message for kind in TOOL_TYPES)


def test_every_field_the_sdk_sends_is_known() -> None:
    """`SDK_CREATE_FIELDS` is the installed SDK's `ResponseCreateParams` (a newer SDK adds fields: add them)."""
    import typing

    from openai.types.responses import response_create_params as sdk

    from vllm_responses.protocol.fields import SDK_CREATE_FIELDS

    assert SDK_CREATE_FIELDS == set(typing.get_type_hints(sdk.ResponseCreateParamsStreaming))
