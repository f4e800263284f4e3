"""input_image parts checked before a model call: their source, their format, the limits (the count and the
model: tests/context/test_input_budget.py)."""

from __future__ import annotations

import base64
import io
import random
import threading
from typing import Any

import pytest
from PIL import Image as PILImage

from vllm_responses.context import images
from vllm_responses.context.images import ImageLimits, check_input_images, code_result_images, data_url_image
from vllm_responses.context.turns import input_to_items, items_to_turns
from vllm_responses.engine.types import Image, Message, ToolResult
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.requests import parse_create_request


def _png(width: int, height: int) -> str:
    buf = io.BytesIO()
    PILImage.new("RGB", (width, height), (200, 10, 10)).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


PNG_URL = _png(8, 8)
PNG = base64.b64decode(PNG_URL.split(",")[1])


def _input(*parts: dict[str, Any]) -> list[Any]:
    body = {
        "model": "m",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi."}, *parts]}],
    }
    req = parse_create_request(body)
    assert isinstance(req.input, list)
    return req.input


def _refused(items: list[Any], limits: ImageLimits | None = None) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as exc:
        check_input_images(items, limits or ImageLimits())
    return exc.value


def test_a_data_url_image_passes_and_reads_back_as_the_messages_image() -> None:
    items = _input({"type": "input_image", "image_url": PNG_URL, "detail": "low"})
    check_input_images(items, ImageLimits())
    stored = input_to_items(items)
    assert [p["type"] for p in stored[0]["content"]] == ["input_text", "input_image"]  # as sent
    assert items_to_turns(stored) == [Message("user", "Hi.", (Image(PNG, "image/png"),))]


def test_each_limit_is_a_400_naming_the_part() -> None:
    big = _input({"type": "input_image", "image_url": _png(64, 64)})
    assert _refused(big, ImageLimits(max_bytes=50)).code == "image_too_large"
    bomb = _refused(big, ImageLimits(max_pixels=64 * 63))
    assert (bomb.code, bomb.param) == ("image_too_large", "input[0].content[1].image_url")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("data:image/png;base64,aGVsbG8=", "could not be decoded"),
        ("data:image/png;base64,@@@", "not valid base64"),
        ("data:image/svg+xml;base64,PHN2Zz4=", "Invalid image data URL"),
        ("data:image/jpeg;base64," + PNG_URL.split(",")[1], "not image/jpeg"),
        ("ftp://example.com/a.png", "data URL (data:image/png;base64,...) or an http(s) URL"),
    ],
)
def test_a_bad_source_is_a_400(url: str, says: str) -> None:
    err = _refused(_input({"type": "input_image", "image_url": url}))
    assert says in err.message and err.param == "input[0].content[1].image_url"


def test_far_sources_pass_to_the_reader_and_output_parts_are_named() -> None:
    """A file_id or an http(s) URL is fetched later (tools/file_inputs.py), where its 400s are tested
    (tests/context/test_image_sources.py); a part with neither is refused here."""
    for far in ({"file_id": "cfile_1"}, {"image_url": "https://example.com/a.png"}):
        check_input_images(_input({"type": "input_image", **far}), ImageLimits())
    assert "neither" in _refused(_input({"type": "input_image"})).message
    body = {
        "model": "m",
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "input": [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {
                "type": "function_call_output",
                "call_id": "c",
                "output": [{"type": "input_image", "image_url": "x"}],
            },
        ],
    }
    req = parse_create_request(body)
    assert isinstance(req.input, list)
    assert _refused(req.input).param == "input[1].output[0].image_url"
    ok = [
        {
            **body["input"][1],
            "output": [{"type": "input_text", "text": "t"}, {"type": "input_image", "image_url": PNG_URL}],
        }
    ]
    turns = items_to_turns([body["input"][0], *ok])
    assert turns[1] == ToolResult("c", "f", "t", (Image(PNG, "image/png"),))


def test_code_result_images_are_the_png_outputs() -> None:
    outputs = [
        {"type": "logs", "logs": "x"},
        {"type": "image", "url": PNG_URL},
        {"type": "image", "url": "bad"},
    ]
    assert code_result_images(outputs) == (Image(PNG, "image/png"),)
    assert data_url_image(PNG_URL, "p").media_type == "image/png"


async def test_small_inline_images_are_checked_at_once_and_large_ones_on_the_image_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threads: list[str] = []
    check = images.check_input_images

    def recorded(*args: Any) -> None:
        threads.append(threading.current_thread().name)
        check(*args)

    monkeypatch.setattr(images, "check_input_images", recorded)
    noise = PILImage.frombytes(
        "RGB", (160, 160), random.Random(0).randbytes(160 * 160 * 3)
    )  # ~77 KB as a PNG
    buf = io.BytesIO()
    noise.save(buf, "PNG")
    large = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    assert len(PNG_URL) <= images.CHECK_INLINE_CHARS < len(large)
    await images.check_input_images_off_loop(
        _input({"type": "input_image", "image_url": PNG_URL}), ImageLimits()
    )
    await images.check_input_images_off_loop(
        _input({"type": "input_image", "image_url": large}), ImageLimits()
    )
    assert threads[0] == threading.current_thread().name and threads[1].startswith("image-check")
