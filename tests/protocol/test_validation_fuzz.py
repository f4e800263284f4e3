"""Random bodies never get a 5xx: the request model raises only `InvalidRequest`, the live server answers 4xx."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.serving import LiveServer
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.requests import parse_create_request

MODEL = "fake-model"


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["message", "user", "assistant", "input_text", "output_text", "function_call", "auto"]),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_FIELDS = [
    "input",
    "tools",
    "tool_choice",
    "text",
    "reasoning",
    "include",
    "metadata",
    "truncation",
    "stream",
    "max_output_tokens",
    "temperature",
    "previous_response_id",
    "conversation",
    "context_management",
    "structured_outputs",
    "stop",
    "logit_bias",
    "instructions",
    "service_tier",
    "top_logprobs",
]
_ITEM_KEYS = [
    "type",
    "role",
    "content",
    "status",
    "call_id",
    "output",
    "id",
    "name",
    "arguments",
    "summary",
    "outputs",
    "code",
    "encrypted_content",
    "text",
    "phase",
]
_item = st.dictionaries(st.sampled_from(_ITEM_KEYS), _json, max_size=5)
# Bodies that look like creates: the right field names, random (often nearly right) values.
_bodies = st.fixed_dictionaries(
    {"model": st.sampled_from([MODEL, MODEL, 5, None])},
    optional={
        "input": st.one_of(st.text(max_size=8), st.lists(_item, max_size=3), _json),
        **{name: _json for name in _FIELDS if name != "input"},
    },
)


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(body=st.one_of(_bodies, _json))
def test_the_request_model_raises_only_invalid_request(body: Any) -> None:
    try:
        parse_create_request(body)
    except InvalidRequest as exc:
        assert 400 <= exc.status < 500 and exc.message
        json.dumps(exc.body()).encode()  # an answerable body


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(_bodies, _json))
def test_random_bodies_never_get_a_5xx(fake_server: LiveServer, body: Any) -> None:
    for path in ("/v1/responses", "/v1/responses/input_tokens"):
        r = httpx.post(fake_server.base_url + path, json=body, timeout=30)
        assert r.status_code < 500, (path, body, r.text)
        if r.status_code >= 400:
            err = r.json()["error"]
            assert err["type"] == "invalid_request_error" and err["message"], err
