"""openai-agents' coding tools, unchanged: `ApplyPatchTool`, `ShellTool` and `LocalShellTool` on an Agent, through
`OpenAIResponsesModel` against the real server (tiny model, outputs forced as in test_openai_agents.py).

The model's calls come back as the SDK's `apply_patch_call`, `shell_call` and `local_shell_call` items; the agent
runs them for real in a temp dir (an editor applying the V4A diff with the SDK's own `apply_diff`, commands
run by subprocess) and sends the `*_output` items back; the server feeds them to the model and the response
continues. Each step leans on the one before: the patch writes a script, the shell runs it, the local shell
reads the file the script wrote.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    ApplyPatchTool,
    LocalShellTool,
    ModelSettings,
    Runner,
    ShellTool,
    set_tracing_disabled,
)
from agents.apply_diff import apply_diff
from agents.editor import ApplyPatchOperation, ApplyPatchResult
from agents.items import ToolCallItem, ToolCallOutputItem
from agents.tool import (
    LocalShellCommandRequest,
    ShellCallOutcome,
    ShellCommandOutput,
    ShellCommandRequest,
    ShellResult,
)
from openai.types.responses import ResponseApplyPatchToolCall, ResponseFunctionShellToolCall
from openai.types.responses.response_output_item import LocalShellCall

from tests.clients.test_openai_agents import ForcedModel, tool_call
from tests.support.real import TINY as MODEL
from tests.support.real import tiny_model_server
from tests.support.wire import validate_as

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """A server of its own: the three tools' descriptions and four turns of calls and outputs need the tiny
    model's whole window (4096 tokens of one byte each), where the shared server has 2048; no sandbox."""
    server = tiny_model_server(workers=0, max_model_len=4096)
    yield server.base_url + "/v1"
    server.stop()


SCRIPT = (
    "from pathlib import Path\nPath('out.txt').write_text('written by the script')\nprint('script ran')\n"
)


def as_dict(item: Any) -> dict[str, Any]:
    """A run item's raw item as sent (openai-agents keeps some as the SDK's models, some as dicts)."""
    return item if isinstance(item, dict) else item.model_dump(mode="json", exclude_unset=True)


class Workspace:
    """The agent's side: a temp dir the tools work in, and what each was asked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.asked: list[str] = []

    # ApplyPatchEditor (the SDK's `apply_diff` leaves a created file without its last newline)
    def create_file(self, op: ApplyPatchOperation) -> ApplyPatchResult:
        self.asked.append(f"create {op.path}")
        (self.root / op.path).write_text(apply_diff("", op.diff or "", mode="create"))
        return ApplyPatchResult(status="completed", output=f"created {op.path}")

    def update_file(self, op: ApplyPatchOperation) -> ApplyPatchResult:
        path = self.root / op.path
        path.write_text(apply_diff(path.read_text(), op.diff or ""))
        return ApplyPatchResult(status="completed", output=f"updated {op.path}")

    def delete_file(self, op: ApplyPatchOperation) -> ApplyPatchResult:
        (self.root / op.path).unlink()
        return ApplyPatchResult(status="completed", output=f"deleted {op.path}")

    # ShellTool's executor
    def shell(self, request: ShellCommandRequest) -> ShellResult:
        outputs = []
        for command in request.data.action.commands:
            self.asked.append(f"shell {command}")
            done = subprocess.run(
                command, shell=True, cwd=self.root, capture_output=True, text=True, timeout=60
            )
            outcome = ShellCallOutcome(type="exit", exit_code=done.returncode)
            outputs.append(ShellCommandOutput(stdout=done.stdout, stderr=done.stderr, outcome=outcome))
        return ShellResult(output=outputs)

    # LocalShellTool's executor
    def local_shell(self, request: LocalShellCommandRequest) -> str:
        argv = list(request.data.action.command)
        self.asked.append("local_shell " + " ".join(argv))
        return subprocess.run(argv, cwd=self.root, capture_output=True, text=True, timeout=60).stdout


async def test_patch_shell_and_local_shell_run_in_the_agent_and_continue(
    base_url: str, tmp_path: Path, async_sdk: Callable[..., openai.AsyncOpenAI]
) -> None:
    set_tracing_disabled(True)
    work = Workspace(tmp_path)
    patch = {
        "type": "create_file",
        "path": "make.py",
        "diff": "".join(f"+{line}\n" for line in SCRIPT.splitlines()),
    }
    answer = "The script wrote out.txt."
    model = ForcedModel(
        [
            [tool_call("apply_patch", patch)],
            [tool_call("shell", {"commands": ["python3 make.py"]})],
            [tool_call("local_shell", {"command": ["cat", "out.txt"]})],
            [answer],
        ],
        model=MODEL,
        openai_client=async_sdk(base_url, timeout=300),
    )
    agent = Agent(
        name="coder",
        instructions="Write the script, run it, check its file.",
        model=model,
        model_settings=ModelSettings(temperature=0),
        tools=[
            ApplyPatchTool(editor=work),
            ShellTool(executor=work.shell),
            LocalShellTool(executor=work.local_shell),
        ],
    )

    result = await Runner.run(agent, "Make a script that writes out.txt, run it, and show the file.")

    assert result.final_output == answer
    assert work.asked == ["create make.py", "shell python3 make.py", "local_shell cat out.txt"]
    assert (tmp_path / "make.py").read_text() == SCRIPT.rstrip("\n") and (
        tmp_path / "out.txt"
    ).read_text() == "written by the script"
    raw = [i.raw_item for i in result.new_items if isinstance(i, ToolCallItem)]
    kinds = (
        ResponseApplyPatchToolCall,
        ResponseFunctionShellToolCall,
        LocalShellCall,
    )  # as the SDK types them
    patch_call, shell_call, local_call = (
        validate_as(kind, as_dict(r)) for kind, r in zip(kinds, raw, strict=True)
    )
    assert patch_call.operation.type == "create_file" and patch_call.operation.path == "make.py"
    assert shell_call.action.commands == ["python3 make.py"]
    assert local_call.action.command == ["cat", "out.txt"]
    outputs: list[Any] = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert "script ran" in str(outputs[1]) and outputs[2] == "written by the script"
    assert model.plan == [] and len(result.raw_responses) == 4
