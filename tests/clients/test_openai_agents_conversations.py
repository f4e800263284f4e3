"""openai-agents (Python), unchanged, keeping its memory in our Conversations API: two `Runner.run` calls with the
hosted code interpreter, first through `OpenAIConversationsSession` (the client reads the conversation's items,
sends them as input and adds the new ones itself), then through `conversation_id` (the server prepends the items
and appends the response's own). Outputs are forced as in `test_openai_agents.py`, whose `ForcedModel` this reuses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from agents import Agent, CodeInterpreterTool, ModelSettings, Runner, set_tracing_disabled
from agents.items import ToolCallItem
from agents.memory import OpenAIConversationsSession
from openai.types.conversations import ConversationItemList
from openai.types.responses import ResponseCodeInterpreterToolCall

from tests.clients.test_openai_agents import ForcedModel
from tests.support.real import TINY as MODEL
from tests.support.real import hermes_call
from tests.support.wire import validate_as

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]

OUTPUTS: Any = ["code_interpreter_call.outputs"]


def _agent(model: ForcedModel) -> Agent:
    return Agent(
        name="analyst",
        instructions="Use Python for arithmetic.",
        model=model,
        model_settings=ModelSettings(temperature=0),
        tools=[CodeInterpreterTool(tool_config={"type": "code_interpreter", "container": {"type": "auto"}})],
    )


def _code_call(result: Any) -> ResponseCodeInterpreterToolCall:
    call = next(i.raw_item for i in result.new_items if isinstance(i, ToolCallItem))
    assert isinstance(call, ResponseCodeInterpreterToolCall)
    return call


async def _kept(client: openai.AsyncOpenAI, conversation_id: str) -> list[dict[str, Any]]:
    """The conversation's items as sent, oldest first, with code outputs (validated as the SDK's list)."""
    page = await client.conversations.items.with_raw_response.list(
        conversation_id, order="asc", limit=100, include=OUTPUTS
    )
    body = page.http_response.json()
    validate_as(ConversationItemList, body)
    return body["data"]  # type: ignore[no-any-return]


def _shape(items: list[dict[str, Any]]) -> list[str]:
    return [f"{i['type']}:{i.get('role', '')}" for i in items]


TWO_RUNS = ["message:user", "code_interpreter_call:", "message:assistant"] * 2


async def test_openai_conversations_session_two_runs_with_code(
    base_url: str, async_sdk: Callable[..., openai.AsyncOpenAI]
) -> None:
    set_tracing_disabled(True)
    client = async_sdk(base_url, timeout=300)
    model = ForcedModel(
        [[hermes_call("v = 6 * 7\nprint(v)"), "It is 42."], [hermes_call("print(v + 1)"), "Then 43."]],
        model=MODEL,
        openai_client=client,
    )
    session = OpenAIConversationsSession(openai_client=client)

    first = await Runner.run(_agent(model), "What is 6*7?", session=session)
    assert first.final_output == "It is 42."
    kept = await _kept(client, session.session_id)
    assert _shape(kept) == TWO_RUNS[:3]
    assert kept[0]["content"][0]["text"] == "What is 6*7?"
    assert kept[1]["code"] == "v = 6 * 7\nprint(v)" and kept[1]["outputs"] == [
        {"type": "logs", "logs": "42\n"}
    ]

    second = await Runner.run(_agent(model), "Add one.", session=session)
    assert second.final_output == "Then 43."
    call = _code_call(second)
    assert call.container_id == kept[1]["container_id"], (
        "the session's code call names the container to reuse"
    )
    sent = [
        i.model_dump(mode="json")
        async for i in client.responses.input_items.list(second.last_response_id, order="asc")
    ]
    assert _shape(sent) == [*TWO_RUNS[:3], "message:user"], "the session's items went first, as input"
    assert sent[1]["id"] == kept[1]["id"] and sent[1]["code"] == kept[1]["code"]
    assert _shape(await _kept(client, session.session_id)) == TWO_RUNS
    assert model.plan == []
    conversation_id = session.session_id
    await session.clear_session()  # deletes the conversation
    with pytest.raises(openai.NotFoundError):
        await client.conversations.retrieve(conversation_id)


async def test_conversation_id_two_runs_server_side(
    base_url: str, async_sdk: Callable[..., openai.AsyncOpenAI]
) -> None:
    set_tracing_disabled(True)
    client = async_sdk(base_url, timeout=300)
    model = ForcedModel(
        [[hermes_call("w = 5\nprint(w * 2)"), "Ten."], [hermes_call("print(w * 3)"), "Fifteen."]],
        model=MODEL,
        openai_client=client,
    )
    conversation = await client.conversations.create(metadata={"user": "test"})

    first = await Runner.run(_agent(model), "Double five.", conversation_id=conversation.id)
    assert first.final_output == "Ten."
    response = await client.responses.retrieve(first.last_response_id)
    assert response.conversation is not None and response.conversation.id == conversation.id
    second = await Runner.run(_agent(model), "Now triple it.", conversation_id=conversation.id)
    assert second.final_output == "Fifteen."
    sent = [i.id async for i in client.responses.input_items.list(second.last_response_id)]
    assert len(sent) == 1, "only the new input was sent: the server prepended the rest"
    kept = await _kept(client, conversation.id)
    assert _shape(kept) == TWO_RUNS
    assert kept[4]["outputs"] == [{"type": "logs", "logs": "15\n"}]
    assert kept[4]["container_id"] == kept[1]["container_id"]
