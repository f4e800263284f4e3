"""`InputBudget`: a request's images and files counted, refused to a text-only model and their inline bytes summed
from the body alone; `spend` stops what is read elsewhere once the total is past."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from vllm_responses.context.input_budget import InputBudget, InputLimits
from vllm_responses.protocol.errors import InvalidRequest

IMAGE = {"type": "input_image", "image_url": "https://example.com/a.png"}


def _items(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi."}, *parts]}]


def _refused(items: list[dict[str, Any]], limits: InputLimits) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as exc:
        InputBudget(items, "input", limits)
    return exc.value


def test_a_text_only_model_refuses_the_first_image() -> None:
    err = _refused(_items(IMAGE), InputLimits(takes_images=False))
    assert (err.param, err.code) == (
        "input[0].content[1]",
        "unsupported_value",
    ) and "text only" in err.message


def test_counts_name_the_first_part_over() -> None:
    err = _refused(_items(IMAGE, IMAGE), InputLimits(max_images=1))
    assert (err.param, err.code) == ("input[0].content[2]", "too_many_images")
    file = {"type": "input_file", "file_url": "https://example.com/a.pdf"}
    err = _refused(_items(file, IMAGE, file), InputLimits(max_files=1))
    assert (err.param, err.code) == ("input[0].content[3]", "too_many_files")


def test_a_file_sent_back_as_kept_is_not_counted() -> None:
    kept = {"type": "input_file", "filename": "a.txt", "extracted_text": "read before"}
    InputBudget(_items(kept, kept), "input", InputLimits(max_files=1))


def test_inline_bytes_are_summed_and_spending_past_the_total_is_refused() -> None:
    data = "data:text/plain;base64," + base64.b64encode(b"x" * 600).decode()
    file = {"type": "input_file", "file_data": data}
    err = _refused(_items(file, file), InputLimits(max_file_total_bytes=1000))
    assert (err.param, err.code) == ("input[0].content[2]", "file_too_large") and "1000 bytes" in err.message
    budget = InputBudget(_items(file), "input", InputLimits(max_file_total_bytes=1000))
    budget.spend("file", 400, "input[0].content[2]")
    with pytest.raises(InvalidRequest) as exc:
        budget.spend("file", 1, "input[0].content[2]")
    assert exc.value.code == "file_too_large"
    budget.spend("image", 1000, "input[0].content[3]")  # images have their own total
