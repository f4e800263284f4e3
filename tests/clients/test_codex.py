"""Codex CLI (npm `@openai/codex`, its real binary, pinned in tests/clients/node) against a live server.

`codex exec` is pointed at the server as a custom provider (`wire_api="responses"`), as docs/clients.md tells
users to. Its requests are what it sends OpenAI: developer messages, ~40 KB of instructions and tools, function
tools with `strict`, a `namespace` tool, `web_search`, `reasoning`, `include: ["reasoning.encrypted_content"]`,
`store: false`, `prompt_cache_key`, `client_metadata`. The model's side is scripted (the fake engine) so that
the run is exact: Codex asks, the model thinks and calls `exec_command`, Codex runs the command and sends its
output back (with the reasoning item, as a `store: false` client must), the model answers with what the
command printed, and Codex exits 0 with that answer. Codex's own sandbox is bypassed: it is Codex's business,
not the server's, and needs user namespaces that a CI host may lack.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.node_runner import NODE_DIR, node_binary
from tests.fakes import FakeEngine, FakeInterpreter, function_call, say, think
from tests.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.engine.types import GenerateRequest, ToolCall, ToolResult

MODEL = "codex-test-model"
CODEX = NODE_DIR / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    live = LiveServer(Config(), FakeEngine(MODEL), FakeInterpreter()).start()
    yield live
    live.stop()


def codex_exec(base_url: str, prompt: str, home: Path, work: Path) -> subprocess.CompletedProcess[str]:
    """`codex exec PROMPT` in `work` with the server as its model provider (the `-c` form of docs/clients.md)."""
    if not CODEX.is_file():
        pytest.fail(f"the Codex CLI is not installed at {CODEX}: run scripts/setup.sh")
    node = node_binary()
    provider = f'{{name="vr",base_url="{base_url}/v1",wire_api="responses",env_key="VR_KEY"}}'
    argv = [str(node), str(CODEX), "exec", "--skip-git-repo-check", "--color", "never"]
    argv += ["--dangerously-bypass-approvals-and-sandbox", "-m", MODEL]
    argv += ["-c", "model_provider=vr", "-c", f"model_providers.vr={provider}", prompt]
    env = {"PATH": f"{node.parent}:/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(home), "VR_KEY": "k"}
    return subprocess.run(
        argv, cwd=work, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )


def answer(request: GenerateRequest) -> list:  # type: ignore[type-arg]
    """The second model call: what the command printed, read from the tool result Codex sent back."""
    result = [t for t in request.turns if isinstance(t, ToolResult)][-1]
    printed = [line for line in result.output.splitlines() if "codex-was-here" in line]
    return say("The command printed: " + (printed[-1] if printed else "nothing I could see"))


def test_codex_exec_runs_a_command_and_answers(
    server: LiveServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    engine: FakeEngine = server.engine
    engine.reset(
        think("I should run it.") + function_call("exec_command", {"cmd": "echo codex-was-here"}), answer
    )
    home, work = tmp_path_factory.mktemp("codex-home"), tmp_path_factory.mktemp("codex-work")

    proc = codex_exec(server.base_url, "Run `echo codex-was-here` and tell me what it printed.", home, work)

    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == "The command printed: codex-was-here", proc.stderr[-4000:]
    first, second = engine.requests
    offered = {t.name for t in first.tools}
    assert "exec_command" in offered
    # Codex's `namespace` tool: its functions offered as namespace__name; `web_search` (no backend): not.
    assert any("__" in name for name in offered), offered
    assert not any("web_search" in name for name in offered)
    assert first.parallel_tool_calls is True
    call = next(t for t in second.turns if isinstance(t, ToolCall))
    assert call.name == "exec_command" and "echo codex-was-here" in call.arguments
    result = next(t for t in second.turns if isinstance(t, ToolResult))
    assert result.call_id == call.call_id and "codex-was-here" in result.output
    assert engine.aborted == []


def test_codex_shows_a_plain_answer(server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A plain answer with no tool call; Codex shows the model's text as its last message."""
    engine: FakeEngine = server.engine
    engine.reset(say("Hello from the server."))
    home, work = tmp_path_factory.mktemp("codex-home"), tmp_path_factory.mktemp("codex-work")

    proc = codex_exec(server.base_url, "Say hello.", home, work)

    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == "Hello from the server."
    assert len(engine.requests) == 1
    assert os.path.basename(str(work)) in "".join(str(t) for t in engine.requests[0].turns)  # its environment
