"""openai-agents (Python), unchanged: an Agent with the hosted `CodeInterpreterTool` and a `@function_tool`,
through `OpenAIResponsesModel` on an `AsyncOpenAI` client pointed at the real server, over two turns.

The first turn is streamed (`Runner.run_streamed`): the server runs the code, the model then calls the function
tool, the agent runs it locally and sends its output back for the answer. The second turn
(`Runner.run`) resends the first turn's items as input, the code_interpreter_call among them, which the server
must accept; the code there runs in the same container.

Outputs are forced per request with the `structured_outputs` extension in `ModelSettings.extra_body`, the
agent SDK's own way of adding body fields; since one run makes several requests, the model below sets it for
each call (`dataclasses.replace` of the settings the runner resolved), and the library builds each request.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    CodeInterpreterTool,
    ModelSettings,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ToolCallItem, ToolCallOutputItem
from agents.models.openai_responses import OpenAIResponsesModel
from openai.types.responses import ResponseCodeInterpreterToolCall, ResponseFunctionToolCall

from tests.support.real import TINY as MODEL
from tests.support.real import exactly, hermes_call

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]


def tool_call(name: str, arguments: dict[str, Any]) -> str:
    """The tiny model's (Hermes-style) text for a call of function tool `name`."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


class ForcedModel(OpenAIResponsesModel):
    """`OpenAIResponsesModel` whose requests carry the next planned outputs in `ModelSettings.extra_body`."""

    def __init__(self, plan: list[list[str]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan
        self.sent: list[list[str]] = []

    def _settings(self, settings: ModelSettings) -> ModelSettings:
        outputs = self.plan.pop(0)
        self.sent.append(outputs)
        return dataclasses.replace(settings, extra_body={"structured_outputs": [exactly(o) for o in outputs]})

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: ModelSettings, *a: Any, **k: Any
    ) -> Any:
        return await super().get_response(system_instructions, input, self._settings(model_settings), *a, **k)

    def stream_response(
        self, system_instructions: Any, input: Any, model_settings: ModelSettings, *a: Any, **k: Any
    ) -> Any:
        return super().stream_response(system_instructions, input, self._settings(model_settings), *a, **k)


looked_up: list[str] = []


@function_tool
def lookup(key: str) -> str:
    """Look a word up in the team's glossary."""
    looked_up.append(key)
    return {"answer": "forty-two"}.get(key, "unknown")


async def test_agent_with_code_interpreter_and_function_tool_two_turns(
    base_url: str, async_sdk: Callable[..., openai.AsyncOpenAI]
) -> None:
    set_tracing_disabled(True)
    code1, code2 = "v = 6 * 7\nprint(v)", "print(v + 1)"
    answer1, answer2 = "It is 42, forty-two in words.", "Then 43."
    model = ForcedModel(
        [
            [
                hermes_call(code1),
                tool_call("lookup", {"key": "answer"}),
            ],  # run 1, request 1: code, then the function
            [answer1],  # run 1, request 2: after the function's output
            [hermes_call(code2), answer2],  # run 2: code in the same container, then the answer
        ],
        model=MODEL,
        openai_client=async_sdk(base_url, timeout=300),
    )
    agent = Agent(
        name="analyst",
        instructions="Use Python for arithmetic and the glossary for words.",
        model=model,
        model_settings=ModelSettings(temperature=0),
        tools=[
            CodeInterpreterTool(tool_config={"type": "code_interpreter", "container": {"type": "auto"}}),
            lookup,
        ],
    )
    looked_up.clear()

    streamed = Runner.run_streamed(agent, "What is 6*7, in words?")
    names = [e.name async for e in streamed.stream_events() if e.type == "run_item_stream_event"]
    assert streamed.final_output == answer1
    assert looked_up == ["answer"]
    calls = [i.raw_item for i in streamed.new_items if isinstance(i, ToolCallItem)]
    assert [type(c) for c in calls] == [ResponseCodeInterpreterToolCall, ResponseFunctionToolCall]
    code_call, function_call = calls
    assert isinstance(code_call, ResponseCodeInterpreterToolCall) and isinstance(
        function_call, ResponseFunctionToolCall
    )
    assert (
        code_call.code == code1
        and code_call.status == "completed"
        and code_call.container_id.startswith("cntr_")
    )
    assert function_call.name == "lookup" and json.loads(function_call.arguments) == {"key": "answer"}
    outputs = [i.output for i in streamed.new_items if isinstance(i, ToolCallOutputItem)]
    assert outputs == ["forty-two"]
    assert (
        names.count("tool_called") == 2
        and names.count("tool_output") == 1
        and names[-1] == "message_output_created"
    )
    assert len(streamed.raw_responses) == 2

    second_input = [*streamed.to_input_list(), {"role": "user", "content": "Add one."}]
    assert any(item.get("type") == "code_interpreter_call" for item in second_input)  # resent as input
    result = await Runner.run(agent, second_input)
    assert result.final_output == answer2
    call2 = next(i.raw_item for i in result.new_items if isinstance(i, ToolCallItem))
    assert isinstance(call2, ResponseCodeInterpreterToolCall) and call2.code == code2
    assert call2.container_id == code_call.container_id, (
        "the resent code_interpreter_call names the container to reuse"
    )
    assert model.plan == [] and len(model.sent) == 3
