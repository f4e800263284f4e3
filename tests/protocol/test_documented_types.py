"""docs/api.md against the installed `openai` SDK's types and the code: every input item type, tool type, include
value and create field the SDK knows has its row (or its mention) in the docs, and what a row says is accepted is
what the code accepts. An SDK release that adds a type fails here until the docs say what the server does with it."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import openai
import typing_extensions
from openai.types.responses import (
    response_create_params,
    response_includable,
    response_input_item_param,
    tool_param,
)

from vllm_responses.protocol.inputs import INPUT_ITEM_TYPES, TOOL_TYPES
from vllm_responses.protocol.requests import SUPPORTED_INCLUDES

DOC = (Path(__file__).parents[2] / "docs" / "api.md").read_text()


def type_tags(union: Any) -> set[str]:
    """The `type` literals of a union of the SDK's TypedDicts (an optional `type` counts)."""
    tags: set[str] = set()
    for member in typing.get_args(union):
        hint = typing_extensions.get_type_hints(member)["type"]
        while typing.get_origin(hint) in (typing_extensions.Required, typing_extensions.NotRequired):
            (hint,) = typing.get_args(hint)
        for arg in typing.get_args(hint) if typing.get_origin(hint) is not typing.Literal else [hint]:
            tags.update(a for a in typing.get_args(arg) if isinstance(a, str))
    return tags


def section(heading: str) -> str:
    """The text under a heading of docs/api.md, up to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    start = DOC.index(f"\n{heading}\n")
    ends = [m.start() for m in re.finditer(r"\n#{1,%d} " % len(level), DOC) if m.start() > start]
    return DOC[start : min(ends, default=len(DOC))]


def rows(text: str) -> dict[str, str]:
    """A table's rows: each name written in backticks in the first column, to the rest of its row."""
    found = {}
    for line in text.splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and len(cells) > 1:
            for name in re.findall(r"`([^`]+)`", cells[0]):
                found[name] = " | ".join(cells[1:])
    return found


def test_the_docs_name_the_sdk_version_they_were_read_against() -> None:
    major_minor = ".".join(openai.__version__.split(".")[:2])
    assert DOC.count(f"openai SDK ({major_minor})") == 2, "re-read the Input items and Tool types tables"


def test_every_input_item_type_has_its_row_saying_whether_it_is_accepted() -> None:
    table = rows(section("### Input items"))
    sdk = type_tags(response_input_item_param.ResponseInputItemParam)
    assert sdk <= set(table), f"input item types without a row: {sorted(sdk - set(table))}"
    for kind in sdk:
        accepted = table[kind].startswith("yes")
        assert accepted == (kind in INPUT_ITEM_TYPES), kind
        assert accepted or table[kind].startswith("no (400)"), kind


def test_every_tool_type_has_its_row_and_the_count_is_right() -> None:
    text = section("## Tool types")
    table = rows(text)
    sdk = type_tags(tool_param.ToolParam)
    assert sdk <= set(table), f"tool types without a row: {sorted(sdk - set(table))}"
    assert f"Of the {len(sdk)} tool types" in text
    for kind in sdk:
        assert table[kind].startswith("refused (400)") == (kind not in TOOL_TYPES), kind


def test_every_include_value_has_its_row() -> None:
    table = rows(section("### `include`"))
    sdk = set(typing.get_args(response_includable.ResponseIncludable))
    assert sdk <= set(table), f"include values without a row: {sorted(sdk - set(table))}"
    for value in sdk:
        assert table[value].startswith("honoured") == (value in SUPPORTED_INCLUDES), value
        assert value in SUPPORTED_INCLUDES or table[value].startswith("400"), value


def test_every_create_field_is_documented() -> None:
    text = section("## Request fields (`POST /v1/responses`)")
    fields = set(response_create_params.ResponseCreateParamsBase.__annotations__) | {"stream"}
    missing = sorted(name for name in fields if f"`{name}`" not in text)
    assert not missing, f"create fields docs/api.md does not mention: {missing}"
