"""Unit tests: Sampling / tools / tool_choice -> structured-output constraints and SamplingParams."""

from __future__ import annotations

import json

import pytest

from vllm_responses.engine.base import EngineError, EngineRejected
from vllm_responses.engine.sampling import forced_tools, structured_constraint, to_sampling_params
from vllm_responses.engine.types import (
    ForcedTool,
    GenerateRequest,
    Message,
    Sampling,
    ToolSpec,
    code_tool_spec,
)

WEATHER = ToolSpec(
    "get_weather",
    "Weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TURNS = (Message("user", "hi"),)


def req(**kw) -> GenerateRequest:
    return GenerateRequest(request_id="r", turns=TURNS, **kw)


def test_free_decoding_has_no_constraint():
    assert structured_constraint(req(), "hermes") is None
    assert structured_constraint(req(tools=(WEATHER,)), "hermes") is None


def test_text_format_json_schema_and_object():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    fmt = {"type": "json_schema", "name": "x", "schema": schema}
    assert structured_constraint(req(sampling=Sampling(text_format=fmt)), "hermes") == {"json": schema}
    obj = Sampling(text_format={"type": "json_object"})
    assert structured_constraint(req(sampling=obj), "hermes") == {"json_object": True}
    assert structured_constraint(req(sampling=Sampling(text_format={"type": "text"})), "hermes") is None


def test_structured_extension_wins_over_forced_tool_and_text_format():
    s = Sampling(structured={"regex": "a+"}, text_format={"type": "json_object"})
    r = req(sampling=s, tools=(WEATHER,), tool_choice="required")
    assert structured_constraint(r, "hermes") == {"regex": "a+"}


@pytest.mark.parametrize(
    "bad",
    [{}, {"regex": "a", "json": {}}, {"choice": []}, {"regex": ""}, {"nope": 1}, {"json": 3}],
)
def test_bad_structured_is_a_400(bad):
    with pytest.raises(EngineError) as ei:
        structured_constraint(req(sampling=Sampling(structured=bad)), "hermes")
    assert isinstance(ei.value, EngineRejected)


def test_forced_tool_choices():
    code = code_tool_spec()
    assert forced_tools(req(tools=(WEATHER, code), tool_choice="auto")) == ()
    assert forced_tools(req(tools=(WEATHER, code), tool_choice="required")) == (WEATHER, code)
    assert forced_tools(req(tools=(WEATHER, code), tool_choice=ForcedTool("python"))) == (code,)
    assert forced_tools(req(tool_choice="required")) == ()
    with pytest.raises(EngineError):
        forced_tools(req(tools=(WEATHER,), tool_choice=ForcedTool("python")))


def test_forced_hermes_call_is_a_structural_tag_xgrammar_accepts():
    xgr = pytest.importorskip("xgrammar")
    tok_info = xgr.TokenizerInfo([chr(i) for i in range(32, 127)] + ["\n"])
    code = '<tool_call>\n{"name": "python", "arguments": {"code": "print(6*7)"}}\n</tool_call>'
    weather = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'

    def matcher(parallel: bool):
        r = req(tools=(WEATHER, code_tool_spec()), tool_choice="required", parallel_tool_calls=parallel)
        c = structured_constraint(r, "hermes")
        assert c is not None and set(c) == {"structural_tag"}
        assert len(json.loads(c["structural_tag"])["format"]["tags"]) == 2
        compiled = xgr.GrammarCompiler(tok_info).compile_grammar(
            xgr.Grammar.from_structural_tag(c["structural_tag"])
        )
        return xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)

    one = matcher(parallel=False)
    assert one.accept_string(code) and one.is_terminated()  # exactly one call, then the end
    assert not one.accept_string("\n" + weather)
    one.reset()
    assert not one.accept_string('<tool_call>\n{"name": "nope"')
    one.reset()
    assert not one.accept_string("free text first")
    many = matcher(parallel=True)
    assert many.accept_string(code + weather)  # back to back: text between calls would be a message item
    many.reset()
    assert not many.accept_string(weather.replace('"Paris"', "3"))  # arguments follow the schema


def test_forced_markdown_call_relies_on_prefill():
    r = req(tools=(code_tool_spec(),), tool_choice=ForcedTool("python"))
    assert structured_constraint(r, "markdown_code") is None


def test_to_sampling_params_fields():
    from vllm.sampling_params import RequestOutputKind

    p = to_sampling_params(
        Sampling(temperature=0.5, top_p=0.9, seed=7), max_tokens=12, structured={"regex": "a+"}, stop=["```"]
    )
    assert p.output_kind == RequestOutputKind.DELTA
    assert (p.max_tokens, p.temperature, p.top_p, p.seed, p.stop) == (12, 0.5, 0.9, 7, ["```"])
    assert p.structured_outputs is not None and p.structured_outputs.regex == "a+"
    plain = to_sampling_params(Sampling(), max_tokens=3)
    assert plain.structured_outputs is None and plain.stop == [] and plain.temperature == 1.0


def test_to_sampling_params_vllm_extensions_and_generation_defaults():
    sampling = Sampling(
        top_p=0.5,
        top_k=3,
        min_p=0.1,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        repetition_penalty=1.3,
        stop=("END",),
        stop_token_ids=(9,),
        ignore_eos=True,
        min_tokens=2,
        logit_bias={5: 1.5},
        include_stop_str_in_output=True,
        skip_special_tokens=False,
    )
    p = to_sampling_params(sampling, max_tokens=8, stop=["```"], defaults={"temperature": 0.6, "top_p": 0.9})
    assert (p.temperature, p.top_p, p.top_k, p.min_p) == (0.6, 0.5, 3, 0.1)  # a sent value wins
    assert (p.presence_penalty, p.frequency_penalty, p.repetition_penalty) == (0.5, -0.5, 1.3)
    assert (p.stop, p.stop_token_ids, p.ignore_eos, p.min_tokens) == (["END", "```"], [9], True, 2)
    assert (p.logit_bias, p.include_stop_str_in_output, p.skip_special_tokens) == ({5: 1.5}, True, False)
    plain = to_sampling_params(Sampling(), max_tokens=3, defaults={"top_k": 20, "max_tokens": 99})
    assert (plain.top_k, plain.max_tokens, plain.min_tokens, plain.ignore_eos) == (20, 3, 0, False)


def test_to_sampling_params_bad_values_are_400():
    with pytest.raises(EngineError) as ei:
        to_sampling_params(Sampling(temperature=-1.0), max_tokens=3)
    assert isinstance(ei.value, EngineRejected)
