"""Plain data exchanged with a model: conversation turns and tool specs in, output deltas out.

This is a leaf module (it imports nothing from the package). `context/turns.py` turns Responses API items
into `Turn`s, an engine renders them into a prompt, and the engine's tool-call parser turns the model's
text back into `Delta`s. Everything here is a frozen dataclass; the wire models live in `protocol/`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Union

__all__ = [
    "CODE_TOOL_NAME",
    "CUSTOM_INPUT_KEY",
    "Delta",
    "EngineEvent",
    "Finish",
    "FinishReason",
    "ForcedTool",
    "GenerateRequest",
    "Image",
    "Message",
    "Reasoning",
    "ReasoningDelta",
    "Role",
    "Sampling",
    "TextDelta",
    "TokenLogprob",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolChoice",
    "ToolResult",
    "ToolSpec",
    "Turn",
    "Usage",
    "code_tool_spec",
]

# The name under which the built-in code interpreter is offered to models (a `{"code": str}` tool).
CODE_TOOL_NAME = "python"
# A custom tool is offered to models as a function taking one string, its input, under this key.
CUSTOM_INPUT_KEY = "input"

Role = Literal["system", "developer", "user", "assistant"]


# --- conversation turns (agent loop -> engine) -------------------------------------------------------


@dataclass(frozen=True)
class Image:
    """An image for a vision model: its encoded bytes (PNG, JPEG, WebP or GIF) and their media type."""

    data: bytes
    media_type: str


@dataclass(frozen=True)
class Message:
    """A turn of text, and the images it shows (placed before the text)."""

    role: Role
    text: str
    images: tuple[Image, ...] = ()


@dataclass(frozen=True)
class Reasoning:
    """Reasoning the assistant wrote before its next message or call, given back to templates that take it."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A tool call the assistant made earlier: a function call or a code-interpreter call.

    `arguments` is JSON object text; for the code interpreter it is `{"code": "..."}`.
    """

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned for `call_id` (function output, or code-interpreter logs)."""

    call_id: str
    name: str
    output: str
    images: tuple[Image, ...] = ()  # images the tool returned (screenshots, the interpreter's plots)


Turn = Union[Message, Reasoning, ToolCall, ToolResult]


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model. `parameters` is a JSON schema for the arguments object. A custom tool
    (`custom`) takes `{"input": str}`; `grammar`, when set, is its input's `(syntax, definition)`, syntax
    "lark" or "regex" (tools/functions.py)."""

    name: str
    description: str
    parameters: dict[str, Any]
    code_interpreter: bool = False
    strict: bool = False
    custom: bool = False
    grammar: tuple[str, str] | None = None
    namespace: str | None = None  # a tool of a `namespace` tool, offered as `{namespace}__{its name}`
    call_type: str | None = None  # a coding tool's item type ("shell_call", ...: tools/shell_patch.py)
    web_search: bool = False  # the web search the server runs (tools/web_search.py)
    file_search: bool = False  # the file search the server runs (tools/file_search.py)
    tool_search: bool = False  # the search of deferred tools (tools/tool_search.py)

    @property
    def item_name(self) -> str:
        """The name its calls' items carry: the tool's own name, without its namespace."""
        prefix = f"{self.namespace}__" if self.namespace else ""
        return self.name.removeprefix(prefix)


def code_tool_spec() -> ToolSpec:
    """The code interpreter as a function-style tool taking `{"code": str}`, named `CODE_TOOL_NAME`."""
    return ToolSpec(
        name=CODE_TOOL_NAME,
        description=(
            "Run Python code in a stateful sandbox (Pyodide) and get back what it printed, the value "
            "of its last expression, and any matplotlib figures. numpy, pandas, matplotlib, scipy and "
            "scikit-learn are available; there is no network."
        ),
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The Python code to run."}},
            "required": ["code"],
        },
        code_interpreter=True,
    )


@dataclass(frozen=True)
class ForcedTool:
    """`tool_choice` naming one tool: the model must call it."""

    name: str


ToolChoice = Union[Literal["auto", "none", "required"], ForcedTool]


@dataclass(frozen=True)
class Sampling:
    """Sampling and decoding constraints for one model call.

    `text_format` is the Responses `text.format` object as a dict (`{"type": "json_schema", "schema":
    ...}` or `{"type": "json_object"}`), or None for plain text. `structured` is the vendor extension
    for forcing output with vLLM structured outputs: `{"regex": str}`, `{"json": schema}`,
    `{"choice": [str, ...]}` or `{"grammar": str}`; it wins over everything else when set.
    The sampling fields mirror vLLM's `SamplingParams`; None (or empty) leaves the engine's default, which
    is the model's generation config where it sets one, else vLLM's own.
    """

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    text_format: dict[str, Any] | None = None
    structured: dict[str, Any] | None = None
    seed: int | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    min_tokens: int = 0
    logit_bias: dict[int, float] | None = None
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    logprobs: int | None = None  # None: none; N (0-20): each output token's logprob and its N most likely


@dataclass(frozen=True)
class GenerateRequest:
    """One model call of the agent loop."""

    request_id: str
    turns: tuple[Turn, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    sampling: Sampling = field(default_factory=Sampling)
    reasoning_effort: str | None = None  # `reasoning.effort`, for templates that take it
    verbosity: str | None = None  # `text.verbosity`: a template variable, or a system note (prompt.py)


# --- output deltas (parser / engine -> agent loop) ----------------------------------------------------


@dataclass(frozen=True)
class TokenLogprob:
    """One output token's log probability, and the most likely tokens at its place (`top`)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class TextDelta:
    """Visible assistant text, and the logprobs of the tokens that wrote it when they were asked for."""

    text: str
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class ReasoningDelta:
    """Reasoning ("thinking") text, kept apart from the answer."""

    text: str


@dataclass(frozen=True)
class ToolCallStart:
    """The model began tool call number `index` (0, 1, ... within one model call) to tool `name`."""

    index: int
    name: str


@dataclass(frozen=True)
class ToolCallDelta:
    """The next fragment of the JSON arguments text of call `index`.

    Fragments concatenate to the arguments JSON object text. Formats that carry raw code (a markdown
    block, `<|python_tag|>`, harmony `to=python`) emit it JSON-escaped inside `{"code": "..."}`.
    """

    index: int
    arguments: str


@dataclass(frozen=True)
class ToolCallEnd:
    """Call `index` is complete; its arguments text is final."""

    index: int


Delta = Union[TextDelta, ReasoningDelta, ToolCallStart, ToolCallDelta, ToolCallEnd]

FinishReason = Literal["stop", "length", "tool_calls"]


@dataclass(frozen=True)
class Usage:
    """Token counts of one model call (or, summed, of a whole response)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True)
class Finish:
    """Last event of a model call: why it stopped and what it cost."""

    reason: FinishReason
    usage: Usage


EngineEvent = Union[TextDelta, ReasoningDelta, ToolCallStart, ToolCallDelta, ToolCallEnd, Finish]
