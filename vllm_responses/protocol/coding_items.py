"""Pydantic models of the coding agents' client-run tools in a create body: `shell`, `local_shell` and
`apply_patch`, and their call and output items sent back as input."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator

from vllm_responses.protocol.lenient import LenientModel

__all__ = [
    "ApplyPatchCallInput",
    "ApplyPatchCallOutputInput",
    "ApplyPatchTool",
    "LocalShellCallInput",
    "LocalShellCallOutputInput",
    "LocalShellTool",
    "ShellCallInput",
    "ShellCallOutputInput",
    "ShellTool",
]

CallStatus = Literal["in_progress", "completed", "incomplete"]


class ShellEnvironment(LenientModel):
    type: Literal["local", "container_auto", "container_reference"]
    skills: list[Any] | None = None  # none are served: non-empty, a 400 (`parse_create_request`)

    @field_validator("type")
    @classmethod
    def _local_only(cls, v: str) -> str:
        if v != "local":
            raise ValueError(
                "only a 'local' shell environment is served here (the client runs the commands): there are "
                "no hosted shell containers"
            )
        return v


class ShellTool(LenientModel):
    """`shell` (the SDK's `FunctionShellTool`) in a local environment: the client runs the commands."""

    type: Literal["shell"]
    environment: ShellEnvironment | None = None


class LocalShellTool(LenientModel):
    type: Literal["local_shell"]


class ApplyPatchTool(LenientModel):
    type: Literal["apply_patch"]


class ShellAction(LenientModel):
    commands: list[str]
    timeout_ms: int | None = None
    max_output_length: int | None = None


class ShellCallInput(LenientModel):
    type: Literal["shell_call"]
    call_id: str
    action: ShellAction
    id: str | None = None
    status: CallStatus | None = None

    def arguments(self) -> str:
        return json.dumps(self.action.model_dump(exclude_none=True, include={"commands", "timeout_ms"}))


class ShellOutcome(LenientModel):
    type: Literal["exit", "timeout"]
    exit_code: int | None = None


class ShellOutputContent(LenientModel):
    stdout: str = ""
    stderr: str = ""
    outcome: ShellOutcome


class ShellCallOutputInput(LenientModel):
    type: Literal["shell_call_output"]
    call_id: str
    output: list[ShellOutputContent]
    max_output_length: int | None = None
    id: str | None = None
    status: CallStatus | None = None

    def text(self) -> str:
        """Each command's output as the model reads it: stdout, stderr, then how it ended."""
        parts = []
        for out in self.output:
            end = "timed out" if out.outcome.type == "timeout" else f"exit code {out.outcome.exit_code}"
            stderr = f"\nstderr:\n{out.stderr.rstrip()}" if out.stderr else ""
            parts.append(f"{out.stdout.rstrip()}{stderr}\n[{end}]".strip())
        return "\n\n".join(parts)


class LocalShellAction(LenientModel):
    type: Literal["exec"] = "exec"
    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    timeout_ms: int | None = None
    user: str | None = None
    working_directory: str | None = None


class LocalShellCallInput(LenientModel):
    type: Literal["local_shell_call"]
    call_id: str
    action: LocalShellAction
    id: str | None = None
    status: CallStatus | None = None

    def arguments(self) -> str:
        fields = {"command", "working_directory", "timeout_ms"}
        return json.dumps(self.action.model_dump(exclude_none=True, include=fields))


class LocalShellCallOutputInput(LenientModel):
    """The SDK types the call it answers as `id`; openai-agents sends `call_id`: either is taken."""

    type: Literal["local_shell_call_output"]
    output: str
    id: str | None = None
    call_id: str | None = None
    status: CallStatus | None = None

    @property
    def answers(self) -> str:
        return self.call_id or self.id or ""


class ApplyPatchOperation(LenientModel):
    type: Literal["create_file", "update_file", "delete_file"]
    path: str
    diff: str | None = None


class ApplyPatchCallInput(LenientModel):
    type: Literal["apply_patch_call"]
    call_id: str
    operation: ApplyPatchOperation
    id: str | None = None
    status: Literal["in_progress", "completed"] | None = None

    def arguments(self) -> str:
        return json.dumps(self.operation.model_dump(exclude_none=True))


class ApplyPatchCallOutputInput(LenientModel):
    type: Literal["apply_patch_call_output"]
    call_id: str
    status: Literal["completed", "failed"]
    output: str | None = None
    id: str | None = None

    def text(self) -> str:
        return f"[{self.status}] {self.output or ''}".strip()
