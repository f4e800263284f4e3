"""Tool-call parsers: incremental decoders from model text to text / reasoning / tool-call deltas."""

from __future__ import annotations

from vllm_responses.engine.parsers import (  # noqa: F401  (importing registers the parsers)
    fallback,
    function_tag,
    harmony,
    hermes,
    json_calls,
    markdown,
    mistral,
    python_tag,
    pythonic,
)
from vllm_responses.engine.parsers.base import PlainTextParser, ToolParser, get_parser, parser_names, register
from vllm_responses.engine.parsers.select import pick_parser

__all__ = ["PlainTextParser", "ToolParser", "get_parser", "parser_names", "pick_parser", "register"]
