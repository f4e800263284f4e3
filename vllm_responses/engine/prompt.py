"""Render `Turn`s and tools into a prompt with the model's own chat template (no vLLM import)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from vllm_responses.engine.parsers.base import ToolParser
from vllm_responses.engine.parsers.select import pick_parser
from vllm_responses.engine.types import (
    ForcedTool,
    GenerateRequest,
    Image,
    Message,
    Reasoning,
    ToolCall,
    ToolResult,
    ToolSpec,
    Turn,
)
from vllm_responses.engine.verbosity import VERBOSITY_VARIABLE, verbosity_kwargs, verbosity_note

__all__ = [
    "ANSWER_BAD_WORDS",
    "ANSWER_STOP",
    "CODE_PREFILL",
    "CODE_RETRIES",
    "CODE_STOP",
    "code_retry_due",
    "ChatTokenizer",
    "choose_parser",
    "TemplateCaps",
    "code_hint",
    "effort_kwargs",
    "worked_example",
    "probe_template",
    "render_prompt",
    "code_ran_since_user",
    "should_prefill_code",
    "tools_to_openai",
    "turns_to_messages",
    "prompt_images",
]

# The user turn that shows a tool result's images to a template whose `tool` turns cannot show them.
TOOL_IMAGES_NOTE = "The images the tool returned:"
CODE_PREFILL = "```python\n"
CODE_STOP = "```"
# After the code ran, the answer of a markdown-format model may not open a code block nor parrot the tool
# response (a weak model's habits: it echoes its code instead of answering), and it ends at its first blank
# line (it rambles on after the answer). On the default model more answers then state the value.
ANSWER_BAD_WORDS = ("```", "<tool_response>", "</tool_response>")
ANSWER_STOP = "\n\n"
CODE_RETRIES = 1  # a code call that does not parse is retried once, as a new call the client sees
_PARSE_ERROR = re.compile(r"^(SyntaxError|IndentationError|TabError): ", re.M)
_SENTINEL = "zq9Sentinel"


class ChatTokenizer(Protocol):
    """The part of a tokenizer we use: vLLM's `TokenizerLike` (a Hugging Face tokenizer, whose first parameter
    is named `conversation`, fits too: we pass the messages positionally)."""

    def apply_chat_template(
        self, messages: list[Any], tools: list[dict[str, Any]] | None = None, **kwargs: Any
    ) -> str | list[int]: ...


@dataclass(frozen=True)
class TemplateCaps:
    """What a chat template can express. Found by rendering probes, not by reading its source."""

    tools_section: bool  # renders the `tools=` list into the prompt
    tool_calls: bool  # renders assistant `tool_calls` (then a `tool` role is assumed too)
    tool_images: bool = False  # renders image parts in a `tool` turn's content
    # The template variable that sets how much the model reasons ("reasoning_effort", "enable_thinking" or
    # "thinking"); None: it has none.
    effort: str | None = None
    # The assistant message field whose earlier reasoning it renders ("reasoning_content" or "thinking");
    # None: it renders none (earlier reasoning is then dropped from prompts).
    reasoning_field: str | None = None
    verbosity: bool = False  # reads a `verbosity` variable (`text.verbosity`, engine/verbosity.py)


# The template variables that control reasoning, each with two values that render differently where the
# template reads it: gpt-oss's `reasoning_effort`; Qwen3's, GLM's and Hunyuan's `enable_thinking`; DeepSeek
# V3.1's and Granite's `thinking` (the `chat_template_kwargs` vLLM's docs give for each family).
_EFFORT_VARIABLES = (
    ("reasoning_effort", "low", "high"),
    ("enable_thinking", False, True),
    ("thinking", False, True),
)
# The assistant message fields templates render earlier reasoning from: `reasoning_content` (Qwen3,
# DeepSeek-R1, GLM, Kimi), `thinking` (gpt-oss).
_REASONING_FIELDS = ("reasoning_content", "thinking")


def _render(tok: ChatTokenizer, messages: list[dict[str, Any]], template: str | None, **kwargs: Any) -> str:
    if template is not None:
        kwargs["chat_template"] = template
    return str(tok.apply_chat_template(messages, tokenize=False, **kwargs))


def probe_template(tok: ChatTokenizer, template: str | None = None) -> TemplateCaps:
    """Probe `template` (default: the tokenizer's own)."""
    user = [{"role": "user", "content": "hi"}]
    tool = {"type": "function", "function": {"name": "f", "description": _SENTINEL, "parameters": {}}}
    try:
        tools_section = _SENTINEL in _render(tok, user, template, tools=[tool], add_generation_prompt=True)
    except Exception:  # a template may raise on unexpected input: treat as "not supported"
        tools_section = False
    call = {"type": "function", "id": "c0", "function": {"name": _SENTINEL, "arguments": {}}}
    convo = user + [{"role": "assistant", "content": "", "tool_calls": [call]}]
    try:
        tool_calls = _SENTINEL in _render(tok, convo, template)
    except Exception:
        tool_calls = False
    return TemplateCaps(
        tools_section=tools_section,
        tool_calls=tool_calls,
        tool_images=tool_calls and _shows_tool_images(tok, convo, template),
        effort=_probe_effort(tok, template),
        reasoning_field=_probe_reasoning_field(tok, template),
        verbosity=_reads(tok, template, VERBOSITY_VARIABLE, "low", "high"),
    )


def _probe_effort(tok: ChatTokenizer, template: str | None) -> str | None:
    """The first reasoning variable whose two values render the generation prompt differently."""
    return next((name for name, off, on in _EFFORT_VARIABLES if _reads(tok, template, name, off, on)), None)


def _reads(tok: ChatTokenizer, template: str | None, name: str, one: Any, other: Any) -> bool:
    """Whether the template reads variable `name`: its two values render the generation prompt differently."""
    user = [{"role": "user", "content": "hi"}]
    try:
        first = _render(tok, user, template, add_generation_prompt=True, **{name: one})
        second = _render(tok, user, template, add_generation_prompt=True, **{name: other})
    except Exception:
        return False
    return first != second


def _probe_reasoning_field(tok: ChatTokenizer, template: str | None) -> str | None:
    """The first assistant message field the template renders: after the last user turn, on a plain answer
    or on a tool call (gpt-oss renders it on calls only)."""
    user: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    call = {"type": "function", "id": "c0", "function": {"name": "f", "arguments": {}}}
    for name in _REASONING_FIELDS:
        answer = {"role": "assistant", "content": "ok", name: _SENTINEL}
        calling = {"role": "assistant", "content": "", "tool_calls": [call], name: _SENTINEL}
        result = {"role": "tool", "tool_call_id": "c0", "name": "f", "content": "1"}
        for convo in (user + [answer], user + [calling, result]):
            try:
                if _SENTINEL in _render(tok, convo, template):
                    return name
            except Exception:
                continue
    return None


def effort_kwargs(caps: TemplateCaps, effort: str | None) -> dict[str, Any]:
    """The template variable `reasoning.effort` sets, as the template takes it: gpt-oss's three levels
    ("none" and "minimal" are its "low", "xhigh" and "max" its "high"), or thinking on or off ("none" and
    "minimal": off). Nothing without an effort or a variable."""
    if effort is None or caps.effort is None:
        return {}
    if caps.effort == "reasoning_effort":
        level = {"none": "low", "minimal": "low", "xhigh": "high", "max": "high"}.get(effort, effort)
        return {"reasoning_effort": level}
    return {caps.effort: effort not in ("none", "minimal")}


def _shows_tool_images(tok: ChatTokenizer, convo: list[dict[str, Any]], template: str | None) -> bool:
    """Whether an image part in a `tool` turn changes what the template renders."""
    text = {"type": "text", "text": "ok"}
    try:
        plain = _render(tok, [*convo, {"role": "tool", "content": [text]}], template)
        shown = _render(tok, [*convo, {"role": "tool", "content": [{"type": "image"}, text]}], template)
    except Exception:
        return False
    return plain != shown


def tools_to_openai(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tools in the OpenAI chat-completions function format that HF chat templates expect."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def _arguments(text: str) -> Any:
    """HF templates expect arguments as a dict; keep text that is not a JSON object as it is."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def turns_to_messages(
    turns: Sequence[Turn], caps: TemplateCaps, parser: ToolParser, *, images: bool = False
) -> list[dict[str, Any]]:
    """Chat messages for `apply_chat_template`.

    `images` (a vision model): a turn's images become `{"type": "image"}` parts before its text (the order of
    `prompt_images`); a tool result's go in its `tool` turn where the template shows them there, else in a
    user turn after it (or in the folded user turn). Without it, images are left out.

    With a template that renders tool calls: calls become assistant `tool_calls` (merged into the
    preceding assistant text) and results `tool` messages. Without: calls become assistant text via
    `parser.render_call` and results are folded into one user turn via `parser.render_result`.
    "developer" turns are sent as "system". `Reasoning` goes on the assistant message that follows it, in
    the field the template renders (`caps.reasoning_field`); with none it is dropped.
    """
    msgs: list[dict[str, Any]] = []
    thought: list[str] = []  # reasoning waiting for its assistant message
    for turn in turns:
        if isinstance(turn, Reasoning):
            if caps.reasoning_field and turn.text:
                thought.append(turn.text)
            continue
        count = len(msgs)
        if isinstance(turn, Message):
            role = "system" if turn.role == "developer" else turn.role
            msgs.append({"role": role, "content": turn.text, "_images": len(turn.images) if images else 0})
        elif isinstance(turn, ToolCall):
            _add_call(msgs, turn, caps, parser)
        elif isinstance(turn, ToolResult):
            _add_result(msgs, turn, caps, parser, len(turn.images) if images else 0)
        if thought and msgs and msgs[-1]["role"] != "assistant":
            thought.clear()  # no assistant message followed it
        elif thought and msgs:
            _give_reasoning(msgs[-1], caps, thought, new=len(msgs) > count)
    for m in msgs:
        m.pop("_folded", None)
        if shown_images := m.pop("_images", 0):
            m["content"] = [{"type": "image"}] * shown_images + [{"type": "text", "text": m["content"]}]
    return msgs


def _add_call(msgs: list[dict[str, Any]], turn: ToolCall, caps: TemplateCaps, parser: ToolParser) -> None:
    """A tool call: an assistant `tool_calls` entry (merged into the preceding assistant message) where the
    template renders them, else assistant text written by `parser.render_call`."""
    last = msgs[-1] if msgs else None
    if caps.tool_calls:
        call = {
            "type": "function",
            "id": turn.call_id,
            "function": {"name": turn.name, "arguments": _arguments(turn.arguments)},
        }
        if last is not None and last["role"] == "assistant" and "_folded" not in last:
            last.setdefault("tool_calls", []).append(call)
        else:
            msgs.append({"role": "assistant", "content": "", "tool_calls": [call]})
        return
    text = parser.render_call(turn)
    if last is not None and last.get("_folded") == "call":
        last["content"] += "\n" + text
    elif last is not None and last["role"] == "assistant" and "tool_calls" not in last:
        last["content"] = (last["content"] + "\n" + text).lstrip("\n")
        last["_folded"] = "call"
    else:
        msgs.append({"role": "assistant", "content": text, "_folded": "call"})


def _add_result(
    msgs: list[dict[str, Any]], turn: ToolResult, caps: TemplateCaps, parser: ToolParser, shown: int
) -> None:
    """A tool result: a `tool` message (its `shown` images in it, or in a user turn after it) where the
    template renders calls, else folded into one user turn by `parser.render_result`."""
    last = msgs[-1] if msgs else None
    if caps.tool_calls:
        msgs.append({"role": "tool", "tool_call_id": turn.call_id, "name": turn.name, "content": turn.output})
        if caps.tool_images:
            msgs[-1]["_images"] = shown
        elif shown:
            msgs.append({"role": "user", "content": TOOL_IMAGES_NOTE, "_images": shown})
        return
    text = parser.render_result(turn)
    if last is not None and last.get("_folded") == "result":
        last["content"] += "\n" + text
        last["_images"] = last.get("_images", 0) + shown
    else:
        msgs.append({"role": "user", "content": text, "_folded": "result", "_images": shown})


def _give_reasoning(msg: dict[str, Any], caps: TemplateCaps, thought: list[str], *, new: bool) -> None:
    """The waiting reasoning onto the assistant message `msg` (after what it holds, when not `new`)."""
    assert caps.reasoning_field is not None
    held = "" if new else str(msg.get(caps.reasoning_field) or "")
    msg[caps.reasoning_field] = "\n\n".join([*([held] if held else []), *thought])
    thought.clear()


def prompt_images(turns: Sequence[Turn]) -> list[Image]:
    """The images of `turns` in the order `turns_to_messages(images=True)` places them in the prompt."""
    return [img for turn in turns if isinstance(turn, (Message, ToolResult)) for img in turn.images]


def code_hint(tools: Sequence[ToolSpec]) -> str | None:
    """A system-prompt line telling a model whose template has no tools section about the code tool."""
    if any(t.code_interpreter for t in tools):
        return (
            "You can run Python code: write it in a ```python code block and stop; what it prints "
            "comes back in <tool_response> tags. Print the result with print()."
        )
    return None


# One worked exchange shown (as chat turns) to a model whose template has no tool format, before the
# conversation: the call as a fenced block with print(), its output as the user turn, a short answer that
# states the value. On the default model more code then prints its result, and more answers state it
# (`scripts/bench_default_model.py`). Built with `MarkdownCodeParser.render_result`'s words (see `worked_example`).
EXAMPLE_QUESTION = "What is 6 * 7? Use Python."
EXAMPLE_CODE = "print(6 * 7)"
EXAMPLE_OUTPUT = "42"
EXAMPLE_ANSWER = "6 * 7 is 42."


def worked_example(parser: ToolParser, tool_name: str) -> list[dict[str, Any]]:
    """The worked exchange as chat messages, rendered with `parser` as the conversation's own calls are."""
    call = ToolCall("example", tool_name, json.dumps({"code": EXAMPLE_CODE}))
    result = ToolResult("example", tool_name, EXAMPLE_OUTPUT)
    return [
        {"role": "user", "content": EXAMPLE_QUESTION},
        {"role": "assistant", "content": parser.render_call(call)},
        {"role": "user", "content": parser.render_result(result)},
        {"role": "assistant", "content": EXAMPLE_ANSWER},
    ]


def should_prefill_code(request: GenerateRequest, *, markdown_format: bool, policy: bool) -> bool:
    """Prefill "```python\\n" for the markdown call format when the code tool is offered and either
    tool_choice forces it, or `policy` is on and no code has run since the last user message (or the code
    that ran did not parse: `code_retry_due`)."""
    if not markdown_format or request.tool_choice == "none":
        return False
    code_tools = {t.name for t in request.tools if t.code_interpreter}
    if not code_tools:
        return False
    choice = request.tool_choice
    if choice == "required" or (isinstance(choice, ForcedTool) and choice.name in code_tools):
        return True
    if isinstance(choice, ForcedTool) or not policy:
        return False
    return not code_ran_since_user(request) or code_retry_due(request)


def code_retry_due(request: GenerateRequest) -> bool:
    """Whether the last code call since the last user message did not parse (its output has a
    `SyntaxError`, `IndentationError` or `TabError` line) and fewer than `CODE_RETRIES` retries were made:
    the model gets to write the code again."""
    code_tools = {t.name for t in request.tools if t.code_interpreter}
    calls = 0
    last: ToolResult | None = None
    for turn in reversed(request.turns):
        if isinstance(turn, Message) and turn.role == "user":
            break
        if isinstance(turn, ToolCall) and turn.name in code_tools:
            calls += 1
        elif isinstance(turn, ToolResult) and turn.name in code_tools and last is None:
            last = turn
    return last is not None and calls <= CODE_RETRIES and _PARSE_ERROR.search(last.output) is not None


def code_ran_since_user(request: GenerateRequest) -> bool:
    """Whether a code-interpreter call follows the last user message in the conversation."""
    code_tools = {t.name for t in request.tools if t.code_interpreter}
    for turn in reversed(request.turns):
        if isinstance(turn, Message) and turn.role == "user":
            return False
        if isinstance(turn, ToolCall) and turn.name in code_tools:
            return True
    return False


def render_prompt(
    tok: ChatTokenizer,
    request: GenerateRequest,
    caps: TemplateCaps,
    parser: ToolParser,
    prefill: str = "",
    template: str | None = None,
    forced: Sequence[ToolSpec] = (),
    *,
    images: bool = False,
) -> str:
    """The prompt text (`images`: see `turns_to_messages`): the chat template (`template`, default the tokenizer's own) applied with a
    generation prompt, then `prefill`. `forced`: the tools of a call forced as a Hermes call on a model whose
    own format cannot write it; a template without a tools section is told of them in a system turn."""
    messages = turns_to_messages(request.turns, caps, parser, images=images)
    tools = request.tools if request.tool_choice != "none" else ()
    kwargs: dict[str, Any] = {"add_generation_prompt": True, **effort_kwargs(caps, request.reasoning_effort)}
    kwargs.update(verbosity_kwargs(caps.verbosity, request.verbosity))
    if note := verbosity_note(caps.verbosity, request.verbosity):
        _add_system_note(messages, note)
    if tools and caps.tools_section:
        kwargs["tools"] = tools_to_openai(tools)
    elif forced:
        _add_system_note(messages, forced_call_note(forced))
    elif tools and (hint := code_hint(tools)):
        start = 1 if messages and messages[0]["role"] == "system" else 0
        code_tool = next(t.name for t in tools if t.code_interpreter)
        messages[start:start] = worked_example(parser, code_tool)
        _add_system_note(messages, hint)
    return _render(tok, messages, template, **kwargs) + prefill


def forced_call_note(tools: Sequence[ToolSpec]) -> str:
    """A system note for a template without a tools section whose model must call one of `tools` now, in the
    Hermes shape its output is held to."""
    lines = [
        "Call one of these tools now. Reply with exactly one call: "
        '<tool_call>{"name": <tool name>, "arguments": <arguments as JSON>}</tool_call>'
    ]
    for t in tools:
        lines.append(f"- {t.name}: {t.description}\n  arguments: {json.dumps(t.parameters)}")
    return "\n".join(lines)


def _add_system_note(messages: list[dict[str, Any]], note: str) -> None:
    """`note` at the end of the first system turn, or as a new first turn."""
    if messages and messages[0]["role"] == "system":
        messages[0] = {**messages[0], "content": messages[0]["content"] + "\n\n" + note}
    else:
        messages.insert(0, {"role": "system", "content": note})


def choose_parser(explicit: str | None, chat_template: str | None, model_name: str) -> str:
    """The tool-call parser name: `explicit` if given, else `parsers.select.pick_parser`'s choice."""
    return explicit or pick_parser(chat_template, model_name)
