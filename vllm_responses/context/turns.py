"""Conversation history: Responses API items (input and earlier output) to model turns, and code results to text."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from vllm_responses.context.file_results import file_search_turns
from vllm_responses.context.images import code_result_images, part_images
from vllm_responses.context.reasoning import Opener, reasoning_text
from vllm_responses.context.searches import tool_search_call_turn, tool_search_output_turn, web_search_turns
from vllm_responses.engine.types import (
    CODE_TOOL_NAME,
    CUSTOM_INPUT_KEY,
    Message,
    Reasoning,
    ToolCall,
    ToolResult,
    Turn,
)
from vllm_responses.protocol.coding_items import (
    ApplyPatchCallInput,
    ApplyPatchCallOutputInput,
    LocalShellCallInput,
    LocalShellCallOutputInput,
    ShellCallInput,
    ShellCallOutputInput,
)
from vllm_responses.protocol.compaction import open_summary
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.inputs import (
    CodeInterpreterCallInput,
    CustomToolCallInput,
    CustomToolCallOutputInput,
    FunctionCallInput,
    FunctionCallOutputInput,
    InputItem,
    MessageInput,
    model_tool_name,
)

__all__ = [
    "MCP_DENIED",
    "SUMMARY_HEADER",
    "code_result_text",
    "input_to_items",
    "items_to_turns",
    "mcp_result_text",
]

# What the model reads as the result of an MCP call the client did not approve.
MCP_DENIED = "The user denied this call: it was not run."

# How much of a code cell's output the model gets back (the client gets it all, up to the sandbox cap).
MODEL_OUTPUT_CHARS = 8000

# How a `compaction` item reads to the model: a user turn (see `items_to_turns`) opening with this line.
SUMMARY_HEADER = "Summary of the earlier part of this conversation:"


def input_to_items(input_: str | list[InputItem]) -> list[dict[str, Any]]:
    """The request's input as stored items (each with an id), in wire form."""
    if isinstance(input_, str):
        input_ = [MessageInput(role="user", content=input_)]
    items = []
    for item in input_:
        d = item.model_dump(mode="json", exclude_none=True, by_alias=True)
        if isinstance(item, MessageInput) and _keeps_parts(item):  # files are read in place, images kept
            for part in d["content"]:
                if part["type"] == "input_image":
                    part.setdefault("detail", "auto")  # the SDK's type requires it
            d.setdefault("status", "completed")
        elif isinstance(item, MessageInput):  # an assistant's text as the SDK's `ResponseOutputText` holds it
            d["content"] = [
                {"type": "output_text", "text": item.text(), "annotations": []}
                if item.role == "assistant"
                else {"type": "input_text", "text": item.text()}
            ]
            d.setdefault("status", "completed")
        d.setdefault(
            "id",
            new_id(
                {
                    "message": "msg",
                    "function_call": "fc",
                    "custom_tool_call": "ctc",
                    "compaction": "cmp",
                    "mcp_approval_response": "mcpa",
                    "configuration_update": "cfg",
                    "compaction_trigger": "cmpt",
                }.get(d["type"], "item")
            ),
        )
        items.append(d)
    return items


def _keeps_parts(message: MessageInput) -> bool:
    """Whether a message holds `input_file` parts (tools/file_inputs.py reads them) or `input_image` ones: its
    parts are then kept as given (in their order, so that an error names the part where the client put it)."""
    return not isinstance(message.content, str) and any(
        p.type in ("input_file", "input_image") for p in message.content
    )


def code_result_text(outputs: Sequence[Mapping[str, Any]] | None) -> str:
    """What the model is told a code cell produced."""
    if outputs is None:
        return "(the output of this code was not kept)"
    parts: list[str] = []
    images = 0
    for out in outputs:
        if out.get("type") == "logs":
            logs = str(out.get("logs", ""))
            if len(logs) > MODEL_OUTPUT_CHARS:
                logs = (
                    logs[: MODEL_OUTPUT_CHARS // 2]
                    + "\n...[output truncated]...\n"
                    + logs[-MODEL_OUTPUT_CHARS // 2 :]
                )
            parts.append(logs)
        elif out.get("type") == "image":
            images += 1
            parts.append(f"[figure {images}: an image was produced and shown to the user]")
    text = "\n".join(p for p in parts if p)
    return text or "(no output)"


def mcp_result_text(output: str | None, error: Mapping[str, Any] | None) -> str:
    """What the model is told an MCP call returned: its output, or why it failed."""
    if error is None:
        return output if output else "(no output)"
    if error.get("type") == "mcp_tool_execution_error":
        content = error.get("content")
        parts = (
            [str(p.get("text", "")) for p in content if isinstance(p, dict)]
            if isinstance(content, list)
            else []
        )
        return "Error: " + ("\n".join(p for p in parts if p) or "the tool failed")
    return f"Error: {error.get('message', 'the call failed')}"


def items_to_turns(
    items: Iterable[dict[str, Any]],
    *,
    code_tool_name: str = CODE_TOOL_NAME,
    open_sealed: Opener | None = None,
) -> list[Turn]:
    """Stored / input items in wire form to the turns an engine renders. A reasoning item becomes a
    `Reasoning` turn (its sealed copy opened with `open_sealed`: context/reasoning.py); MCP listings are
    dropped; an MCP approval request becomes a call once denied (an approved one's `mcp_call` follows).

    A `compaction` item becomes a user turn holding its summary: every chat template accepts a user turn
    anywhere, while many refuse a system turn after the first (which `instructions` may hold), and the
    summary is conversation content, not instructions to give system authority to."""
    turns: list[Turn] = []
    names: dict[str, str] = {}
    approvals: dict[str, dict[str, Any]] = {}  # mcp_approval_request items by id, until answered
    for raw in items:
        kind = raw.get("type", "message")
        if kind == "message":
            msg = MessageInput.model_validate(raw)
            turns.append(Message(msg.role, msg.text(), part_images(msg.images())))
        elif kind == "function_call":
            fc = FunctionCallInput.model_validate(raw)
            names[fc.call_id] = model_tool_name(fc.name, fc.namespace)
            turns.append(ToolCall(fc.call_id, names[fc.call_id], fc.arguments))
        elif kind == "function_call_output":
            out = FunctionCallOutputInput.model_validate(raw)
            turns.append(
                ToolResult(out.call_id, names.get(out.call_id, ""), out.text(), part_images(out.images()))
            )
        elif kind == "custom_tool_call":  # offered as a function taking {"input": str}: so it reads
            ct = CustomToolCallInput.model_validate(raw)
            names[ct.call_id] = model_tool_name(ct.name, ct.namespace)
            turns.append(ToolCall(ct.call_id, names[ct.call_id], json.dumps({CUSTOM_INPUT_KEY: ct.input})))
        elif kind == "custom_tool_call_output":
            cout = CustomToolCallOutputInput.model_validate(raw)
            turns.append(
                ToolResult(cout.call_id, names.get(cout.call_id, ""), cout.text(), part_images(cout.images()))
            )
        elif kind == "code_interpreter_call":
            ci = CodeInterpreterCallInput.model_validate(raw)
            turns.append(ToolCall(ci.id, code_tool_name, json.dumps({"code": ci.code or ""})))
            outputs = raw.get("outputs")
            turns.append(
                ToolResult(ci.id, code_tool_name, code_result_text(outputs), code_result_images(outputs))
            )
        elif kind == "web_search_call":
            turns += web_search_turns(raw)
        elif kind == "file_search_call":
            turns += file_search_turns(raw)
        elif kind in ("mcp_call", "mcp_approval_request", "mcp_approval_response"):
            turns += _mcp_turns(raw, approvals)
        elif kind == "reasoning":
            if text := reasoning_text(raw, open_sealed):
                turns.append(Reasoning(text))
        elif kind == "compaction":  # an empty one (a compact of a short window) says nothing to the model
            if summary := open_summary(raw["encrypted_content"]):
                turns.append(Message("user", f"{SUMMARY_HEADER}\n{summary}"))
        elif kind in _TOOL_TURNS:
            turns.append(_TOOL_TURNS[kind](raw))
    return turns


def _mcp_turns(raw: dict[str, Any], approvals: dict[str, dict[str, Any]]) -> list[Turn]:
    """An MCP item's turns: a call and its result; an approval request, none until answered (kept in
    `approvals`: approved, its `mcp_call` follows), then, denied, a call whose result says so."""
    kind = raw["type"]
    if kind == "mcp_call":
        result = mcp_result_text(raw.get("output"), raw.get("error"))
        return [
            ToolCall(raw["id"], raw["name"], raw.get("arguments") or "{}"),
            ToolResult(raw["id"], raw["name"], result),
        ]
    if kind == "mcp_approval_request":
        approvals[raw["id"]] = raw
        return []
    asked = approvals.pop(raw.get("approval_request_id", ""), None)
    if asked is None or raw.get("approve"):
        return []
    return [
        ToolCall(asked["id"], asked["name"], asked.get("arguments") or "{}"),
        ToolResult(asked["id"], asked["name"], MCP_DENIED),
    ]


# The coding tools' calls and outputs (offered under the tool's type: tools/shell_patch.py), and tool searches', as
# turns.
_TOOL_TURNS: dict[str, Callable[[dict[str, Any]], Turn]] = {
    "tool_search_call": tool_search_call_turn,
    "tool_search_output": tool_search_output_turn,
    "shell_call": lambda raw: _coding_call(ShellCallInput.model_validate(raw), "shell"),
    "local_shell_call": lambda raw: _coding_call(LocalShellCallInput.model_validate(raw), "local_shell"),
    "apply_patch_call": lambda raw: _coding_call(ApplyPatchCallInput.model_validate(raw), "apply_patch"),
    "shell_call_output": lambda raw: _shell_result(ShellCallOutputInput.model_validate(raw)),
    "local_shell_call_output": lambda raw: _local_shell_result(LocalShellCallOutputInput.model_validate(raw)),
    "apply_patch_call_output": lambda raw: _patch_result(ApplyPatchCallOutputInput.model_validate(raw)),
}


def _coding_call(call: ShellCallInput | LocalShellCallInput | ApplyPatchCallInput, name: str) -> Turn:
    return ToolCall(call.call_id, name, call.arguments())


def _shell_result(out: ShellCallOutputInput) -> Turn:
    return ToolResult(out.call_id, "shell", out.text())


def _local_shell_result(out: LocalShellCallOutputInput) -> Turn:
    return ToolResult(out.answers, "local_shell", out.output)


def _patch_result(out: ApplyPatchCallOutputInput) -> Turn:
    return ToolResult(out.call_id, "apply_patch", out.text())
