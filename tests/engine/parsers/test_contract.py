"""The shared contract: every parser, any chunking, same result as one-shot and as expected."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_responses.engine.parsers import get_parser, parser_names

from .helpers import run, split_at, summarize

CODE = 'print("héllo\\n", {"a": [1]})\nx = \'\\\\\' + "😀"'
CODE_JSON = (
    '{"code": "print(\\"h\\u00e9llo\\\\n\\", {\\"a\\": [1]})\\nx = \'\\\\\\\\\' + \\"\\ud83d\\ude00\\""}'
)

# (parser, model output, expected calls, expected text[, expected reasoning])
CASES: list[tuple] = [
    ("none", "just text <tool_call>", [], "just text <tool_call>"),
    ("hermes", "plain answer", [], "plain answer"),
    (
        "hermes",
        'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        [("get_weather", {"city": "Paris"})],
        "Let me check.\n",
    ),
    (
        "hermes",
        f'<tool_call>{{"name": "python", "arguments": {CODE_JSON}}}</tool_call>a<tool_call>'
        '{"arguments": {"x": "}{"}, "name": "g"}</tool_call>',
        [("python", {"code": CODE}), ("g", {"x": "}{"})],
        "a",
    ),
    ("hermes", "<tool_call>{'name': 'f', 'arguments': {'a': True,},}</tool_call>", [("f", {"a": True})], ""),
    ("hermes", "x<tool_call>not json at all</tool_call>y", [], "x<tool_call>not json at all</tool_call>y"),
    ("hermes", '<tool_call>{"name": "f", "arguments": {"a": "open', [("f", {"a": "open"})], ""),
    ("hermes", '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>', [("f", {"a": 1})], ""),
    ("hermes", '<tool_call>{"city": "Paris"}</tool_call>', [], '<tool_call>{"city": "Paris"}</tool_call>'),
    ("function_tag", 'a <function=get_w>{"city": "P"}</function> b', [("get_w", {"city": "P"})], "a  b"),
    ("function_tag", "a <function=x y>{}</function>", [], "a <function=x y>{}</function>"),
    ("function_tag", "<function=f></function>", [("f", {})], ""),
    ("llama3_json", '{"name": "f", "parameters": {"a": 1}}', [("f", {"a": 1})], ""),
    (
        "llama3_json",
        ' [{"name": "f", "parameters": {"a": 1}}, {"type": "function", "name": "g", "parameters": {}}]',
        [("f", {"a": 1}), ("g", {})],
        "",
    ),
    ("llama3_json", '<|python_tag|>{"name": "f", "parameters": {}}<|eom_id|>', [("f", {})], ""),
    ("llama3_json", '{"answer": 42}', [], '{"answer": 42}'),
    ("llama3_json", 'Here: {"name": "f", "parameters": {}}', [], 'Here: {"name": "f", "parameters": {}}'),
    ("json", '{"name": "f", "arguments": {"q": "a\\"b"}}', [("f", {"q": 'a"b'})], ""),
    (
        "pythonic",
        '[get_weather(city="Paris"), f(x=[1, 2], y=None)]',
        [("get_weather", {"city": "Paris"}), ("f", {"x": [1, 2], "y": None})],
        "",
    ),
    ("pythonic", "[1] is a citation", [], "[1] is a citation"),
    ("pythonic", "No calls here [f(a=1)]", [], "No calls here [f(a=1)]"),
    ("llama3_python_tag", f"Sure.<|python_tag|>{CODE}\n<|eom_id|>", [("python", {"code": CODE})], "Sure."),
    ("llama3_python_tag", "<|python_tag|>import os", [("python", {"code": "import os"})], ""),
    ("llama3_python_tag", '<|python_tag|>{"name": "f", "parameters": {"a": 2}}', [("f", {"a": 2})], ""),
    (
        "markdown_code",
        f"Compute:\n```python\n{CODE}\n```\nDone",
        [("python", {"code": CODE})],
        "Compute:\n\nDone",
    ),
    ("markdown_code", "```py\nx = 1\n", [("python", {"code": "x = 1"})], ""),
    ("markdown_code", "```bash\nls\n```", [], "```bash\nls\n```"),
    ("markdown_code", "use `x` or ```y```", [], "use `x` or ```y```"),
    (
        "harmony",
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hi<|return|>",
        [],
        "Hi",
        "Think.",
    ),
    (
        "harmony",
        '<|channel|>commentary to=functions.get_w <|constrain|>json<|message|>{"city": "P"}<|call|>',
        [("get_w", {"city": "P"})],
        "",
    ),
    (
        "harmony",
        f"<|channel|>analysis<|message|>Run it.<|end|><|start|>assistant<|channel|>analysis to=python code"
        f"<|message|>{CODE}<|call|>",
        [("python", {"code": CODE})],
        "",
        "Run it.",
    ),
    ("harmony", "Just final text", [], "Just final text"),
    (
        "mistral",
        'Sure.[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]',
        [("f", {"a": 1}), ("g", {})],
        "Sure.",
    ),
    (
        "mistral",
        f'[TOOL_CALLS]get_w[ARGS]{{"city": "P"}}[TOOL_CALLS]python[ARGS]{CODE_JSON}',
        [("get_w", {"city": "P"}), ("python", {"code": CODE})],
        "",
    ),
    ("mistral", '[TOOL_CALLS]f{"x": "}{"} done', [("f", {"x": "}{"})], " done"),
    ("mistral", "[TOOL_CALLS]f[ARGS]", [("f", {})], ""),
    ("mistral", "a [TOOL_CALLS] b c", [], "a [TOOL_CALLS] b c"),
    ("mistral", '[TOOL_CALLS]{"answer": 1} x', [], '[TOOL_CALLS]{"answer": 1} x'),
    ("mistral", "[TOOL_CALLS]", [], "[TOOL_CALLS]"),
    (
        "auto",
        f'<tool_call>{{"name": "f", "arguments": {{}}}}</tool_call>\n```python\n{CODE}\n```',
        [("f", {}), ("python", {"code": CODE})],
        "\n",
    ),
    ("auto", "[f(a=1)] then", [("f", {"a": 1})], " then"),
    ("auto", '[{"name": "f", "arguments": {"b": 2}}]', [("f", {"b": 2})], ""),
    ("auto", '{"result": 3}', [], '{"result": 3}'),
    ("auto", "[not a call", [], "[not a call"),
    (
        "auto",
        '<function=f>{"a": 1}</function><|python_tag|>print(2)',
        [("f", {"a": 1}), ("python", {"code": "print(2)"})],
        "",
    ),
]

TAGS = re.compile(r"<\|?/?[a-z_]+\|?>|<function=|```|<\|[a-z_]+\|>|\[TOOL_CALLS\]|\[ARGS\]")


def expected(case: tuple) -> tuple:
    return case[2], case[3], case[4] if len(case) > 4 else ""


def check(case: tuple, chunks: list[str]) -> None:
    r = summarize(run(case[0], chunks))
    calls, text, reasoning = expected(case)
    assert (r.calls, r.text, r.reasoning) == (calls, text, reasoning)


IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_one_shot(case):
    check(case, [case[1]])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_one_char_at_a_time(case):
    check(case, list(case[1]))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_split_at_every_tag_boundary(case):
    text = case[1]
    for m in TAGS.finditer(text):
        for p in range(m.start(), m.end() + 1):
            check(case, [text[:p], text[p:]])


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=100_000), max_size=15))
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_random_split_points(case, cuts):
    check(case, split_at(case[1], cuts))


@pytest.mark.parametrize("name", parser_names())
def test_every_parser_keeps_plain_text_and_never_raises(name):
    r = summarize(run(name, list("Hello, world! 1 < 2 and 3 > 2.")))
    assert r.text + r.reasoning == "Hello, world! 1 < 2 and 3 > 2."
    assert r.calls == []
    for junk in ["<tool_call>{", "```python", "<|python_tag|>", "[", "{", "<function=", "<|channel|>"]:
        summarize(run(name, [junk]))
        summarize(run(name, list(junk)))


@pytest.mark.parametrize("name", parser_names())
def test_every_parser_is_covered(name):
    assert any(get_parser(c[0]) is get_parser(name) for c in CASES)


PIECES = [
    "<tool_call>",
    "</tool_call>",
    "<function=f>",
    "</function>",
    "<|python_tag|>",
    "<|eom_id|>",
    "```python\n",
    "```",
    "<|start|>",
    "assistant",
    "<|channel|>",
    "analysis",
    "final",
    " to=functions.f",
    " to=python",
    "<|message|>",
    "<|end|>",
    "<|call|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    '{"name": "f", ',
    '"arguments": {',
    '"code": "x\\n',
    "'",
    '"',
    "}",
    "]",
    "[",
    "{",
    ",",
    ":",
    "f(a=1)",
    "True",
    "\\",
    "\\u00",
    "e9",
    " ",
    "\n",
    "text",
    "😀",
]


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(st.sampled_from(PIECES), max_size=25),
    cuts=st.lists(st.integers(min_value=0, max_value=100_000), max_size=10),
)
@pytest.mark.parametrize("name", sorted({get_parser(n).name for n in parser_names()}))
def test_fuzz_any_chunking_same_result(name, parts, cuts):
    text = "".join(parts)
    one = summarize(run(name, [text]))
    assert summarize(run(name, split_at(text, cuts))) == one
    assert summarize(run(name, list(text))) == one
