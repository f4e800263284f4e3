"""`JsonStringListField`: a shell call's commands decoded from its arguments as they stream, in any fragments."""

from __future__ import annotations

import json

import pytest

from vllm_responses.engine.parsers.partial_list import JsonStringListField

COMMANDS = ["ls -la", 'echo "hi\\n" \u00e9 \U0001f600', ""]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_the_strings_decode_alike_in_every_fragmentation(size: int) -> None:
    text = json.dumps({"timeout_ms": 5, "other": ["x"], "commands": COMMANDS, "after": [1]})
    field, steps = JsonStringListField("commands"), []
    for i in range(0, len(text), size):
        steps += field.feed(text[i : i + size])
    assert field.values == COMMANDS and field.closed == 3
    for i, command in enumerate(COMMANDS):
        assert "".join(t for j, t, _ in steps if j == i) == command
        assert [closed for j, _, closed in steps if j == i][-1] is True


def test_one_string_is_one_command() -> None:
    field = JsonStringListField("commands")
    assert field.feed('{"commands": "pwd"}') == [(0, "pwd", True)]


def test_a_string_cut_off_is_not_closed() -> None:
    field = JsonStringListField("commands")
    assert field.feed('{"commands": ["ls", "ca') == [(0, "ls", True), (1, "ca", False)]
    assert field.closed == 1


def test_an_element_that_is_not_a_string_ends_the_decoding() -> None:
    field = JsonStringListField("commands")
    field.feed('{"commands": [1, "b"]}')
    assert field.values == []
