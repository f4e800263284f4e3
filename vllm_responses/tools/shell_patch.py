"""The coding agents' client-run tools: `shell`, `local_shell` and `apply_patch` offered to the model as functions,
and a model's call to one made into the `shell_call` / `local_shell_call` / `apply_patch_call` item the client runs."""

from __future__ import annotations

import json
from typing import Any

from vllm_responses.engine.types import ToolSpec
from vllm_responses.protocol.coding_items import ApplyPatchTool, LocalShellTool, ShellTool
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import (
    ApplyPatchCallItem,
    CodingCallItem,
    LocalShellCallItem,
    ShellCallItem,
)

__all__ = ["CODING_CALL_TYPES", "coding_call_item", "coding_tool_spec"]

_SHELL = ToolSpec(
    "shell",
    "Run shell commands on the user's machine, in order; you get back each one's stdout, stderr and exit code.",
    {
        "type": "object",
        "properties": {
            "commands": {"type": "array", "items": {"type": "string"}, "description": "The commands to run."},
            "timeout_ms": {
                "type": "integer",
                "description": "A time limit for each command, in milliseconds.",
            },
        },
        "required": ["commands"],
    },
    call_type="shell_call",
)
_LOCAL_SHELL = ToolSpec(
    "local_shell",
    "Run one command on the user's machine; you get back what it printed.",
    {
        "type": "object",
        "properties": {
            "command": {
                "type": "array",
                "items": {"type": "string"},
                "description": 'The program and its arguments, e.g. ["ls", "-la"].',
            },
            "working_directory": {"type": "string"},
            "timeout_ms": {"type": "integer"},
        },
        "required": ["command"],
    },
    call_type="local_shell_call",
)
_APPLY_PATCH = ToolSpec(
    "apply_patch",
    "Create, update or delete one file on the user's machine. For create_file, `diff` is the new file's "
    "lines, each starting with '+'; for update_file, a V4A diff: hunks opening with '@@', context lines "
    "starting with ' ', removed lines with '-', added lines with '+'. delete_file takes no diff.",
    {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["create_file", "update_file", "delete_file"]},
            "path": {"type": "string", "description": "The file's path, relative to the workspace."},
            "diff": {"type": "string"},
        },
        "required": ["type", "path"],
    },
    call_type="apply_patch_call",
)
_SPECS = {"shell": _SHELL, "local_shell": _LOCAL_SHELL, "apply_patch": _APPLY_PATCH}
CODING_CALL_TYPES = frozenset(spec.call_type for spec in _SPECS.values())


def coding_tool_spec(tool: ShellTool | LocalShellTool | ApplyPatchTool) -> ToolSpec:
    """The tool as the model is offered it: a function under the tool's type."""
    return _SPECS[tool.type]


def _arguments(text: str) -> dict[str, Any]:
    """The model's arguments as an object; text that is not one: `{"": text}` (each call type reads it)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {"": text}
    return value if isinstance(value, dict) else {"": value}


def _strings(value: Any) -> list[str]:
    """A list of strings from what a model wrote: a list (its items as text) or one string."""
    if isinstance(value, list):
        return [v if isinstance(v, str) else json.dumps(v) for v in value]
    return [value] if isinstance(value, str) and value else []


def _ms(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def coding_call_item(call_type: str, arguments: str) -> CodingCallItem:
    """The item of a model's call to a coding tool, from its arguments. Arguments that miss the shape are read
    as far as they go (a bare string is the command), so the client gets a call it can run or refuse."""
    args = _arguments(arguments)
    call_id = new_id("call")
    if call_type == "shell_call":
        commands = _strings(args.get("commands", args.get("command", args.get(""))))
        action = {"commands": commands, "timeout_ms": _ms(args.get("timeout_ms")), "max_output_length": None}
        return ShellCallItem(
            id=new_id("sh"), type="shell_call", call_id=call_id, action=action, status="completed"
        )
    if call_type == "local_shell_call":
        command = _strings(args.get("command", args.get("commands", args.get(""))))
        local: dict[str, Any] = {
            "type": "exec",
            "command": command,
            "env": {},
            "timeout_ms": _ms(args.get("timeout_ms")),
        }
        if isinstance(args.get("working_directory"), str):
            local["working_directory"] = args["working_directory"]
        return LocalShellCallItem(
            id=new_id("lsh"), type="local_shell_call", call_id=call_id, action=local, status="completed"
        )
    kind = (
        args.get("type")
        if args.get("type") in ("create_file", "update_file", "delete_file")
        else "update_file"
    )
    operation: dict[str, Any] = {"type": kind, "path": str(args.get("path", ""))}
    if kind != "delete_file":
        operation["diff"] = str(args.get("diff", args.get("", "")))
    return ApplyPatchCallItem(
        id=new_id("apc"), type="apply_patch_call", call_id=call_id, operation=operation, status="completed"
    )
