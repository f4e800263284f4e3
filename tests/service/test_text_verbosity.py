"""`text.verbosity` over a live server (the scripted engine): every model call of the response carries it to the
engine (which renders it as the template's variable or a system note, tests/engine/test_prompt.py), and the
response echoes it."""

from __future__ import annotations

import openai

from tests.support.fakes import FakeEngine, code_call, say
from tests.support.wire import validate_response

MODEL = "fake-model"


def test_every_model_call_carries_the_verbosity(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(code_call("print(6 * 7)"), say("42."))
    r = client.responses.create(
        model=MODEL,
        input="What is 6 * 7? Use Python.",
        tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
        text={"verbosity": "low"},
    )
    validate_response(r.model_dump(mode="json"))
    assert r.status == "completed" and r.text is not None and r.text.verbosity == "low"
    assert len(engine.requests) == 2  # the code call, then the answer: both told
    assert [call.verbosity for call in engine.requests] == ["low", "low"]


def test_no_verbosity_asked_none_given(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say("Hi."))
    client.responses.create(model=MODEL, input="hi")
    client.responses.create(model=MODEL, input="hi", text={"verbosity": "high"})
    assert [call.verbosity for call in engine.requests] == [None, "high"]
