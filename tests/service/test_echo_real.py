"""On vLLM (the tiny model, its generation config set to temperature 0.7 / top_p 0.8, a 1024-token context):
the echo reports what vLLM samples with, vLLM's sampling extensions take effect, `truncation: "auto"` fits
the context, `allowed_tools` restricts the forced call."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import openai
import pytest

from tests.support.real import TINY, exactly, tiny_model_server
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, validate_response
from vllm_responses.engine.models import tiny_model_path

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]

CONTEXT = 1024
EOS = 2  # the tiny model's eos_token_id


@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # VR_ECHO_SERVER=http://127.0.0.1:PORT reuses such a server already running (to iterate on these tests).
    if url := os.environ.get("VR_ECHO_SERVER"):
        yield SimpleNamespace(base_url=url.rstrip("/"))
        return
    model = tmp_path_factory.mktemp("model") / "tiny-generation-config"
    shutil.copytree(tiny_model_path(), model)
    config = json.loads((model / "generation_config.json").read_text())
    (model / "generation_config.json").write_text(json.dumps({**config, "temperature": 0.7, "top_p": 0.8}))
    server = tiny_model_server(model=model, max_model_len=CONTEXT)
    yield server
    server.stop()


def post(server: LiveServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.base_url + "/v1/responses", json={"model": TINY, **body}, timeout=300)


def create(server: LiveServer, **body: Any) -> dict[str, Any]:
    r = post(server, {"input": "Say something.", "max_output_tokens": 16, **body})
    assert r.status_code == 200, r.text
    validate_response(r.json())
    return r.json()  # type: ignore[no-any-return]


def text(body: dict[str, Any]) -> str:
    return "".join(p["text"] for it in body["output"] if it["type"] == "message" for p in it["content"])


def test_unset_temperature_and_top_p_echo_the_models_generation_config(real_server: LiveServer) -> None:
    events = parse_sse(post(real_server, {"input": "Hi.", "stream": True, "max_output_tokens": 16}).text)
    check_stream(events)
    final = events[-1]["response"]
    assert (final["temperature"], final["top_p"]) == (0.7, 0.8)
    assert (final["presence_penalty"], final["frequency_penalty"], final["store"]) == (0.0, 0.0, True)
    sent = create(real_server, temperature=1.5, presence_penalty=0.5, frequency_penalty=0.25, store=False)
    assert (sent["temperature"], sent["top_p"], sent["presence_penalty"], sent["frequency_penalty"]) == (
        1.5,
        0.8,
        0.5,
        0.25,
    )
    assert sent["store"] is False


def test_seed_makes_sampling_repeatable_and_top_k_1_is_greedy(real_server: LiveServer) -> None:
    a, b, c = (text(create(real_server, seed=seed, temperature=1.0)) for seed in (7, 7, 8))
    assert a and a == b and a != c
    greedy = {text(create(real_server, seed=seed, temperature=1.0, top_k=1)) for seed in (1, 2, 3)}
    assert len(greedy) == 1


def test_stop_strings_end_the_text(real_server: LiveServer) -> None:
    forced = exactly("Hello there. STOP and more.")
    assert (
        text(create(real_server, structured_outputs=forced, max_output_tokens=40))
        == "Hello there. STOP and more."
    )
    stopped = create(real_server, structured_outputs=forced, max_output_tokens=40, stop=["STOP"])
    assert text(stopped) == "Hello there. " and stopped["status"] == "completed"
    kept = create(
        real_server,
        structured_outputs=forced,
        max_output_tokens=40,
        stop="STOP",
        include_stop_str_in_output=True,
    )
    assert text(kept) == "Hello there. STOP"


def test_logit_bias_min_tokens_and_ignore_eos_set_the_length(real_server: LiveServer) -> None:
    eos_first = {"logit_bias": {str(EOS): 100}, "max_output_tokens": 16}
    assert create(real_server, **eos_first)["usage"]["output_tokens"] == 1
    assert create(real_server, **eos_first, min_tokens=4)["usage"]["output_tokens"] == 5
    full = create(real_server, **eos_first, ignore_eos=True)
    assert full["usage"]["output_tokens"] == 16 and full["status"] == "incomplete"


def conversation(rounds: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(rounds):
        items += [
            {"role": "user", "content": f"Question {i}: " + "tell me about the weather " * 6},
            {"role": "assistant", "content": f"Answer {i}: " + "it is sunny and warm " * 6},
        ]
    return [*items, {"role": "user", "content": "And now?"}]


def test_truncation_auto_fits_the_context_and_disabled_is_400(real_server: LiveServer) -> None:
    client = openai.OpenAI(
        base_url=real_server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300
    )
    long = conversation(20)
    full = client.responses.input_tokens.count(model=TINY, input=long).input_tokens  # type: ignore[arg-type]
    assert full > CONTEXT
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=TINY, input=long, truncation="disabled", max_output_tokens=16)  # type: ignore[arg-type]
    assert err.value.code == "context_length_exceeded"
    r = client.responses.create(
        model=TINY,
        input=long,  # type: ignore[arg-type]
        instructions="Be brief.",
        truncation="auto",
        max_output_tokens=64,
        extra_body={"structured_outputs": exactly("Sunny.")},
    )
    assert r.status == "completed" and r.output_text == "Sunny." and r.truncation == "auto"
    assert r.usage is not None

    def count(items: list[dict[str, Any]], **extra: Any) -> int:
        return client.responses.input_tokens.count(
            model=TINY,
            input=items,
            instructions="Be brief.",
            **extra,  # type: ignore[arg-type]
        ).input_tokens

    # The newest items that fit with room for the output (64 tokens) were kept, and no fewer.
    limit = CONTEXT - 64
    kept = next(k for k in range(len(long)) if count(long[k:]) <= limit)
    assert r.usage.input_tokens == count(long[kept:]) and count(long[kept - 1 :]) > limit
    assert count(long, truncation="auto", extra_body={"max_output_tokens": 64}) == r.usage.input_tokens


def test_allowed_tools_restricts_the_forced_call(real_server: LiveServer) -> None:
    def fn(name: str) -> dict[str, Any]:
        return {"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}

    tools = [{"type": "code_interpreter", "container": {"type": "auto"}}, fn("alpha"), fn("beta")]
    for name in ("alpha", "beta"):
        choice = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": name}]}
        body = create(real_server, tools=tools, tool_choice=choice, max_output_tokens=64)
        calls = [it for it in body["output"] if it["type"] == "function_call"]
        assert [c["name"] for c in calls] == [name] and body["tool_choice"] == choice
