"""The coding agents' client-run tools over the scripted engine: `shell`, `local_shell` and `apply_patch` offered
as functions, the model's calls made into the SDK's `shell_call` / `local_shell_call` / `apply_patch_call` items
(streamed and not, and through the SDK's stream helper), their outputs read back for the model, and the 400s.
openai-agents running them for real: tests/clients/test_openai_agents_coding.py."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseApplyPatchToolCall, ResponseFunctionShellToolCall
from openai.types.responses import ResponseShellCallCommandAddedEvent as ShellAdded
from openai.types.responses import ResponseShellCallCommandDeltaEvent as ShellDelta
from openai.types.responses import ResponseShellCallCommandDoneEvent as ShellDone
from openai.types.responses.response_output_item import LocalShellCall

from tests.support.fakes import FakeEngine, function_call, say
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, event_runs, parse_sse, validate_as, validate_response
from tests.tools.test_functions import custom_call
from vllm_responses.engine.types import ForcedTool, ToolCall, ToolResult
from vllm_responses.tools.shell_patch import coding_call_item

MODEL = "fake-model"
TOOLS: list[Any] = [
    {"type": "shell", "environment": {"type": "local"}},
    {"type": "local_shell"},
    {"type": "apply_patch"},
]
SHELL_OUTPUT = [
    {"stdout": "a.txt\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
    {"stdout": "", "stderr": "no such file", "outcome": {"type": "exit", "exit_code": 2}},
    {"stdout": "", "stderr": "", "outcome": {"type": "timeout"}},
]


def post(server: LiveServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.base_url + "/v1/responses", json={"model": MODEL, **body}, timeout=30)


def test_the_model_is_offered_each_as_a_function(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say("ok"))
    r = client.responses.create(model=MODEL, input="q", tools=TOOLS)
    assert [t.type for t in r.tools] == ["shell", "local_shell", "apply_patch"]
    offered = {t.name: t for t in engine.requests[0].tools}
    assert list(offered) == ["shell", "local_shell", "apply_patch"]
    assert offered["shell"].parameters["required"] == ["commands"]
    assert offered["apply_patch"].parameters["properties"]["type"]["enum"] == [
        "create_file",
        "update_file",
        "delete_file",
    ]


def test_a_shell_call_and_its_output_round_trip(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(
        function_call("shell", {"commands": ["ls", "cat b", "sleep 9"], "timeout_ms": 500}), say("Done.")
    )
    first = client.responses.create(model=MODEL, input="look", tools=TOOLS)
    validate_response(first.model_dump(mode="json", exclude_unset=True, by_alias=True))
    (call,) = first.output
    assert isinstance(call, ResponseFunctionShellToolCall) and call.status == "completed"
    assert call.action.commands == ["ls", "cat b", "sleep 9"] and call.action.timeout_ms == 500
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        tools=TOOLS,
        input=[{"type": "shell_call_output", "call_id": call.call_id, "output": SHELL_OUTPUT}],
    )
    assert second.output_text == "Done."
    turns = engine.requests[1].turns
    assert (
        ToolCall(call.call_id, "shell", '{"commands": ["ls", "cat b", "sleep 9"], "timeout_ms": 500}')
        in turns
    )
    result = ToolResult(
        call.call_id, "shell", "a.txt\n[exit code 0]\n\nstderr:\nno such file\n[exit code 2]\n\n[timed out]"
    )
    assert result in turns


def test_a_local_shell_call_and_its_output_round_trip(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(
        function_call("local_shell", {"command": ["ls", "-la"], "working_directory": "/w"}), say("Ok.")
    )
    first = client.responses.create(model=MODEL, input="look", tools=TOOLS)
    validate_response(first.model_dump(mode="json", exclude_unset=True, by_alias=True))
    (call,) = first.output
    assert isinstance(call, LocalShellCall)
    assert call.action.command == ["ls", "-la"] and call.action.working_directory == "/w"
    # The SDK types the output's call as `id`; openai-agents sends `call_id`: both are read.
    for answer in ({"id": call.call_id}, {"call_id": call.call_id}):
        client.responses.create(
            model=MODEL,
            previous_response_id=first.id,
            tools=TOOLS,
            input=[{"type": "local_shell_call_output", "output": "total 0", **answer}],  # type: ignore[list-item]
        )
        assert ToolResult(call.call_id, "local_shell", "total 0") in engine.requests[-1].turns


def test_an_apply_patch_call_streams_whole_and_its_output_is_read(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    engine.reset(function_call("apply_patch", {"type": "update_file", "path": "a.py", "diff": "@@\n-x\n+y"}))
    events = parse_sse(post(fake_server, {"input": "fix", "tools": TOOLS, "stream": True}).text)
    check_stream(events)
    kinds = [e["type"] for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    assert events[2]["item"]["status"] == "in_progress" and events[3]["item"]["status"] == "completed"
    call = validate_as(ResponseApplyPatchToolCall, events[3]["item"])
    assert (call.operation.type, call.operation.path, call.operation.diff) == (
        "update_file",
        "a.py",
        "@@\n-x\n+y",
    )
    engine.reset(say("Patched."))
    r = post(
        fake_server,
        {
            "input": [
                {"role": "user", "content": "fix"},
                events[3]["item"],
                {
                    "type": "apply_patch_call_output",
                    "call_id": call.call_id,
                    "status": "failed",
                    "output": "no a.py",
                },
            ],
            "tools": TOOLS,
            "store": False,
        },
    )
    assert r.status_code == 200, r.text
    assert ToolResult(call.call_id, "apply_patch", "[failed] no a.py") in engine.requests[0].turns
    assert ToolCall(
        call.call_id, "apply_patch", '{"type": "update_file", "path": "a.py", "diff": "@@\\n-x\\n+y"}'
    ) in (engine.requests[0].turns)


def test_the_sdk_stream_helper_reads_the_calls(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(
        function_call("shell", {"commands": ["pwd"]}, index=0, finish=False)
        + function_call("local_shell", {"command": ["id"]}, index=1)
    )
    with client.responses.stream(model=MODEL, input="q", tools=TOOLS) as stream:
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["shell_call", "local_shell_call"]


def test_a_shell_call_streams_its_commands_as_the_model_writes_them(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    commands = ["ls -la", 'echo "a\\tb" > c.txt', ""]
    engine.reset(function_call("shell", {"commands": commands, "timeout_ms": 500}))
    events = parse_sse(post(fake_server, {"input": "look", "tools": TOOLS, "stream": True}).text)
    check_stream(events)
    assert event_runs(e["type"] for e in events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        *[
            *["response.shell_call_command.added", "response.shell_call_command.delta"],
            "response.shell_call_command.done",
        ]
        * 2,
        "response.shell_call_command.added",  # the empty command: no delta
        "response.shell_call_command.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert events[2]["item"]["status"] == "in_progress" and events[2]["item"]["action"]["commands"] == []
    deltas = [e for e in events if e["type"] == "response.shell_call_command.delta"]
    assert len(deltas) > 2  # as the model writes, not whole
    for i, command in enumerate(commands):
        assert "".join(e["delta"] for e in deltas if e["command_index"] == i) == command
        (done,) = [
            e for e in events if e["type"] == "response.shell_call_command.done" and e["command_index"] == i
        ]
        assert done["command"] == command and done["output_index"] == 0
    call = validate_as(ResponseFunctionShellToolCall, events[-2]["item"])
    assert call.id == events[2]["item"]["id"] and call.call_id == events[2]["item"]["call_id"]
    assert call.action.commands == commands and call.status == "completed"


def test_shell_arguments_of_another_shape_still_end_in_command_events(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    engine.reset(function_call("shell", {"command": "pwd"}))
    events = parse_sse(post(fake_server, {"input": "look", "tools": TOOLS, "stream": True}).text)
    check_stream(events)
    command = [e for e in events if e["type"].startswith("response.shell_call_command.")]
    assert [(e["type"], e["command_index"]) for e in command] == [
        ("response.shell_call_command.added", 0),
        ("response.shell_call_command.delta", 0),
        ("response.shell_call_command.done", 0),
    ]
    assert command[1]["delta"] == command[2]["command"] == "pwd"


def test_the_sdk_stream_helper_types_the_shell_command_events(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(function_call("shell", {"commands": ["pwd", "id -u"]}))
    with client.responses.stream(model=MODEL, input="q", tools=TOOLS) as stream:
        seen = list(stream)
        final = stream.get_final_response()
    typed = [e for e in seen if isinstance(e, (ShellAdded, ShellDelta, ShellDone))]
    assert [type(e) for e in typed if not isinstance(e, ShellDelta)] == [ShellAdded, ShellDone] * 2
    assert [e.command for e in typed if isinstance(e, ShellDone)] == ["pwd", "id -u"]
    (call,) = final.output
    assert isinstance(call, ResponseFunctionShellToolCall) and call.action.commands == ["pwd", "id -u"]


@pytest.mark.parametrize(
    ("arguments", "item"),
    [
        ('"ls -la"', {"commands": ["ls -la"]}),  # a bare string: the command
        ("not json", {"commands": ["not json"]}),
        ('{"command": "pwd"}', {"commands": ["pwd"]}),
        ('{"commands": ["a", 1], "timeout_ms": -5}', {"commands": ["a", "1"], "timeout_ms": None}),
    ],
)
def test_shell_arguments_that_miss_the_shape_are_read_as_far_as_they_go(
    arguments: str, item: dict[str, Any]
) -> None:
    call = coding_call_item("shell_call", arguments)
    assert {k: call["action"][k] for k in item} == item  # type: ignore[literal-required]
    validate_as(ResponseFunctionShellToolCall, dict(call))


def test_an_apply_patch_without_a_known_type_is_an_update() -> None:
    call = coding_call_item("apply_patch_call", '{"path": "a", "diff": "+x"}')
    assert call["operation"] == {"type": "update_file", "path": "a", "diff": "+x"}  # type: ignore[typeddict-item]
    deleted = coding_call_item("apply_patch_call", '{"type": "delete_file", "path": "a", "diff": "ignored"}')
    assert deleted["operation"] == {"type": "delete_file", "path": "a"}  # type: ignore[typeddict-item]
    validate_as(ResponseApplyPatchToolCall, dict(deleted))


def test_tool_choice_forces_a_coding_tool(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(function_call("apply_patch", {"type": "delete_file", "path": "x"}))
    client.responses.create(model=MODEL, input="q", tools=TOOLS, tool_choice={"type": "apply_patch"})
    assert engine.requests[0].tool_choice == ForcedTool("apply_patch")
    allowed = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "shell"}]}
    client.responses.create(model=MODEL, input="q", tools=TOOLS, tool_choice=allowed)  # type: ignore[arg-type]
    assert [t.name for t in engine.requests[1].tools] == ["shell"]


def test_a_custom_tool_named_like_a_coding_tool_is_not_one(client: openai.OpenAI, engine: FakeEngine) -> None:
    """Without the `shell` tool, a custom tool of that name is an ordinary custom tool."""
    engine.reset(custom_call("shell", "ls"))
    r = client.responses.create(model=MODEL, input="q", tools=[{"type": "custom", "name": "shell"}])
    assert r.output[0].type == "custom_tool_call"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (
            {"tools": [{"type": "shell", "environment": {"type": "container_auto"}}]},
            "tools[0].environment.type",
        ),
        ({"tools": [{"type": "shell"}, {"type": "function", "name": "shell"}]}, "tools"),
        ({"tools": [{"type": "shell"}], "tool_choice": {"type": "apply_patch"}}, "tool_choice"),
        (
            {
                "tools": [{"type": "shell"}],
                "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "local_shell"}]},
            },
            "tool_choice.tools[0]",
        ),
        (
            {"tools": TOOLS, "input": [{"type": "shell_call_output", "call_id": "nope", "output": []}]},
            "input",
        ),
        (
            {"tools": TOOLS, "input": [{"type": "local_shell_call_output", "id": "nope", "output": ""}]},
            "input",
        ),
        (
            {
                "tools": TOOLS,
                "input": [{"type": "apply_patch_call_output", "call_id": "c", "status": "maybe"}],
            },
            "input[0]",
        ),
        (
            {"tools": TOOLS, "input": [{"type": "shell_call", "call_id": "c", "action": {"commands": "ls"}}]},
            "input[0].action.commands",
        ),
    ],
)
def test_bad_coding_tools_and_items_are_a_400(
    fake_server: LiveServer, body: dict[str, Any], param: str
) -> None:
    r = post(fake_server, {"input": "q", **body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"].startswith(param), r.json()
