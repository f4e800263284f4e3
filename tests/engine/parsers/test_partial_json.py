"""Tests for the incremental JSON string-field decoder and the JSON repairer."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_responses.engine.parsers.partial_json import JsonStringField
from vllm_responses.engine.parsers.repair import JsonRepairer, repair_json

code_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("\"\\\n\t\r{}[],: code'é€😀\u2028/")),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=60,
)


def chunk(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces, prev = [], 0
    for p in points + [len(text)]:
        pieces.append(text[prev:p])
        prev = p
    return pieces


def run_field(pieces: list[str], field: str = "code") -> tuple[str, JsonStringField]:
    f = JsonStringField(field)
    out = "".join(f.feed(p) for p in pieces) + f.finish()
    return out, f


@settings(max_examples=300)
@given(
    s=code_text,
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    ascii_=st.booleans(),
    before=st.sampled_from([{}, {"lang": "py"}, {"x": {"code": "no"}, "y": ["code", {"code": 1}]}]),
    after=st.sampled_from([{}, {"z": 1}, {"t": '"code": "x"'}]),
    indent=st.sampled_from([None, 2]),
)
def test_any_chunking_decodes_the_code(s, cuts, ascii_, before, after, indent):
    text = json.dumps({**before, "code": s, **after}, ensure_ascii=ascii_, indent=indent)
    out, f = run_field(chunk(text, cuts))
    assert out == s
    assert f.value == s
    assert f.done


@pytest.mark.parametrize("split", range(1, 20))
def test_surrogate_pair_split_everywhere(split):
    text = '{"code": "a\\ud83d\\ude00b\\u00e9\\\\"}'
    out, _ = run_field([text[:split], text[split:]])
    assert out == "a😀bé\\"


def test_never_emits_partial_escape():
    f = JsonStringField()
    assert f.feed('{"code": "x\\') == "x"
    assert f.feed("u00") == ""
    assert f.feed("e9") == "é"
    assert f.feed("\\ud83d") == ""
    assert f.feed('\\ude00"}') == "😀"
    assert f.done


def test_field_name_inside_other_strings_and_nesting():
    text = '{"note": "\\"code\\": \\"bad\\"", "nested": {"code": "bad"}, "arr": ["code", "x"], "code": "ok"}'
    assert run_field([text])[0] == "ok"


def test_missing_or_non_string_field_emits_nothing():
    assert run_field(['{"code": 12, "other": "x"}'])[0] == ""
    assert run_field(['{"other": "x"}'])[0] == ""
    assert run_field(["not json"])[0] == ""
    f = JsonStringField()
    f.feed('{"code": "abc')
    assert not f.done and f.value == "abc"


def test_other_field_name():
    assert run_field(['{"query": "q", "text": "hi"}'], field="text")[0] == "hi"


@pytest.mark.parametrize(
    ("bad", "good"),
    [
        ('{"a": 1,}', {"a": 1}),
        ('{"a": [1, 2,],}', {"a": [1, 2]}),
        ("{'a': 'it\\'s \"q\"'}", {"a": 'it\'s "q"'}),
        ('{"a": True, "b": False, "c": None}', {"a": True, "b": False, "c": None}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("```\n{'a': 1}", {"a": 1}),
        ('{"code": "print(1)\nprint(2)"}', {"code": "print(1)\nprint(2)"}),
        ('{"code": "print(\'hi\')', {"code": "print('hi')"}),
        ('{"a": {"b": [1, {"c": "d', {"a": {"b": [1, {"c": "d"}]}}),
        ('{"a": "x\\d"}', {"a": "x\\d"}),
        ('{"a": 1 "b": 2}', {"a": 1, "b": 2}),
        ("{a: 1, b_c: 'x'}", {"a": 1, "b_c": "x"}),
        ('{"a"', {"a": None}),
        ('{"a": ', {"a": None}),
        ('{"a": "\\u00', {"a": ""}),
        ('{"a": 1.}', {"a": 1.0}),
        ('{"a": "tab\there"}', {"a": "tab\there"}),
        ('{"a": 1}}', {"a": 1}),
        ('  {"x": "\\u00e9\\ud83d\\ude00"}  ', {"x": "é😀"}),
    ],
)
def test_repair_json(bad, good):
    out = repair_json(bad)
    assert out is not None and json.loads(out) == good, out


@pytest.mark.parametrize("hopeless", ["", "hello", "[1, 2]", '{"a": @}', '{"a" 1}', "42", "{: 1}"])
def test_repair_json_hopeless(hopeless):
    assert repair_json(hopeless) is None


def test_repair_json_array():
    assert json.loads(repair_json("[{'a': 1}, ", allow_array=True)) == [{"a": 1}]


@settings(max_examples=200)
@given(
    obj=st.recursive(
        st.none() | st.booleans() | st.integers() | code_text,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(code_text, c, max_size=3),
        max_leaves=8,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
)
def test_repairer_is_identity_on_valid_json_any_chunking(obj, cuts):
    text = json.dumps({"k": obj}, ensure_ascii=False)
    r = JsonRepairer()
    out = "".join(r.feed(p) for p in chunk(text, cuts)) + r.close()
    assert r.ok
    assert json.loads(out) == {"k": obj}
    assert r.completed == {"k"}
    assert json.loads(r.values["k"]) == obj


def test_the_escape_table_is_json_s() -> None:
    from vllm_responses.engine.parsers.json_text import CONTROL_ESCAPES, ESCAPES

    for c in map(chr, range(0x20, 0x7F)):
        try:
            decoded = json.loads(f'"\\{c}"')
        except ValueError:
            assert c not in ESCAPES
        else:
            assert ESCAPES[c] == decoded
    for char, escape in CONTROL_ESCAPES.items():
        assert json.dumps(char) == f'"{escape}"'
    assert set(CONTROL_ESCAPES) == {c for c in map(chr, range(0x20)) if len(json.dumps(c)) == 4}
