"""Codex CLI (npm `@openai/codex`, its real binary, pinned in tests/clients/node) against a live server.

`codex exec` is pointed at the server as a custom provider (`wire_api="responses"`), as docs/clients.md tells
users to. Its requests are what it sends OpenAI: developer messages, ~40 KB of instructions and tools, function
tools with `strict`, a `namespace` tool, `web_search`, `reasoning`, `include: ["reasoning.encrypted_content"]`,
`store: false`, `prompt_cache_key`, `client_metadata`. The model is the real engine (vLLM on CPU, the tiny
model given a window long enough for Codex's ~20k-token prompt), each call forced to write the planned text
(`ForcedEngine`: Codex builds its own requests, so the `structured_outputs` field cannot be sent) so that
the run is exact: Codex asks, the model calls `exec_command` (Hermes text, parsed back by the server), Codex
runs the command and sends its output back, the model answers, and Codex exits 0 with that answer. Codex's
own sandbox is bypassed: it is Codex's business, not the server's, and needs user namespaces that a CI host
may lack. A last session runs on a reasoning copy of the tiny model (a `<think>` template), with a recorder in
front of the server that keeps what crossed the wire: Codex's request bodies and the events streamed back.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from tests.clients.node_runner import NODE_DIR, node_binary
from tests.clients.test_openai_agents import tool_call
from tests.support.real import TINY, ForcedEngine, long_tiny_model, tiny_model_server
from tests.support.reasoning_models import reasoning_tiny_model
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse
from vllm_responses.engine.types import Message, Reasoning, ToolCall, ToolResult

CODEX = NODE_DIR / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    model = long_tiny_model(tmp_path_factory.mktemp("model"))
    live = tiny_model_server(workers=0, model=model, max_model_len=65536, wrap=ForcedEngine)
    yield live
    live.stop()


def codex_exec(
    base_url: str, prompt: str, home: Path, work: Path, *config: str, flags: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """`codex exec PROMPT` in `work` with the server as its model provider (the `-c` form of docs/clients.md);
    `config`, more `-c` settings; `flags`, more options of `codex exec` (`--json`)."""
    if not CODEX.is_file():
        pytest.fail(f"the Codex CLI is not installed at {CODEX}: run scripts/setup.sh")
    node = node_binary()
    provider = f'{{name="vr",base_url="{base_url}/v1",wire_api="responses",env_key="VR_KEY"}}'
    argv = [str(node), str(CODEX), "exec", "--skip-git-repo-check", "--color", "never"]
    argv += ["--dangerously-bypass-approvals-and-sandbox", "-m", TINY]
    argv += ["-c", "model_provider=vr", "-c", f"model_providers.vr={provider}"]
    argv += [arg for c in config for arg in ("-c", c)] + [*flags, prompt]
    env = {"PATH": f"{node.parent}:/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(home), "VR_KEY": "k"}
    return subprocess.run(
        argv, cwd=work, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )


def short_instructions(home: Path) -> list[str]:
    """Codex's `model_instructions_file` set to two lines in place of its ~18 KB of base instructions: the
    prompt halves (the tools stay as Codex sends them), which keeps the sessions of several model calls quick
    on a slow host. The first test keeps Codex's own instructions."""
    path = home / "instructions.md"
    path.write_text("You are a coding agent. Run shell commands with exec_command.\n")
    return [f"model_instructions_file={path}"]


def test_codex_exec_runs_a_command_and_answers(
    server: LiveServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    engine: ForcedEngine = server.engine
    answer = "The command printed: codex-was-here"
    engine.plan = [tool_call("exec_command", {"cmd": "echo codex-was-here"}), answer]
    home, work = tmp_path_factory.mktemp("codex-home"), tmp_path_factory.mktemp("codex-work")

    proc = codex_exec(server.base_url, "Run `echo codex-was-here` and tell me what it printed.", home, work)

    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == answer, proc.stderr[-4000:]
    assert "codex-was-here" in proc.stderr  # Codex shows the command's output as it runs it
    first, second = engine.requests
    offered = {t.name for t in first.tools}
    assert "exec_command" in offered
    # Codex's `namespace` tool: its functions offered as namespace__name; `web_search` (no backend): not.
    assert any("__" in name for name in offered), offered
    assert not any("web_search" in name for name in offered)
    assert first.parallel_tool_calls is True
    assert any(isinstance(t, Message) and t.role == "developer" for t in first.turns)
    call = next(t for t in second.turns if isinstance(t, ToolCall))
    assert call.name == "exec_command" and json.loads(call.arguments) == {"cmd": "echo codex-was-here"}
    result = next(t for t in second.turns if isinstance(t, ToolResult))
    assert result.call_id == call.call_id and "codex-was-here" in result.output
    assert engine.plan == []


def test_codex_shows_a_plain_answer(server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> None:
    """One model call, no tool call; Codex shows the model's text as its last message."""
    engine: ForcedEngine = server.engine
    engine.requests.clear()
    engine.plan = ["Hello from the server."]
    home, work = tmp_path_factory.mktemp("codex-home"), tmp_path_factory.mktemp("codex-work")

    proc = codex_exec(server.base_url, "Say hello.", home, work, *short_instructions(home))

    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == "Hello from the server."
    assert len(engine.requests) == 1 and engine.plan == []
    turns = engine.requests[0].turns
    assert str(work) in "".join(str(t) for t in turns)  # its environment context
    assert any(
        isinstance(t, Message) and t.text.startswith("You are a coding agent. Run shell") for t in turns
    )


def test_a_long_session_compacts_as_codex_asks(
    server: LiveServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With a small auto-compact limit, Codex compacts after each tool turn: a request with no tools asking the
    model for a handoff summary, then the next turn from that summary. Both go through the server as ordinary
    responses (Codex compacts this way with a custom provider), and the session ends with the answer."""
    engine: ForcedEngine = server.engine
    engine.requests.clear()
    engine.plan = [
        tool_call("exec_command", {"cmd": "echo one"}),
        "SUMMARY ONE: echo one ran.",
        tool_call("exec_command", {"cmd": "echo two"}),
        "SUMMARY TWO: both ran.",
        "Both commands ran.",
    ]
    home, work = tmp_path_factory.mktemp("codex-home"), tmp_path_factory.mktemp("codex-work")

    proc = codex_exec(
        server.base_url,
        "Run `echo one`, then `echo two`.",
        home,
        work,
        "model_auto_compact_token_limit=2000",
        "model_context_window=60000",
        *short_instructions(home),
    )

    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == "Both commands ran."
    assert proc.stderr.count("context compacted") == 2 and engine.plan == []
    calls = engine.requests
    summarising = [r for r in calls if not r.tools]
    assert len(summarising) == 2 and all("COMPACTION" in str(r.turns[-1]) for r in summarising)
    after = calls[2]  # the turn that goes on from the first summary
    assert any(isinstance(t, Message) and "SUMMARY ONE" in t.text for t in after.turns)


@dataclass
class Exchange:
    """One `POST /v1/responses` as it crossed the wire: the JSON body Codex sent, the bytes the server sent back."""

    request: dict[str, Any]
    response: bytearray = field(default_factory=bytearray)

    def events(self) -> list[dict[str, Any]]:
        """The response's SSE events, checked as sent (`tests/support/wire.py`)."""
        return parse_sse(self.response.decode())


class Recorder:
    """ASGI middleware in front of the server: each `POST /v1/responses` kept as an `Exchange`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.exchanges: list[Exchange] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"], scope["path"]) != ("POST", "/v1/responses"):
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        exchange = Exchange(json.loads(body))
        self.exchanges.append(exchange)
        given = False

        async def replay() -> AsgiMessage:
            nonlocal given
            if given:
                return await receive()
            given = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def kept(message: AsgiMessage) -> None:
            if message["type"] == "http.response.body":
                exchange.response += message.get("body", b"")
            await send(message)

        await self.app(scope, replay, kept)


def long_reasoning_model(parent: Path) -> Path:
    """The tiny reasoning model (`<think>` template) with the long window Codex's prompt needs."""
    copy = reasoning_tiny_model(parent)
    config = json.loads((copy / "config.json").read_text())
    config["max_position_embeddings"] = 65536
    (copy / "config.json").write_text(json.dumps(config))
    return copy


@pytest.fixture(scope="module")
def reasoning_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Recorder]]:
    recorders: list[Recorder] = []

    def recorded(app: ASGIApp) -> ASGIApp:
        recorders.append(Recorder(app))
        return recorders[-1]

    model = long_reasoning_model(tmp_path_factory.mktemp("model"))
    live = tiny_model_server(workers=0, model=model, max_model_len=65536, wrap=ForcedEngine, asgi=recorded)
    yield live, recorders[0]
    live.stop()


def test_codex_shows_the_reasoning_summaries_the_server_streams(
    reasoning_server: tuple[LiveServer, Recorder], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Codex asks for `reasoning.summary: "auto"` and shows a model's reasoning only through its summary (the
    reasoning itself, `content`, it does not show). On a reasoning model each of the two calls reasons first;
    the server streams each reasoning as its summary (the four summary events), and `codex exec --json` shows
    each as a `reasoning` item, before the command it led to and before the answer."""
    server, recorder = reasoning_server
    engine: ForcedEngine = server.engine
    first_thought, second_thought = "Run echo to see the marker.", "The echo printed the marker; say so."
    answer = "It printed: summary-marker"
    engine.plan = [
        f"<think>{first_thought}</think>" + tool_call("exec_command", {"cmd": "echo summary-marker"}),
        f"<think>{second_thought}</think>{answer}",
    ]
    home, work = tmp_path_factory.mktemp("codex-home"), tmp_path_factory.mktemp("codex-work")

    proc = codex_exec(
        server.base_url,
        "Run `echo summary-marker` and tell me what it printed.",
        home,
        work,
        'model_reasoning_summary="auto"',
        *short_instructions(home),
        flags=["--json"],
    )

    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    shown = [e["item"] for e in lines if e["type"] == "item.completed" and e["item"]["type"] != "error"]
    assert [(it["type"], it.get("text")) for it in shown] == [
        ("reasoning", first_thought),
        ("command_execution", None),
        ("reasoning", second_thought),
        ("agent_message", answer),
    ], proc.stdout
    assert shown[1]["aggregated_output"] == "summary-marker\n"
    # What Codex asked for, on both calls, and what the server streamed: the summary events of each reasoning,
    # then (the second call) the first reasoning item, summary and all, sent back.
    asked, sent_back = recorder.exchanges
    assert asked.request["reasoning"] == sent_back.request["reasoning"] == {"summary": "auto"}
    assert "reasoning.encrypted_content" in asked.request["include"]
    for exchange, thought in ((asked, first_thought), (sent_back, second_thought)):
        events = exchange.events()
        check_stream(events)
        summary = [e for e in events if e["type"].startswith("response.reasoning_summary_")]
        assert [e["type"] for e in summary if not e["type"].endswith(".delta")] == [
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
        ]
        assert "".join(e["delta"] for e in summary if e["type"].endswith(".delta")) == thought
        assert summary[-2]["text"] == thought
    resent = next(it for it in sent_back.request["input"] if it["type"] == "reasoning")
    assert resent["summary"] == [{"type": "summary_text", "text": first_thought}]
    assert Reasoning(first_thought) in engine.requests[1].turns  # the model reads its reasoning again
    assert engine.plan == []
