"""A retrieve's `include` over a live server (the scripted engine, a fake SearXNG on 127.0.0.1): every value a
create honours is honoured on `GET /v1/responses/{id}` too, the values named replacing the create's; and
`input_items`' `include` is read and checked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say, think
from tests.support.searx import RESULTS, FakeSearx
from tests.support.serving import LiveServer
from tests.support.wire import validate_response
from vllm_responses.config import Config
from vllm_responses.engine.types import (
    EngineEvent,
    Finish,
    Reasoning,
    TextDelta,
    TokenLogprob,
    Usage,
)

MODEL = "fake-model"
WEB: list[Any] = [{"type": "web_search"}]


@pytest.fixture(scope="module")
def live(searx: FakeSearx) -> Iterator[LiveServer]:
    server = LiveServer(Config(web_search_url=searx.url), FakeEngine(), FakeInterpreter()).start()
    yield server
    server.stop()


@pytest.fixture
def engine(live: LiveServer) -> FakeEngine:
    live.engine.reset()
    return live.engine  # type: ignore[no-any-return]


@pytest.fixture
def client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)


def retrieve(live: LiveServer, rid: str, *include: str) -> dict[str, Any]:
    r = httpx.get(f"{live.base_url}/v1/responses/{rid}", params={"include[]": list(include)}, timeout=30)
    assert r.status_code == 200, r.text
    validate_response(r.json())
    return r.json()  # type: ignore[no-any-return]


def test_encrypted_reasoning_is_sealed_on_retrieve(
    live: LiveServer, client: openai.OpenAI, engine: FakeEngine
) -> None:
    """A response created without the include: its reasoning sealed for the caller on retrieve, a blob that a
    `store: false` request sends back and the model reads."""
    engine.reset([*think("The secret plan."), *say("Done.")], say("Next."))
    rid = client.responses.create(model=MODEL, input="Plan.").id
    assert "encrypted_content" not in retrieve(live, rid)["output"][0]
    item = retrieve(live, rid, "reasoning.encrypted_content")["output"][0]
    assert item["type"] == "reasoning" and item["encrypted_content"]
    item.pop("id")  # sent back by value, as a client that stores nothing does
    again: Any = [{"role": "user", "content": "Plan."}, item, {"role": "user", "content": "Go on."}]
    client.responses.create(model=MODEL, input=again, store=False)
    turns = engine.requests[-1].turns
    assert [t.text for t in turns if isinstance(t, Reasoning)] == ["The secret plan."]
    # named values replace the create's: another include leaves the blob out
    assert "encrypted_content" not in retrieve(live, rid, "code_interpreter_call.outputs")["output"][0]


def test_search_sources_are_shown_on_retrieve(
    live: LiveServer, client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(function_call("web_search", {"query": "python 3.13"}), say("A JIT."))
    r = client.responses.create(model=MODEL, input="What is new?", tools=WEB)
    assert r.output[0].type == "web_search_call" and r.output[0].action.sources is None  # type: ignore[union-attr]
    call = retrieve(live, r.id, "web_search_call.action.sources")["output"][0]
    assert [s["url"] for s in call["action"]["sources"]] == [x["url"] for x in RESULTS]
    assert "sources" not in retrieve(live, r.id)["output"][0]["action"]  # as the create asked
    # a create that asked: kept on the wire as it asked, left out when a retrieve names other values
    engine.reset(function_call("web_search", {"query": "python 3.13"}), say("A JIT."))
    asked = client.responses.create(
        model=MODEL, input="What is new?", tools=WEB, include=["web_search_call.action.sources"]
    )
    assert len(retrieve(live, asked.id)["output"][0]["action"]["sources"]) == len(RESULTS)
    assert "sources" not in retrieve(live, asked.id, "reasoning.encrypted_content")["output"][0]["action"]


def scored(*tokens: str) -> list[EngineEvent]:
    return [*(TextDelta(t, (TokenLogprob(t, -0.5),)) for t in tokens), Finish("stop", Usage())]


def test_logprobs_on_retrieve(live: LiveServer, client: openai.OpenAI, engine: FakeEngine) -> None:
    """Computed while the model writes (a create that asked): shown when named, `[]` when other values are."""
    engine.reset(scored("Hel", "lo"))
    rid = client.responses.create(model=MODEL, input="hi", include=["message.output_text.logprobs"]).id
    named = retrieve(live, rid, "message.output_text.logprobs")["output"][0]["content"][0]["logprobs"]
    assert [lp["token"] for lp in named] == ["Hel", "lo"]
    assert retrieve(live, rid, "code_interpreter_call.outputs")["output"][0]["content"][0]["logprobs"] == []


def test_input_items_include_is_checked(live: LiveServer, client: openai.OpenAI, engine: FakeEngine) -> None:
    rid = client.responses.create(model=MODEL, input="hi").id
    url = f"{live.base_url}/v1/responses/{rid}/input_items"
    bad = httpx.get(url, params={"include[]": ["nonsense"]}, timeout=30)
    assert bad.status_code == 400, bad.text
    assert bad.json()["error"]["param"] == "include[0]"
    items = client.responses.input_items.list(rid, include=["message.input_image.image_url"])
    assert [it.type for it in items.data] == ["message"]
