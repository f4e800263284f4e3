"""What the grammar tests share: a one-message request offering some tools, and whether a structural tag's
grammar (as xgrammar compiles it) accepts a text."""

from __future__ import annotations

from typing import Any

from vllm_responses.engine.types import GenerateRequest, Message, ToolSpec

__all__ = ["accepts", "request"]


def request(*tools: ToolSpec, **kw: Any) -> GenerateRequest:
    return GenerateRequest("r", (Message("user", "hi"),), tools=tools, **kw)


def accepts(constraint: dict[str, Any] | None, text: str) -> bool:
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string

    assert constraint is not None and set(constraint) == {"structural_tag"}
    grammar = xgr.Grammar.from_structural_tag(constraint["structural_tag"])
    return bool(_is_grammar_accept_string(grammar, text))
