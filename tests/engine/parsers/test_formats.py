"""Per-format edge cases, streaming granularity, rendering, reasoning split and parser selection."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_responses.engine.parsers import get_parser, pick_parser
from vllm_responses.engine.parsers.reasoning import ReasoningSplitter
from vllm_responses.engine.types import (
    CODE_TOOL_NAME,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
)

from .helpers import run, split_at, summarize


def test_hermes_streams_code_before_the_closing_tag():
    p = get_parser("hermes")()
    out = p.feed('<tool_call>{"name": "python", "arguments": {"code": "pri')
    assert out[0] == ToolCallStart(0, "python")
    assert out[1] == ToolCallDelta(0, '{"code":"pri')
    assert p.feed("nt(1)") == [ToolCallDelta(0, "nt(1)")]


def test_hermes_partial_tag_at_chunk_end():
    p = get_parser("hermes")()
    assert p.feed("Hi <tool_") == [TextDelta("Hi ")]
    assert p.feed('call>{"name": "f", "arguments": {}}</tool_call>')[0] == ToolCallStart(0, "f")
    p = get_parser("hermes")()
    assert p.feed("a <tool_") == [TextDelta("a ")]
    assert p.feed("box>") == [TextDelta("<tool_box>")]


def test_hermes_nested_braces_and_tags_in_strings():
    text = '<tool_call>{"name": "f", "arguments": {"s": "} ] </tool_ {\\"name\\": 1}", "n": {"m": [{}]}}}</tool_call>'
    assert summarize(run("hermes", list(text))).calls == [
        ("f", {"s": '} ] </tool_ {"name": 1}', "n": {"m": [{}]}})
    ]


def test_hermes_unicode_escapes_split():
    text = '<tool_call>{"name": "f", "arguments": {"s": "\\u00e9\\ud83d\\ude00"}}</tool_call>'
    for i in range(len(text)):
        assert summarize(run("hermes", [text[:i], text[i:]])).calls == [("f", {"s": "é😀"})]


def test_hermes_repairs_raw_newlines_in_code():
    text = (
        '<tool_call>{"name": "python", "arguments": {"code": "for i in range(3):\n    print(i)"}}</tool_call>'
    )
    assert summarize(run("hermes", [text])).calls == [
        ("python", {"code": "for i in range(3):\n    print(i)"})
    ]


def test_markdown_prefill_then_code_streams_line_by_line():
    p = get_parser("markdown_code")()
    assert p.feed("```python\n") == [ToolCallStart(0, CODE_TOOL_NAME), ToolCallDelta(0, '{"code": "')]
    assert p.feed("x = 1\n") == [ToolCallDelta(0, "x = 1")]
    assert p.feed('print("x")\n') == [ToolCallDelta(0, '\\nprint(\\"x\\")')]
    end = p.finish()
    assert end[0] == ToolCallDelta(0, '"}')


def test_markdown_render():
    p = get_parser("markdown_code")()
    call = ToolCall("c1", CODE_TOOL_NAME, json.dumps({"code": "print(1)"}))
    assert p.render_call(call) == "```python\nprint(1)\n```"
    assert p.render_result(ToolResult("c1", CODE_TOOL_NAME, "1")) == (
        "<tool_response>\n1\n</tool_response>\n"
        "That is what the code printed. Answer my question with it, in words."
    )


def test_harmony_render_round_trip():
    p = get_parser("harmony")()
    code = ToolCall("c", CODE_TOOL_NAME, json.dumps({"code": "print(1)"}))
    fn = ToolCall("d", "get_w", '{"city": "P"}')
    text = p.render_call(code) + p.render_call(fn)
    assert summarize(run("harmony", [text])).calls == [
        ("python", {"code": "print(1)"}),
        ("get_w", {"city": "P"}),
    ]
    assert p.render_result(ToolResult("c", CODE_TOOL_NAME, "1")).startswith("<|start|>python to=assistant")
    assert p.render_result(ToolResult("d", "get_w", "x")).startswith("<|start|>functions.get_w to=assistant")


def test_harmony_starts_mid_message_and_streams_reasoning():
    p = get_parser("harmony")()
    assert p.feed("<|chan") == []
    assert p.feed("nel|>analysis<|message|>Let") == [ReasoningDelta("Let")]
    assert p.feed(" me<|en") == [ReasoningDelta(" me")]


def test_pythonic_positional_args_are_text():
    assert summarize(run("pythonic", ["[f(1)]"])).text == "[f(1)]"


def test_python_tag_code_starting_with_bracket_is_code():
    assert summarize(run("llama3_python_tag", ["<|python_tag|>[x for x in 'ab']"])).calls == [
        ("python", {"code": "[x for x in 'ab']"})
    ]


def test_python_tag_code_is_escaped_in_pieces():
    p = get_parser("llama3_python_tag")()
    out = p.feed('<|python_tag|>print("a")')
    assert out == [ToolCallStart(0, "python"), ToolCallDelta(0, '{"code": "print(\\"a\\")')]


@pytest.mark.parametrize(
    ("template", "model", "expected"),
    [
        ("{% for m in messages %}<tool_call>{{ tools }}</tool_call>", "", "hermes"),
        ("<|start|>{{ m.role }}<|channel|>final<|message|>", "", "harmony"),
        ("{% if tools %}<|python_tag|>{% endif %}ipython", "", "llama3_json"),
        ("{{ '[TOOL_CALLS]' }} {% if tools %}", "", "mistral"),
        ("<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>", "", "markdown_code"),
        ("{% if tools %}{{ tools | tojson }}{% endif %}", "", "auto"),
        (None, "openai/gpt-oss-20b", "harmony"),
        (None, "Qwen/Qwen2.5-0.5B-Instruct", "hermes"),
        (None, "HuggingFaceTB/SmolLM2-135M-Instruct", "markdown_code"),
        (None, "unknown", "auto"),
    ],
)
def test_pick_parser(template, model, expected):
    name = pick_parser(template, model)
    assert name == expected
    get_parser(name)


def _split_think(text: str, chunks: list[str], in_reasoning: bool = False):
    p = ReasoningSplitter(get_parser("hermes")(), in_reasoning=in_reasoning)
    out = [d for c in chunks for d in p.feed(c)] + p.finish()
    return summarize(out)


@settings(max_examples=50, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=10))
def test_reasoning_splitter_any_chunking(cuts):
    text = '<think>\nhmm <tool_call> no</think>\n\nOK <tool_call>{"name": "f", "arguments": {}}</tool_call>'
    r = _split_think(text, split_at(text, cuts))
    assert (r.reasoning, r.text, r.calls) == ("\nhmm <tool_call> no", "OK ", [("f", {})])
    r = _split_think("plan</think>answer", split_at("plan</think>answer", cuts), in_reasoning=True)
    assert (r.reasoning, r.text) == ("plan", "answer")
    r = _split_think("<thin", split_at("<thin", cuts))
    assert (r.reasoning, r.text) == ("", "<thin")


code_text = (
    st.text(
        alphabet=st.one_of(
            st.sampled_from(list("\"\\\n\t{}[]<>`|'é😀 ")), st.characters(blacklist_categories=("Cs",))
        ),
        max_size=50,
    )
    .map(str.strip)
    .filter(lambda s: "```" not in s and "<|" not in s and "</" not in s and s[:1] not in "{[")
)


@settings(max_examples=150, deadline=None)
@given(code=code_text, cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
@pytest.mark.parametrize(
    ("parser", "template"),
    [
        ("hermes", '<tool_call>{{"name": "python", "arguments": {args}}}</tool_call>'),
        ("auto", '<tool_call>{{"name": "python", "arguments": {args}}}</tool_call>'),
        ("markdown_code", "Code:\n```python\n{code}\n```"),
        ("auto", "Code:\n```python\n{code}\n```"),
        ("llama3_python_tag", "<|python_tag|>{code}<|eom_id|>"),
        ("harmony", "<|channel|>analysis to=python code<|message|>{code}<|call|>"),
        ("llama3_json", '{{"name": "python", "parameters": {args}}}'),
    ],
)
def test_any_chunking_yields_the_same_code(parser, template, code, cuts):
    text = template.format(code=code, args=json.dumps({"code": code}))
    one = summarize(run(parser, [text]))
    assert one.calls == [("python", {"code": code})]
    assert summarize(run(parser, split_at(text, cuts))) == one


def test_mistral_streams_arguments_as_they_come():
    p = get_parser("mistral")()
    assert p.feed("Ok.[TOOL_CALLS]get_w") == [TextDelta("Ok.")]  # the name may go on
    assert p.feed("[AR") == []  # a partial `[ARGS]`
    out = p.feed('GS]{"city": "Pa')
    assert out[0] == ToolCallStart(0, "get_w") and isinstance(out[1], ToolCallDelta)
    assert p.feed('ris"}[TOOL_CALLS]g{}')[-1] == ToolCallEnd(1)


def test_mistral_not_a_call_keeps_its_marker_as_text():
    r = summarize(run("mistral", list("[TOOL_CALLS]not a name! [TOOL_CALLS][1, 2]")))
    assert r.calls == [] and r.text == "[TOOL_CALLS]not a name! [TOOL_CALLS][1, 2]"
