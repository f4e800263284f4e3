"""How each tool-call format writes a call, as the grammars of `call_tags.py` need it (one `CallShape` per
format, looked up by parser name; `docs/parsers.md` has the table)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from vllm_responses.engine.types import CODE_TOOL_NAME, ToolSpec

__all__ = ["CallShape", "FORCED_ONLY", "SHAPES", "call_shape"]


@dataclass(frozen=True)
class CallShape:
    """One format's calls: `spellings` are (opening, closings) pairs, `{name}` / `{qname}` standing for the tool's
    name bare / JSON-quoted; forced calls write the first, free calls may write any. Arguments are a JSON
    object (`json`) or Python keyword arguments (`pythonic`).

    - `separator` goes between calls, `wrap` around them all; `several`: more than one call can be written
      in one model call.
    - `triggers`: where a free call opens in free text; empty: calls only at the start of the output, and
      free text there may not start with one of `text_first_not` nor contain one of `text_excludes`.
    - `code_opening`: raw code calls to the code interpreter (its arguments are not JSON).
    - `answer_opening`: what opens a final answer that must be JSON (`call_tags.calls_or_json_tag`): harmony
      writes it in the final channel; other formats write the JSON bare.
    """

    spellings: tuple[tuple[str, tuple[str, ...]], ...]
    arguments: Literal["json", "pythonic"] = "json"
    separator: str = ""  # text between calls would be a message item of its own
    wrap: tuple[str, str] = ("", "")
    several: bool = True
    triggers: tuple[str, ...] = ()
    text_first_not: str = ""
    text_excludes: tuple[str, ...] = ()
    code_opening: str | None = None
    answer_opening: str = ""

    def openings(self, tool: ToolSpec, *, forced: bool) -> list[tuple[str, tuple[str, ...]]]:
        """(opening, closings) of calls to `tool` in this format."""
        spellings = self.spellings[:1] if forced else self.spellings
        if self.code_opening is not None and tool.code_interpreter and tool.name == CODE_TOOL_NAME:
            return [(self.code_opening, spellings[0][1])]
        return [
            (opening.replace("{qname}", json.dumps(tool.name)).replace("{name}", tool.name), closings)
            for opening, closings in spellings
        ]


# `<|call|>` is a stop token of gpt-oss (never text under a grammar): a call may end at the output's end.
_HARMONY_ENDS = ("<|call|>", "")
_HARMONY_FUNCTION = "<|channel|>{channel} to=functions.{name} <|constrain|>json<|message|>"

HERMES = CallShape(
    spellings=(
        ('<tool_call>\n{"name": {qname}, "arguments": ', ("}\n</tool_call>",)),
        ('<tool_call>{"name": {qname}, "arguments": ', ("}</tool_call>",)),
    ),
    triggers=("<tool_call>",),
)
FUNCTION_TAG = CallShape(spellings=(("<function={name}>", ("</function>",)),), triggers=("<function=",))
LLAMA3_JSON = CallShape(
    spellings=(('{"name": {qname}, "parameters": ', ("}",)),),
    text_first_not="{[",
    text_excludes=("<|python_tag|>{", "<|python_tag|>[", "<|python_tag|> {", "<|python_tag|>\n{"),
)
PYTHONIC = CallShape(
    spellings=(("{name}(", (")",)),),
    arguments="pythonic",
    separator=", ",
    wrap=("[", "]"),
    text_first_not="[",
)
MISTRAL = CallShape(
    spellings=(
        ("[TOOL_CALLS]{name}[ARGS]", ("",)),
        ('[TOOL_CALLS][{"name": {qname}, "arguments": ', ("}]",)),  # before v11: a list (of one, held)
    ),
    triggers=("[TOOL_CALLS]",),
)
HARMONY = CallShape(
    spellings=(
        (_HARMONY_FUNCTION.replace("{channel}", "commentary"), _HARMONY_ENDS),
        (_HARMONY_FUNCTION.replace("{channel}", "analysis"), _HARMONY_ENDS),
    ),
    several=False,
    triggers=("<|channel|>commentary to=", "<|channel|>analysis to="),
    code_opening="<|channel|>analysis to=python code<|message|>",
    answer_opening="<|channel|>final<|message|>",
)

# Parser name (aliases included) -> its shape. The markdown formats have none: their one call, the code
# interpreter's, is forced by a prefill (engine/prompt.py).
SHAPES: dict[str, CallShape] = {
    **dict.fromkeys(("hermes", "qwen", "qwen2_5", "qwen3"), HERMES),
    **dict.fromkeys(("function_tag", "llama3_function_tag"), FUNCTION_TAG),
    **dict.fromkeys(("llama3_json", "json", "llama4_json"), LLAMA3_JSON),
    **dict.fromkeys(("pythonic", "llama4_pythonic"), PYTHONIC),
    **dict.fromkeys(("harmony", "openai", "gpt_oss"), HARMONY),
    "mistral": MISTRAL,
}


# Formats that read several call formats: forced calls are written in Hermes tags (which they read), free
# calls are left alone (the model may use any of the formats they read).
FORCED_ONLY: dict[str, CallShape] = dict.fromkeys(("auto", "fallback"), HERMES)


def call_shape(parser_name: str, *, forced: bool = False) -> CallShape | None:
    """The shape of calls (`forced` ones) in the format of `parser_name`, or None for a format no grammar
    writes."""
    return SHAPES.get(parser_name) or (FORCED_ONLY.get(parser_name) if forced else None)
