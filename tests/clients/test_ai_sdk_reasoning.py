"""The Vercel AI SDK (`ai` + `@ai-sdk/openai`), unchanged (`node/ai_sdk_reasoning.mjs` on Node >= 22), on a
reasoning model served in full on vLLM: the tiny model with a Qwen3-style `<think>` template
(tests/support/reasoning_models.py), each model call forced by the server (`ForcedEngine`, which records what each call
was asked; the prompt a call saw is `engine.render` of it).

`providerOptions.openai.reasoningSummary` makes the SDK stream the reasoning (its `reasoning-delta` parts come
only from the `response.reasoning_summary_text.delta` events), `textVerbosity` reaches the prompt (this template
reads no `verbosity` variable: the note in the system turn), and the second turn gives the first turn's
reasoning back as the SDK does it: an `item_reference` on its defaults, the sealed item with `store: false`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.clients.node_runner import run_script
from tests.support.real import TINY, ForcedEngine, tiny_model_server
from tests.support.reasoning_models import reasoning_tiny_model
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.engine.types import Reasoning
from vllm_responses.engine.verbosity import VERBOSITY_NOTES

pytestmark = [pytest.mark.engine, pytest.mark.slow]

THOUGHT1, ANSWER1 = "Look at the forecast for Paris.", "It is sunny."
THOUGHT2, ANSWER2 = "The forecast says rain tomorrow.", "Rain tomorrow."
PLAN = [f"<think>{THOUGHT1}</think>{ANSWER1}", f"<think>{THOUGHT2}</think>{ANSWER2}"]
# The parts the SDK reports for one streamed turn, deltas left out.
PARTS = [
    "start",
    "start-step",
    "reasoning-start",
    "reasoning-end",
    "text-start",
    "text-end",
    "finish-step",
    "finish",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    model = reasoning_tiny_model(tmp_path_factory.mktemp("model"))
    config = Config(reasoning_key="the test key")
    live = tiny_model_server(workers=0, model=model, config=config, wrap=ForcedEngine)
    yield live
    live.stop()


@pytest.fixture
def engine(server: LiveServer) -> ForcedEngine:
    forced: ForcedEngine = server.engine
    forced.requests.clear()
    forced.plan = list(PLAN)
    return forced


def think_block(thought: str) -> str:
    """How the template shows an assistant turn's earlier reasoning."""
    return f"<|im_start|>assistant\n<think>\n{thought}\n</think>\n\n"


def check_turn(turn: dict[str, Any], thought: str, answer: str) -> None:
    """The SDK streamed the reasoning as its own parts (from the summary events), then the answer."""
    assert [t for t in turn["partTypes"] if not t.endswith("-delta")] == PARTS, turn["partTypes"]
    assert "".join(turn["reasoningDeltas"]).strip() == thought
    assert turn["reasoningText"].strip() == thought
    assert turn["text"] == answer and turn["finishReason"] == "stop"


def test_reasoning_summary_and_verbosity_over_two_turns(server: LiveServer, engine: ForcedEngine) -> None:
    turns = [
        {"forceReasoning": True, "reasoningSummary": "auto", "textVerbosity": "low"},
        {"forceReasoning": True, "reasoningSummary": "detailed", "textVerbosity": "high"},
    ]
    out = run_script("ai_sdk_reasoning.mjs", server.base_url + "/v1", {"model": TINY, "turns": turns})

    first_body, second_body = out["sent"]
    assert first_body["reasoning"] == {"summary": "auto"}
    assert first_body["text"] == {"verbosity": "low"}
    assert second_body["reasoning"] == {"summary": "detailed"}
    assert second_body["text"] == {"verbosity": "high"}
    check_turn(out["first"], THOUGHT1, ANSWER1)
    check_turn(out["second"], THOUGHT2, ANSWER2)

    # The first turn's reasoning and answer go back as references to the stored items; the model reads both.
    types = [i.get("type") for i in second_body["input"]]
    assert types == [None, "item_reference", "item_reference", None], second_body["input"]
    first_call, second_call = engine.requests
    assert Reasoning(THOUGHT1) in second_call.turns
    assert think_block(THOUGHT1) + ANSWER1 in engine.render(second_call)

    # textVerbosity reaches every prompt: this template has no variable for it, so the note in the system turn.
    assert [first_call.verbosity, second_call.verbosity] == ["low", "high"]
    first_prompt = engine.render(first_call)
    assert first_prompt.startswith(f"<|im_start|>system\n{VERBOSITY_NOTES['low']}<|im_end|>\n"), first_prompt
    assert VERBOSITY_NOTES["high"] in engine.render(second_call)
    assert VERBOSITY_NOTES["low"] not in engine.render(second_call)


def test_reasoning_given_back_sealed_without_storage(server: LiveServer, engine: ForcedEngine) -> None:
    options = {"forceReasoning": True, "reasoningSummary": "auto", "store": False}
    out = run_script("ai_sdk_reasoning.mjs", server.base_url + "/v1", {"model": TINY, "turns": [options] * 2})

    first_body, second_body = out["sent"]
    assert first_body["store"] is False and first_body["include"] == ["reasoning.encrypted_content"]
    check_turn(out["first"], THOUGHT1, ANSWER1)
    check_turn(out["second"], THOUGHT2, ANSWER2)

    # The SDK resends the reasoning item whole: the sealed blob and the summary it streamed.
    (reasoning,) = [i for i in second_body["input"] if i.get("type") == "reasoning"]
    assert reasoning["encrypted_content"] and THOUGHT1 not in reasoning["encrypted_content"]
    assert [p["text"].strip() for p in reasoning["summary"]] == [THOUGHT1]
    second_call = engine.requests[1]
    assert Reasoning(THOUGHT1) in second_call.turns
    assert think_block(THOUGHT1) + ANSWER1 in engine.render(second_call)
