"""Two projects on one real server (a keys file, the real `openai` SDK): an item id one project chose is its own
(another storing an item under it takes nothing), and a reasoning blob sealed for one project does not open
for another."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.api.test_tenants import KEY_A, KEY_B, MODEL, _keys_file
from tests.support.fakes import FakeEngine, FakeInterpreter, say, think
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.engine.types import Message, Reasoning


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("tenant-items")
    config = Config(api_keys_file=_keys_file(root / "keys.json"), db=str(root / "r.db"))
    live = LiveServer(config, FakeEngine(), FakeInterpreter(), db=str(root / "r.db"))
    yield live.start()
    live.stop()


def _sdk(server: LiveServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


@pytest.fixture
def a(server: LiveServer) -> openai.OpenAI:
    return _sdk(server, KEY_A)


@pytest.fixture
def b(server: LiveServer) -> openai.OpenAI:
    return _sdk(server, KEY_B)


@pytest.fixture
def engine(server: LiveServer) -> FakeEngine:
    fake: FakeEngine = server.engine
    fake.reset()
    return fake


def _message(item_id: str, text: str) -> Any:
    return {"type": "message", "id": item_id, "role": "user", "content": text}


def test_another_project_storing_an_item_under_my_id_does_not_take_my_item(
    a: openai.OpenAI, b: openai.OpenAI, engine: FakeEngine
) -> None:
    a.responses.create(model=MODEL, input=[_message("msg_chosen_by_a", "A's own words")])
    b.responses.create(model=MODEL, input=[_message("msg_chosen_by_a", "B's words")])  # the id A used

    engine.requests.clear()
    a.responses.create(model=MODEL, input=[{"type": "item_reference", "id": "msg_chosen_by_a"}])  # type: ignore[list-item]
    assert Message("user", "A's own words") in engine.requests[0].turns
    b.responses.create(model=MODEL, input=[{"type": "item_reference", "id": "msg_chosen_by_a"}])  # type: ignore[list-item]
    assert Message("user", "B's words") in engine.requests[1].turns  # B's own item, under the same id


def test_a_reasoning_blob_sealed_for_one_project_does_not_open_for_another(
    a: openai.OpenAI, b: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset([*think("A's private plan."), *say("Done.")])
    first = a.responses.create(
        model=MODEL, input="Plan.", store=False, include=["reasoning.encrypted_content"]
    )
    reasoning = next(it.model_dump(exclude_none=True) for it in first.output if it.type == "reasoning")
    assert reasoning["encrypted_content"]
    del reasoning["content"]  # what the model reads can only come from the sealed copy
    again = [{"role": "user", "content": "Plan."}, reasoning, {"role": "user", "content": "Go on."}]

    engine.requests.clear()
    with pytest.raises(openai.BadRequestError) as refused:
        b.responses.create(model=MODEL, input=again, store=False)  # type: ignore[arg-type]
    body: Any = refused.value.body
    assert body["code"] == "invalid_encrypted_content" and body["param"] == "input[1].encrypted_content", body
    assert "another project" in body["message"]
    assert engine.requests == []  # refused before any model call

    a.responses.create(model=MODEL, input=again, store=False)  # type: ignore[arg-type]
    assert Reasoning("A's private plan.") in engine.requests[0].turns
