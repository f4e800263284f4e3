"""langchain-openai, unchanged: `ChatOpenAI(use_responses_api=True)` with the built-in code-interpreter tool bound,
invoked and streamed, then a second turn that sends the first answer (its code-interpreter blocks included)
back as history.

Outputs are forced with the `structured_outputs` extension passed as `extra_body`, langchain's own way of adding
body fields (per call here, since each call forces different outputs).
"""

from __future__ import annotations

from functools import reduce
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_openai import ChatOpenAI

from tests.support.real import TINY as MODEL
from tests.support.real import exactly, hermes_call

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]

CI = {"type": "code_interpreter", "container": {"type": "auto"}}


def forced(*outputs: str) -> dict[str, Any]:
    return {"structured_outputs": [exactly(o) for o in outputs]}


@pytest.fixture
def llm(base_url: str) -> Any:
    chat = ChatOpenAI(
        model=MODEL,
        base_url=base_url,
        api_key="unused",
        use_responses_api=True,
        max_retries=0,
        timeout=300,
        include=["code_interpreter_call.outputs"],
    )
    return chat.bind_tools([CI])


def code_blocks(message: AIMessage) -> list[dict[str, Any]]:
    """The message's code-interpreter content blocks, as langchain-openai writes them (`responses/v1` format)."""
    assert isinstance(message.content, list), message.content
    return [b for b in message.content if isinstance(b, dict) and b.get("type") == "code_interpreter_call"]


def test_invoke_reports_the_code_call_and_the_answer(llm: Any) -> None:
    code = "import math\nprint(math.factorial(5))"
    message = llm.invoke("What is 5!?", extra_body=forced(hermes_call(code), "5! is 120."))
    assert isinstance(message, AIMessage)
    (block,) = code_blocks(message)
    assert (
        block["code"] == code and block["status"] == "completed" and block["container_id"].startswith("cntr_")
    )
    assert block["outputs"] == [{"type": "logs", "logs": "120\n"}]
    assert message.text == "5! is 120."
    assert (
        message.response_metadata["status"] == "completed" and message.id and message.id.startswith("resp_")
    )
    assert message.usage_metadata is not None and message.usage_metadata["output_tokens"] > 0
    # The standard (provider-neutral) view of the same content.
    kinds = [b["type"] for b in message.content_blocks]
    assert kinds == ["server_tool_call", "server_tool_result", "text"], kinds
    call = message.content_blocks[0]
    assert call["name"] == "code_interpreter" and call["args"]["code"] == code  # type: ignore[typeddict-item]


def test_stream_then_a_second_turn_with_the_history(llm: Any) -> None:
    code = "total = sum([1, 2, 3, 4])\nprint(total)"
    chunks = list(llm.stream("Add 1..4.", extra_body=forced(hermes_call(code), "The total is 10.")))
    assert len(chunks) > 5 and all(isinstance(c, AIMessageChunk) for c in chunks)
    message = reduce(lambda a, b: a + b, chunks)
    (block,) = code_blocks(message)
    assert block["code"] == code and block["outputs"] == [{"type": "logs", "logs": "10\n"}]
    assert message.text == "The total is 10."
    assert message.response_metadata["status"] == "completed"

    history = [HumanMessage("Add 1..4."), message, HumanMessage("Double it.")]
    second = llm.invoke(history, extra_body=forced(hermes_call("print(total * 2)"), "20."))
    (block2,) = code_blocks(second)
    assert block2["outputs"] == [{"type": "logs", "logs": "20\n"}], (
        "the resent call must bring back its container"
    )
    assert block2["container_id"] == block["container_id"]
    assert second.text == "20."
