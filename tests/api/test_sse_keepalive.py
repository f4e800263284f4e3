"""SSE keep-alives (`--sse-keepalive`): comment lines during silent stretches, which the openai SDK's stream
parser skips, on a live server over the fake engine."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter, say
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse
from vllm_responses.api.responses import SSE_KEEPALIVE
from vllm_responses.config import Config

MODEL = "fake-model"
ANSWER = "Hi, there!"  # 4 deltas, each after 0.6 s of silence


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    live = LiveServer(Config(sse_keepalive=0.2), FakeEngine(), FakeInterpreter()).start()
    yield live
    live.stop()


@pytest.fixture
def engine(server: LiveServer) -> FakeEngine:
    fake: FakeEngine = server.engine
    fake.reset(say(ANSWER), delay=0.6)
    return fake


def test_raw_stream_has_comment_lines_between_the_frames(server: LiveServer, engine: FakeEngine) -> None:
    with httpx.Client(timeout=30) as http:
        r = http.post(server.base_url + "/v1/responses", json={"model": MODEL, "input": "hi", "stream": True})
    assert r.status_code == 200
    assert r.text.count(SSE_KEEPALIVE.decode()) >= 3  # ~2 per 0.6 s gap; fewer on a loaded host
    events = parse_sse(r.text.replace(SSE_KEEPALIVE.decode(), ""))  # the frames are whole around them
    check_stream(events)
    assert events[-1]["type"] == "response.completed"


def test_the_sdk_sees_the_normal_events(server: LiveServer, engine: FakeEngine) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=30)
    events = list(client.responses.create(model=MODEL, input="hi", stream=True))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == ANSWER
    engine.reset(say(ANSWER), delay=0.6)
    with client.responses.stream(model=MODEL, input="hi") as stream:
        assert stream.get_final_response().output_text == ANSWER


def test_a_late_joiner_gets_keepalives_too(server: LiveServer, engine: FakeEngine) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=30)
    bg = client.responses.create(model=MODEL, input="hi", background=True)
    with httpx.Client(timeout=30) as http:
        text = http.get(f"{server.base_url}/v1/responses/{bg.id}", params={"stream": "true"}).text
    assert SSE_KEEPALIVE.decode() in text
    assert parse_sse(text.replace(SSE_KEEPALIVE.decode(), ""))[-1]["type"] == "response.completed"
