"""Logprobs from vLLM (the tiny model, its text forced with `structured_outputs`) through the openai SDK on
a real server: tokens that spell the text, the part and the events in agreement, calls in the same response."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseOutputMessage as Message

from tests.support.real import TINY, exactly, tiny_model_server
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, validate_response

pytestmark = [pytest.mark.engine]

INCLUDE = ["message.output_text.logprobs"]
TEXT = "Café au lait, s'il vous plaît."  # two characters of two bytes: tokens that are parts of one
LOOKUP = {
    "type": "function",
    "name": "lookup",
    "description": "Looks a word up.",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
}


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    s = tiny_model_server(workers=0)  # (a code call between messages: tests/api/test_logprobs.py)
    yield s
    s.stop()


@pytest.fixture
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def check_logprobs(text: str, logprobs: list[dict[str, Any]], top: int) -> None:
    """Tokens that spell `text`; logprobs <= 0; `top` alternatives each, most likely first."""
    assert "".join(lp["token"] for lp in logprobs) == text
    for lp in logprobs:
        assert lp["logprob"] <= 0 and math.isfinite(lp["logprob"])
        if "bytes" in lp:
            assert bytes(lp["bytes"]) == lp["token"].encode()
        values = [t["logprob"] for t in lp["top_logprobs"]]
        assert len(values) == top and values == sorted(values, reverse=True)
        assert all(v <= 0 for v in values)


def test_tokens_spell_the_text_streamed_and_not_alike(server: LiveServer, client: openai.OpenAI) -> None:
    body = {
        "model": TINY,
        "input": "Order a drink.",
        "include": INCLUDE,
        "top_logprobs": 3,
        "structured_outputs": exactly(TEXT),
        "temperature": 0,
    }
    raw = httpx.post(server.base_url + "/v1/responses", json=body, timeout=300).json()
    validate_response(raw)
    (part,) = raw["output"][0]["content"]
    assert part["text"] == TEXT and len(part["logprobs"]) >= len(TEXT.encode()) // 4
    check_logprobs(TEXT, part["logprobs"], 3)
    assert raw["top_logprobs"] == 3

    events = parse_sse(
        httpx.post(server.base_url + "/v1/responses", json={**body, "stream": True}, timeout=300).text
    )
    check_stream(events)  # every event validated against the SDK's types, no unknown field
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    streamed = [lp for d in deltas for lp in d["logprobs"]]
    for d in deltas:  # each delta's tokens spell that delta
        assert "".join(lp["token"] for lp in d["logprobs"]) == d["delta"]
    check_logprobs(TEXT, streamed, 3)
    (done,) = [e for e in events if e["type"] == "response.output_text.done"]
    assert done["logprobs"] == streamed
    final = events[-1]["response"]["output"][0]["content"][0]["logprobs"]
    assert [lp["token"] for lp in final] == [lp["token"] for lp in streamed]
    assert [lp["logprob"] for lp in final] == [lp["logprob"] for lp in streamed]
    # the same forced text at temperature 0: the same tokens and figures as the non-streamed response
    assert [(lp["token"], lp["logprob"]) for lp in final] == [
        (lp["token"], lp["logprob"]) for lp in part["logprobs"]
    ]
    stored = httpx.get(server.base_url + f"/v1/responses/{events[-1]['response']['id']}", timeout=30).json()
    assert stored["output"][0]["content"][0]["logprobs"] == final


def test_the_sdk_reads_them(client: openai.OpenAI) -> None:
    extra = {"structured_outputs": exactly("Yes.")}
    r = client.responses.create(model=TINY, input="Yes?", include=INCLUDE, top_logprobs=2, extra_body=extra)  # type: ignore[list-item]
    message = r.output[0]
    assert isinstance(message, Message)
    logprobs = message.content[0].logprobs or []  # type: ignore[union-attr]
    assert "".join(lp.token for lp in logprobs) == "Yes." and all(
        len(lp.top_logprobs) == 2 for lp in logprobs
    )
    with client.responses.stream(model=TINY, input="Yes?", include=INCLUDE, extra_body=extra) as stream:  # type: ignore[list-item]
        seen = [lp for ev in stream if ev.type == "response.output_text.delta" for lp in ev.logprobs]
        final = stream.get_final_response()
    assert "".join(lp.token for lp in seen) == "Yes." and all(not lp.top_logprobs for lp in seen)
    assert [lp.token for lp in final.output[0].content[0].logprobs or []] == [lp.token for lp in seen]  # type: ignore[union-attr]


def test_text_before_a_function_call_keeps_its_tokens_and_the_markup_none(server: LiveServer) -> None:
    lead = "Let me look that up."
    body = {
        "model": TINY,
        "input": "What is a café?",
        "tools": [LOOKUP],
        "include": INCLUDE,
        "top_logprobs": 1,
        "stream": True,
        "structured_outputs": exactly(
            lead
            + "\n<tool_call>\n"
            + json.dumps({"name": "lookup", "arguments": {"word": "café"}})
            + "\n</tool_call>"
        ),
    }
    events = parse_sse(httpx.post(server.base_url + "/v1/responses", json=body, timeout=300).text)
    check_stream(events)
    message, call = events[-1]["response"]["output"]
    assert message["type"] == "message" and call["type"] == "function_call"
    part = message["content"][0]
    assert part["text"].strip() == lead
    check_logprobs(part["text"], part["logprobs"], 1)
    assert json.loads(call["arguments"]) == {"word": "café"}
    assert not any("<tool_call>" in lp["token"] or "lookup" in lp["token"] for lp in part["logprobs"])


def test_top_logprobs_21_is_a_400_naming_it(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=TINY, input="hi", include=INCLUDE, top_logprobs=21)  # type: ignore[list-item]
    assert err.value.body["param"] == "top_logprobs"  # type: ignore[index]
