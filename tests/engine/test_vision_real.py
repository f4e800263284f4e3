"""Images in, on the real engine: the tiny vision model (Idefics3) reads input_image parts of messages and of
function call outputs (input_tokens count each image's tokens); a text-only model refuses them with a 400."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import openai
import openresponses_types as ort
import pytest
from openai import OpenAI

from tests.support.real import TINY as MODEL
from tests.support.real import (
    ForcedEngine,
    exactly,
    hermes_call,
    tiny_model_server,
    tiny_vision_model_path_or_fail,
)
from tests.support.serving import LiveServer
from vllm_responses.engine.types import ToolResult

pytestmark = [pytest.mark.engine, pytest.mark.slow]

# The Open Responses compliance suite's image (a 32x32 PNG) and question.
SUITE_IMAGE = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAIAAAD8GO2jAAABmklEQVR42tyWAaTyUBzFew/eG4AHz+MBSAHKBiJRGFKwIgQQJKLU"
    "IioBIhCAiCAAEizAQIAECaASqFFJq84nudjnaqvuPnxzgP9xfrq5938csPn7PwHTKSoViCIEAYEAMhmoKsU2mUCWEQqB5xEMIp/H"
    "aGQG2G6RSuH9HQ7H34rFrtPbdz4jl6PbwmEsl3QA1mt4vcRKk8dz9eg6IpF7tt9fzGY0gCgafFRFo5Blc5vLhf3eCOj1yNhM5GRM"
    "VK0aATxPZoz09YXjkQDmczJgquGQAPp9WwCNBgG027YACgUC6HRsAZRKBDAY2AJoNv/ZnwzA6WScznG3p4UAymXGAEkyXrTFAh8f"
    "LAGqagQAyGaZpYsi7bHTNPz8MEj//LxuFPo+UBS8vb0KaLXubrRa7aX0RMLCykwmn0z3+XA4WACcTpCkh9MFAZpmuVXo+mO/w+/H"
    "ZvNgbblcUCxaSo/Hyck80Yu6XXDcvfVZr79cvMZjuN2U9O9vKAqjZrfbIZ0mV4TUi9Xqz6jddNy//7+e3n8Fhf/Llo2kxi8AQyGR"
    "oDkmAhAAAAAASUVORK5CYII="
)
SUITE_QUESTION = "What do you see in this image? Answer in one sentence."
IMAGE_TOKENS = (
    7  # <fake_token_around_image> <global-img> 4 x <image> <fake_token_around_image>, for one <image>
)
LOOKUP = [
    {
        "type": "function",
        "name": "lookup",
        "description": "Look a thing up.",
        "parameters": {"type": "object"},
    }
]


class PlannedEngine(ForcedEngine):
    """The real engine, a call forced to the next text of `plan` while it holds any, else left free: for a
    client whose requests cannot carry `structured_outputs` (the compliance suite sends its own body)."""

    def generate(self, request: Any) -> Any:
        return super().generate(request) if self.plan else self.engine.generate(request)


@pytest.fixture(scope="module")
def vision_server() -> Iterator[LiveServer]:
    server = tiny_model_server(workers=0, model=tiny_vision_model_path_or_fail(), wrap=PlannedEngine)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(vision_server: LiveServer) -> OpenAI:
    return OpenAI(base_url=vision_server.base_url + "/v1", api_key="x", max_retries=0)


def _message(*images: str, text: str = SUITE_QUESTION) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [
        {"type": "input_image", "image_url": url, "detail": "auto"} for url in images
    ]
    return {"role": "user", "content": [{"type": "input_text", "text": text}, *parts]}


def test_an_image_in_a_message_is_read_and_counted(client: OpenAI) -> None:
    forced: Any = {"structured_outputs": exactly("A red square.")}
    seen = client.responses.create(model=MODEL, input=[_message(SUITE_IMAGE)], extra_body=forced)
    blind = client.responses.create(model=MODEL, input=[_message()], extra_body=forced)
    assert seen.status == "completed" and seen.output_text == "A red square."
    assert seen.usage is not None and blind.usage is not None
    assert seen.usage.input_tokens - blind.usage.input_tokens == IMAGE_TOKENS
    counted = client.responses.input_tokens.count(model=MODEL, input=[_message(SUITE_IMAGE, SUITE_IMAGE)])
    assert counted.input_tokens == blind.usage.input_tokens + 2 * IMAGE_TOKENS
    # Stored as given: the next turn still shows the image (its tokens are counted again).
    again = client.responses.create(
        model=MODEL, previous_response_id=seen.id, input="And now?", extra_body=forced
    )
    items = client.responses.input_items.list(seen.id).data
    assert [p.type for p in items[0].content] == ["input_text", "input_image"]  # type: ignore[union-attr]
    assert again.usage is not None and again.usage.input_tokens > seen.usage.input_tokens + IMAGE_TOKENS


def test_an_image_in_a_function_call_output_is_read(client: OpenAI) -> None:
    def history(output: Any) -> list[Any]:
        return [
            {"role": "user", "content": "Look it up."},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": output},
        ]

    text = [{"type": "input_text", "text": "the picture"}]
    image = [*text, {"type": "input_image", "image_url": SUITE_IMAGE}]
    forced: Any = {"structured_outputs": exactly("Seen.")}
    seen = client.responses.create(model=MODEL, input=history(image), tools=LOOKUP, extra_body=forced)  # type: ignore[arg-type]
    blind = client.responses.create(model=MODEL, input=history(text), tools=LOOKUP, extra_body=forced)  # type: ignore[arg-type]
    assert seen.status == "completed" and seen.output_text == "Seen."
    assert seen.usage is not None and blind.usage is not None
    assert seen.usage.input_tokens - blind.usage.input_tokens == IMAGE_TOKENS


def test_open_responses_suite_image_request(vision_server: LiveServer) -> None:
    """The compliance suite's image-input test: its request exactly as it sends it (non-streaming, nothing
    added), then its checks: HTTP 200, status "completed", some output, and a body that validates as its
    ResponseResource. The model's answer is planned (`PlannedEngine`: the suite's body cannot force it, and the
    random-weight model may end at once), while the model really reads the image: its prompt carries it."""
    import httpx

    engine: PlannedEngine = vision_server.engine
    engine.plan = ["I see a red heart on a white background."]
    body = {
        "model": MODEL,
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": SUITE_QUESTION},
                    {"type": "input_image", "image_url": SUITE_IMAGE},
                ],
            }
        ],
    }
    r = httpx.post(
        vision_server.base_url + "/v1/responses",
        json=body,
        headers={"Content-Type": "application/json", "Authorization": "Bearer x"},
        timeout=300,
    )
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["status"] == "completed" and data["output"], data
    ort.ResponseResource.model_validate(data)
    assert data["output"][-1]["content"][0]["text"] == "I see a red heart on a white background."
    shown = [t for t in engine.requests[-1].turns if getattr(t, "images", ())]
    assert len(shown) == 1 and shown[0].images[0].media_type == "image/png"  # type: ignore[attr-defined]
    assert data["usage"]["input_tokens"] > IMAGE_TOKENS


def test_bad_images_get_a_400_naming_the_part(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=MODEL, input=[_message("data:image/png;base64,aGVsbG8=")])
    assert bad.value.body["param"] == "input[0].content[1].image_url"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as remote:
        client.responses.create(model=MODEL, input=[_message("http://127.0.0.1:1/x.png")])
    assert remote.value.body["param"] == "input[0].content[1].image_url"  # type: ignore[index]


def test_a_text_only_model_refuses_an_image_naming_the_part() -> None:
    server = tiny_model_server(workers=0)
    try:
        client = OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model=MODEL, input=[_message(SUITE_IMAGE)])
        assert refused.value.body["param"] == "input[0].content[1]"  # type: ignore[index]
        assert "text only" in refused.value.body["message"]  # type: ignore[index]
    finally:
        server.stop()


@pytest.mark.sandbox
def test_the_interpreters_plot_is_shown_to_a_vision_model() -> None:
    # A real sandbox worker draws a matplotlib figure; the model's second call reads the PNG as an image: its
    # prompt counts the image's tokens (against the same call without it).
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])"
    engines: list[ForcedEngine] = []

    def wrap(engine: Any) -> ForcedEngine:
        engines.append(ForcedEngine(engine, [hermes_call(code), "A rising curve."]))
        return engines[0]

    server = tiny_model_server(workers=1, model=tiny_vision_model_path_or_fail(), wrap=wrap)
    try:
        client = OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        r = client.responses.create(
            model=MODEL,
            input="Plot squares.",
            tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
            include=["code_interpreter_call.outputs"],
        )
        assert r.status == "completed" and r.output_text == "A rising curve."
        assert "image" in [o.type for o in r.output[0].outputs or []]  # type: ignore[union-attr]
        second = engines[0].requests[1]
        result = second.turns[-1]
        assert isinstance(result, ToolResult) and len(result.images) == 1
        assert result.images[0].data[:8] == b"\x89PNG\r\n\x1a\n"
        blind = dataclasses.replace(
            second, turns=[*second.turns[:-1], dataclasses.replace(result, images=())]
        )
        engine = engines[0].engine
        assert engine._count(second) - engine._count(blind) == IMAGE_TOKENS
    finally:
        server.stop()
