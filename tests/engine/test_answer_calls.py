"""`text.format` beside tools in `VLLMEngine`'s model calls (over a stub vLLM): the constraint each call gets
where the format writes no calls of its own (a vLLM-only parser name, the markdown code prefill)."""

from __future__ import annotations

import json
from typing import Any

from tests.engine.test_reasoning_flag import StubLLM, StubTokenizer
from vllm_responses.engine.types import (
    GenerateRequest,
    Message,
    Sampling,
    ToolCall,
    ToolResult,
    ToolSpec,
    code_tool_spec,
)

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
FORMAT = {"type": "json_schema", "name": "a", "schema": SCHEMA}
ADD = ToolSpec("add", "", {"type": "object", "properties": {"a": {"type": "integer"}}})


class VocabTokenizer(StubTokenizer):
    """The stub tokenizer with the vocabulary vLLM's parsers look their markers up in."""

    def get_vocab(self) -> dict[str, int]:
        return {"<tool_call>": 1, "</tool_call>": 2}


class VocabLLM(StubLLM):
    def get_tokenizer(self) -> VocabTokenizer:
        return VocabTokenizer()


def _call(parser: str, *turns: Any, tools: tuple[ToolSpec, ...]) -> tuple[str, Any, Any]:
    """(prefill, parser class name, SamplingParams) of one model call."""
    from vllm_responses.engine.vllm import VLLMEngine

    engine = VLLMEngine(VocabLLM(), "m", tool_parser=parser)  # type: ignore[arg-type]
    request = GenerateRequest(
        "r", (Message("user", "hi"), *turns), tools=tools, sampling=Sampling(text_format=FORMAT)
    )
    _ids, prefill, out_parser, params = engine._call(request)
    return prefill, type(out_parser).__name__, params


def test_a_vllm_only_format_writes_hermes_calls_or_the_json() -> None:
    _prefill, parser, params = _call("qwen3_xml", tools=(ADD,))
    tag = json.loads(params.structured_outputs.structural_tag)["format"]
    assert tag["type"] == "or" and tag["elements"][1] == {"type": "json_schema", "json_schema": SCHEMA}
    assert parser == "HermesParser"


def test_markdown_prefills_the_code_call_then_holds_the_answer() -> None:
    prefill, _parser, params = _call("markdown_code", tools=(code_tool_spec(),))
    assert prefill == "```python\n" and params.structured_outputs is None  # the code call is free
    ran = (ToolCall("c1", "python", '{"code": "print(1)"}'), ToolResult("c1", "python", "1\n"))
    prefill, parser, params = _call("markdown_code", *ran, tools=(code_tool_spec(),))
    assert prefill == "" and parser == "PlainTextParser"
    assert params.structured_outputs.json == SCHEMA
    assert "\n\n" not in (params.stop or [])  # the JSON ends the answer, not a blank line
