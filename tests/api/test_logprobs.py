"""Logprobs over the scripted engine and the SDK: what turns them on, the part and the events that carry
them (streamed and not, stored), the echo and the 400s (the real engine: tests/engine/test_logprobs_real.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine, code_call, say
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, validate_response
from vllm_responses.engine.types import EngineEvent, Finish, TextDelta, TokenLogprob, Usage

MODEL = "fake-model"
INCLUDE = ["message.output_text.logprobs"]
CI = [{"type": "code_interpreter", "container": {"type": "auto"}}]


def scored(*tokens: str, top: int = 2) -> list[EngineEvent]:
    """Text whose deltas carry logprobs (one token each, with `top` alternatives), not finished."""
    alternatives = tuple((f"alt{i}", -1.0 - i) for i in range(top))
    return [TextDelta(t, (TokenLogprob(t, -0.25 * (i + 1), alternatives),)) for i, t in enumerate(tokens)]


def answer(*tokens: str) -> list[EngineEvent]:
    return [*scored(*tokens), Finish("stop", Usage())]


def test_the_include_turns_logprobs_on_and_top_logprobs_sets_how_many(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    """As OpenAI: the include asks for logprobs (with `top_logprobs` alternatives, 0 when unset);
    `top_logprobs` alone is echoed and gives none."""
    for include, top, wanted in ((INCLUDE, 3, 3), (INCLUDE, None, 0), ([], 5, None), ([], None, None)):
        extra: dict[str, Any] = {} if top is None else {"top_logprobs": top}
        r = client.responses.create(model=MODEL, input="hi", include=include, **extra)  # type: ignore[arg-type]
        assert engine.requests[-1].sampling.logprobs == wanted
        assert r.top_logprobs == (top or 0)


def test_part_and_events_carry_them_as_the_sdk_types_them(
    fake_server: LiveServer, client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(answer("Hel", "lo", " é"))
    body = {"model": MODEL, "input": "hi", "include": INCLUDE, "top_logprobs": 2}
    done = client.responses.create(**body)  # type: ignore[arg-type]
    (part,) = done.output[0].content  # type: ignore[union-attr]
    assert part.text == "Hello é" and "".join(lp.token for lp in part.logprobs or []) == part.text
    first = (part.logprobs or [])[0]
    assert (first.token, first.bytes, first.logprob) == ("Hel", list(b"Hel"), -0.25)
    assert [(t.token, t.bytes, t.logprob) for t in first.top_logprobs] == [
        ("alt0", list(b"alt0"), -1.0),
        ("alt1", list(b"alt1"), -2.0),
    ]
    assert (part.logprobs or [])[2].bytes == list(" é".encode())

    engine.reset(answer("Hel", "lo", " é"))
    events = parse_sse(
        httpx.post(fake_server.base_url + "/v1/responses", json={**body, "stream": True}, timeout=30).text
    )
    check_stream(events)  # every event validated against the SDK's types
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert [[lp["token"] for lp in d["logprobs"]] for d in deltas] == [["Hel"], ["lo"], [" é"]]
    assert all(set(lp) == {"token", "logprob", "top_logprobs"} for d in deltas for lp in d["logprobs"])
    (text_done,) = [e for e in events if e["type"] == "response.output_text.done"]
    streamed = [lp for d in deltas for lp in d["logprobs"]]
    assert text_done["logprobs"] == streamed
    final = events[-1]["response"]["output"][0]["content"][0]["logprobs"]
    without_bytes = [
        {**lp, "top_logprobs": [{k: t[k] for k in ("token", "logprob")} for t in lp["top_logprobs"]]}
        for lp in final
    ]
    assert [{k: v for k, v in lp.items() if k != "bytes"} for lp in without_bytes] == streamed
    assert final == [lp.model_dump() for lp in part.logprobs or []]  # streamed and not: the same

    stored = client.responses.retrieve(events[-1]["response"]["id"])
    assert stored.output[0].content[0].logprobs == part.logprobs  # type: ignore[union-attr]
    raw = httpx.get(fake_server.base_url + f"/v1/responses/{stored.id}").json()
    validate_response(raw)
    assert json.dumps(raw["output"][0]["content"][0]["logprobs"]) == json.dumps(final)


def test_without_them_parts_and_events_carry_empty_lists(fake_server: LiveServer, engine: FakeEngine) -> None:
    engine.reset(say("Hi there"))
    body = {"model": MODEL, "input": "hi", "stream": True}
    events = parse_sse(httpx.post(fake_server.base_url + "/v1/responses", json=body, timeout=30).text)
    check_stream(events)
    assert all(e["logprobs"] == [] for e in events if e["type"].startswith("response.output_text."))
    assert events[-1]["response"]["output"][0]["content"][0]["logprobs"] == []


def test_a_code_call_in_the_same_response(fake_server: LiveServer, engine: FakeEngine) -> None:
    """Text, a code call, text: each message's part has its own tokens; the call carries none."""
    engine.reset(scored("Let", " me") + code_call("print(1)"), answer("1", "."))
    body = {"model": MODEL, "input": "hi", "tools": CI, "include": INCLUDE, "stream": True}
    events = parse_sse(httpx.post(fake_server.base_url + "/v1/responses", json=body, timeout=30).text)
    check_stream(events)
    output = events[-1]["response"]["output"]
    assert [it["type"] for it in output] == ["message", "code_interpreter_call", "message"]
    assert [[lp["token"] for lp in it["content"][0]["logprobs"]] for it in (output[0], output[2])] == [
        ["Let", " me"],
        ["1", "."],
    ]


@pytest.mark.parametrize("top", [21, -1, 2.5])
def test_top_logprobs_out_of_range_is_a_400_naming_it(client: openai.OpenAI, top: float) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="hi", include=INCLUDE, top_logprobs=top)  # type: ignore[arg-type]
    assert err.value.body["param"] == "top_logprobs"  # type: ignore[index]
