"""Unit tests: forced and strict calls in every tool-call format, as xgrammar reads their structural tags (which
outputs they accept and refuse), and the calls they force as our parsers read them back."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.engine.parsers.helpers import run, summarize
from tests.support.grammars import accepts, request
from vllm_responses.engine.base import EngineRejected
from vllm_responses.engine.call_shapes import SHAPES
from vllm_responses.engine.sampling import structured_constraint
from vllm_responses.engine.types import ForcedTool, ToolSpec, code_tool_spec
from vllm_responses.tools.functions import CUSTOM_PARAMETERS

xgr = pytest.importorskip("xgrammar")

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "required": ["a"],
    "additionalProperties": False,
}
ADD = ToolSpec("add", "", SCHEMA, strict=True)
NOTE = ToolSpec("note", "", {"type": "object", "properties": {"text": {"type": "string"}}})
DIGITS = ToolSpec("digits", "", CUSTOM_PARAMETERS, custom=True, grammar=("regex", "[0-9]{3}"))
CODE = code_tool_spec()

Writer = Callable[[str, str], str]
# How each format writes one call (name, JSON arguments), and what goes between two calls.
JSON_FORMATS: dict[str, tuple[Writer, str]] = {
    "hermes": (lambda n, a: f'<tool_call>\n{{"name": "{n}", "arguments": {a}}}\n</tool_call>', ""),
    "function_tag": (lambda n, a: f"<function={n}>{a}</function>", ""),
    "llama3_json": (lambda n, a: f'{{"name": "{n}", "parameters": {a}}}', ""),
    "mistral": (lambda n, a: f"[TOOL_CALLS]{n}[ARGS]{a}", ""),
    "harmony": (
        lambda n, a: f"<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>{a}<|call|>",
        "",
    ),
}


def parsed(fmt: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    r = summarize(run(fmt, [text]))
    assert r.text.strip() == "" and r.reasoning.strip() in ("", "think"), (r.text, r.reasoning)
    return list(r.calls)


def test_every_format_with_a_shape_is_covered() -> None:
    from vllm_responses.engine.parsers import get_parser

    assert {get_parser(name).name for name in SHAPES} == {*JSON_FORMATS, "pythonic"}


@pytest.mark.parametrize("fmt", JSON_FORMATS)
def test_a_forced_named_call_is_exactly_one_call_that_follows_the_schema(fmt: str) -> None:
    write, sep = JSON_FORMATS[fmt]
    c = structured_constraint(
        request(ADD, NOTE, tool_choice=ForcedTool("add"), parallel_tool_calls=False), fmt
    )
    good = write("add", '{"a": 3}')
    assert accepts(c, good)
    assert parsed(fmt, good) == [("add", {"a": 3})]  # the parser reads the forced call back
    assert not accepts(c, write("add", '{"a": "three"}'))  # the schema holds
    assert not accepts(c, write("add", '{"a": 3, "b": 4}'))
    assert not accepts(c, write("note", '{"text": "x"}'))  # the named tool only
    assert not accepts(c, "Sure. " + good)  # no text instead of the call
    assert not accepts(c, good + sep + write("add", '{"a": 4}'))  # one call: parallel_tool_calls false


@pytest.mark.parametrize("fmt", JSON_FORMATS)
def test_required_calls_one_tool_or_several_with_parallel(fmt: str) -> None:
    write, sep = JSON_FORMATS[fmt]
    two = write("add", '{"a": 1}') + sep + write("note", '{"text": "x"}')
    parallel = structured_constraint(request(ADD, NOTE, tool_choice="required"), fmt)
    single = structured_constraint(request(ADD, NOTE, tool_choice="required", parallel_tool_calls=False), fmt)
    assert accepts(parallel, write("note", '{"text": "x"}')) and accepts(single, write("add", '{"a": 1}'))
    assert not accepts(single, two)
    assert not accepts(parallel, "no call")
    if fmt == "harmony":  # a harmony call ends the model's turn (`<|call|>` is a stop token): one per call
        assert not accepts(parallel, two)
        return
    assert accepts(parallel, two)
    assert parsed(fmt, two) == [("add", {"a": 1}), ("note", {"text": "x"})]


@pytest.mark.parametrize("fmt", JSON_FORMATS)
def test_free_strict_calls_hold_the_schema_and_parallel_off_stops_after_one(fmt: str) -> None:
    write, sep = JSON_FORMATS[fmt]
    free = structured_constraint(request(ADD, NOTE), fmt)
    one = structured_constraint(request(ADD, NOTE, parallel_tool_calls=False), fmt)
    text = "<|channel|>final<|message|>Just an answer." if fmt == "harmony" else "Just an answer."
    assert accepts(free, text)
    assert accepts(free, write("add", '{"a": 3}'))
    assert not accepts(free, write("add", '{"a": "3"}'))  # strict: the schema holds
    assert accepts(free, write("note", '{"other": 1}'))  # not strict: any JSON object
    assert not accepts(free, write("unknown", "{}"))
    assert not accepts(one, write("add", '{"a": 1}') + sep + write("add", '{"a": 2}'))


def test_a_forced_harmony_call_comes_first_and_may_end_at_the_stop_token() -> None:
    write, _ = JSON_FORMATS["harmony"]
    c = structured_constraint(request(ADD, tool_choice="required"), "harmony")
    assert accepts(c, write("add", '{"a": 1}').removesuffix("<|call|>"))  # `<|call|>`, a stop token, ends it
    analysis = "<|channel|>analysis<|message|>think<|end|><|start|>assistant"
    assert not accepts(c, analysis + write("add", '{"a": 1}'))  # forced: the call first, as in every format
    assert parsed("harmony", analysis + write("add", '{"a": 1}')) == [("add", {"a": 1})]


@pytest.mark.parametrize("fmt", [*JSON_FORMATS, "pythonic"])
def test_the_code_interpreter_forced(fmt: str) -> None:
    c = structured_constraint(request(CODE, ADD, tool_choice=ForcedTool("python")), fmt)
    code = 'print("hi")'
    if fmt == "harmony":  # raw code to `python`, as gpt-oss writes it
        text = f"<|channel|>analysis to=python code<|message|>{code}<|call|>"
    elif fmt == "pythonic":
        text = f"[python(code={json.dumps(code)})]"
        assert not accepts(c, "[python(cmd='ls')]")
    else:
        text = JSON_FORMATS[fmt][0]("python", json.dumps({"code": code}))
    assert accepts(c, text)
    assert parsed(fmt, text) == [("python", {"code": code})]
    if fmt != "harmony" and fmt != "pythonic":
        assert not accepts(c, JSON_FORMATS[fmt][0]("python", '{"cmd": "ls"}'))


@pytest.mark.parametrize("fmt", [*JSON_FORMATS, "pythonic"])
def test_a_forced_custom_call_follows_its_grammar(fmt: str) -> None:
    c = structured_constraint(request(DIGITS, ADD, tool_choice=ForcedTool("digits")), fmt)
    if fmt == "pythonic":
        good, bad = '[digits(input="123")]', '[digits(input="12a")]'
    else:
        write = JSON_FORMATS[fmt][0]
        good, bad = write("digits", '{"input": "123"}'), write("digits", '{"input": "12a"}')
    assert accepts(c, good) and not accepts(c, bad)
    assert parsed(fmt, good) == [("digits", {"input": "123"})]


def test_pythonic_forces_the_name_and_keyword_arguments_held_to_the_schema() -> None:
    c = structured_constraint(
        request(ADD, NOTE, tool_choice=ForcedTool("add"), parallel_tool_calls=False), "pythonic"
    )
    assert accepts(c, "[add(a=3)]")
    assert parsed("pythonic", "[add(a=3)]") == [("add", {"a": 3})]
    assert not accepts(c, '[add(a="3")]')  # the schema holds
    assert not accepts(c, "[add(a=3, b=4)]")
    assert not accepts(c, "[add()]")  # `a` is required
    assert not accepts(c, "[note(text='x')]")
    assert not accepts(c, "[add(a=x)]")  # literals only
    assert not accepts(c, "[add(a=1), add(a=2)]")
    assert not accepts(c, "Sure. [add(a=1)]")
    both = structured_constraint(request(ADD, NOTE, tool_choice="required"), "pythonic")
    assert accepts(both, '[add(a=1), note(text="x")]')
    assert accepts(both, "[note()]")  # `text` is optional
    assert not accepts(both, "[note(text=1)]")
    assert parsed("pythonic", '[add(a=1), note(text="x")]') == [("add", {"a": 1}), ("note", {"text": "x"})]


def test_pythonic_free_calls_open_the_output_or_it_is_text() -> None:
    c = structured_constraint(request(ADD, DIGITS, parallel_tool_calls=False), "pythonic")
    assert accepts(c, "An answer [with brackets].")
    assert accepts(c, '[digits(input="123")]') and not accepts(c, '[digits(input="1")]')
    assert not accepts(c, "[add(a=1), add(a=2)]")
    assert not accepts(c, "[anything else")  # text may not open like a call


def test_llama3_json_free_text_cannot_open_like_a_call() -> None:
    c = structured_constraint(request(ADD), "llama3_json")
    assert not accepts(c, '{"answer": 42}')
    assert not accepts(c, 'Sure: <|python_tag|>{"name": "add", "parameters": {"a": "x"}}')
    assert accepts(c, "Sure: <|python_tag|>print(1)")  # raw code for the code interpreter stays free


def test_markdown_forces_only_the_code_interpreter() -> None:
    assert (
        structured_constraint(request(CODE, ADD, tool_choice=ForcedTool("python")), "markdown_code") is None
    )
    assert structured_constraint(request(CODE, ADD, tool_choice="required"), "markdown") is None  # prefilled
    for choice in (ForcedTool("add"), "required"):
        with pytest.raises(EngineRejected, match="tool_choice cannot force a call to a function"):
            structured_constraint(request(ADD, tool_choice=choice), "markdown_code")


def test_the_fallback_forces_hermes_calls_and_leaves_free_calls_alone() -> None:
    write = JSON_FORMATS["hermes"][0]
    c = structured_constraint(request(ADD, tool_choice="required"), "auto")
    assert accepts(c, write("add", '{"a": 1}')) and not accepts(c, write("add", "{}"))
    assert parsed("auto", write("add", '{"a": 1}')) == [("add", {"a": 1})]
    assert structured_constraint(request(ADD), "auto") is None  # free calls: any format, unconstrained


def test_a_format_that_writes_no_calls_cannot_force() -> None:
    with pytest.raises(EngineRejected, match="tool_choice cannot force a call with the 'none'"):
        structured_constraint(request(ADD, tool_choice="required"), "none")


def test_formats_whose_markers_are_special_tokens_keep_them_in_the_text() -> None:
    from vllm_responses.engine.sampling import with_format_tokens
    from vllm_responses.engine.types import Sampling

    assert not with_format_tokens(Sampling(), "mistral").skip_special_tokens
    assert not with_format_tokens(Sampling(), "harmony").skip_special_tokens
    assert with_format_tokens(Sampling(), "hermes").skip_special_tokens


def test_mistral_free_calls_may_use_the_pre_v11_list_held_too() -> None:
    c = structured_constraint(request(ADD, NOTE), "mistral")
    old = '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1}}]'
    assert accepts(c, "Sure. " + old) and parsed("mistral", old) == [("add", {"a": 1})]
    assert not accepts(c, '[TOOL_CALLS][{"name": "add", "arguments": {"a": "1"}}]')
    forced = structured_constraint(request(ADD, tool_choice="required"), "mistral")
    assert not accepts(forced, old)  # forced calls use the v11 spelling
