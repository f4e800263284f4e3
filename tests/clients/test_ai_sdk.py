"""The Vercel AI SDK (`ai` + `@ai-sdk/openai`), unchanged (`node/ai_sdk.mjs` on Node >= 22): `streamText` with
`openai.tools.codeInterpreter()` on its defaults, over two turns; the second sends the first turn's messages
back, which the SDK turns into `item_reference` items (it stores responses by default).

The SDK cannot add a body field, so the script gives the provider its own `fetch` (a documented provider
option) that adds `structured_outputs` to the body the SDK built, and records that body for this test.
"""

from __future__ import annotations

import pytest

from tests.clients.node_runner import run_script
from tests.support.real import TINY as MODEL
from tests.support.real import exactly, hermes_call

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]


def test_stream_text_with_the_code_interpreter_tool_two_turns(base_url: str) -> None:
    code1, code2 = "w = 6 * 7\nprint(w)", "print(w + 1)"
    plan = {
        "model": MODEL,
        "turns": [
            [exactly(hermes_call(code1)), exactly("It is 42.")],
            [exactly(hermes_call(code2)), exactly("Now 43.")],
        ],
    }
    out = run_script("ai_sdk.mjs", base_url, plan)

    # What the SDK sends on its defaults: container auto, the include it adds itself, streaming.
    first_body, second_body = out["sent"]
    assert first_body["tools"] == [{"type": "code_interpreter", "container": {"type": "auto"}}]
    assert first_body["include"] == ["code_interpreter_call.outputs"] and first_body["stream"] is True
    assert [i.get("type") for i in second_body["input"]] == [None, "item_reference", "item_reference", None]

    first = out["first"]
    (call,) = first["toolCalls"]
    assert call["toolName"] == "code_interpreter" and call["providerExecuted"] is True
    assert call["input"]["code"] == code1 and call["input"]["containerId"].startswith("cntr_")
    (result,) = first["toolResults"]
    assert result["toolCallId"] == call["toolCallId"]
    assert result["output"] == {"outputs": [{"type": "logs", "logs": "42\n"}]}
    assert first["text"] == "It is 42." and first["finishReason"] == "stop"
    assert first["usage"]["outputTokens"] > 0
    parts = [t for t in first["partTypes"] if t not in ("tool-input-delta", "text-delta")]
    assert parts == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-end",
        "tool-call",
        "tool-result",
        "text-start",
        "text-end",
        "finish-step",
        "finish",
    ]

    second = out["second"]
    (call2,) = second["toolCalls"]
    assert call2["input"] == {"code": code2, "containerId": call["input"]["containerId"]}
    (result2,) = second["toolResults"]
    assert result2["output"] == {"outputs": [{"type": "logs", "logs": "43\n"}]}, (
        "the referenced call's container"
    )
    assert second["text"] == "Now 43."
