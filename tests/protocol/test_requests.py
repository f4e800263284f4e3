"""The request model's rules, checked without a server: include values (one check for create and retrieve)."""

from __future__ import annotations

import httpx
import pytest

from tests.serving import LiveServer
from vllm_responses.errors import InvalidRequest
from vllm_responses.protocol.requests import SUPPORTED_INCLUDES, check_includes, parse_create_request

MODEL = "fake-model"


def test_check_includes_names_the_first_refused_value() -> None:
    check_includes(SUPPORTED_INCLUDES)
    check_includes([])
    with pytest.raises(InvalidRequest) as known:
        check_includes(["code_interpreter_call.outputs", "message.output_text.logprobs"])
    assert known.value.param == "include[1]" and known.value.code == "unsupported_value"
    assert "'message.output_text.logprobs' is an include value this server does not support" in known.value.message
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
    include = ["code_interpreter_call.outputs", "file_search_call.results"]
    created = httpx.post(base, json={"model": MODEL, "input": "hi", "include": include}, timeout=10)
    rid = httpx.post(base, json={"model": MODEL, "input": "hi"}, timeout=10).json()["id"]
    retrieved = httpx.get(f"{base}/{rid}", params={"include[]": include}, timeout=10)
    assert created.status_code == retrieved.status_code == 400
    assert created.json() == retrieved.json()
    assert created.json()["error"]["param"] == "include[1]"
