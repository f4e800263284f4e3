"""The `openai` Node SDK, unchanged (`node/openai_sdk.mjs` on Node >= 22): a streamed code-interpreter turn
through `client.responses.stream()` and its `finalResponse()`, a non-streamed one, and a second turn.

The SDK passes body fields it does not know through, so the script sends `structured_outputs` as a plain
request field; this test plans the outputs and checks what the SDK handed back.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients.node_runner import run_script
from tests.support.real import TINY as MODEL
from tests.support.real import exactly, hermes_call
from tests.support.wire import CODE_TURN_EVENT_RUNS, event_runs, validate_response

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]


def plain(resp: dict[str, Any]) -> dict[str, Any]:
    """A response without the fields the node SDK adds client-side (`output_text`, `output_parsed`, `parsed`)."""
    out = {k: v for k, v in resp.items() if k not in ("output_text", "output_parsed")}
    out["output"] = [
        {**it, "content": [{k: v for k, v in p.items() if k != "parsed"} for p in it["content"]]}
        if "content" in it
        else it
        for it in resp["output"]
    ]
    return out


def test_node_sdk_stream_helper_create_and_second_turn(base_url: str) -> None:
    code = "nums = [4, 8, 15, 16, 23, 42]\nprint(sum(nums))"
    plan = {
        "model": MODEL,
        "streamed": [exactly(hermes_call(code)), exactly("The sum is 108.")],
        "plain": [exactly(hermes_call("z = 7")), exactly("z is set.")],
        "second": [exactly(hermes_call("print(z * 6)")), exactly("z * 6 is 42.")],
    }
    out = run_script("openai_sdk.mjs", base_url, plan)
    assert int(out["node"].lstrip("v").split(".")[0]) >= 22

    assert event_runs(out["types"]) == CODE_TURN_EVENT_RUNS
    assert "".join(out["codeDeltas"]) == code
    streamed = out["streamed"]
    call, message = streamed["output"]
    assert call["type"] == "code_interpreter_call" and call["code"] == code and call["status"] == "completed"
    assert call["outputs"] == [{"type": "logs", "logs": "108\n"}] and call["container_id"].startswith("cntr_")
    assert message["type"] == "message" and out["streamedText"] == "The sum is 108."
    # finalResponse() is what the server stored, once what the SDK adds client-side is taken away.
    assert plain(streamed) == plain(out["retrieved"])
    validate_response(plain(out["retrieved"]))

    assert out["plain"]["status"] == "completed" and out["plainText"] == "z is set."
    second = out["second"]
    assert second["previous_response_id"] == out["plain"]["id"]
    assert second["output"][0]["container_id"] == out["plain"]["output"][0]["container_id"]
    assert second["output"][0]["outputs"] == [{"type": "logs", "logs": "42\n"}]
    assert out["secondText"] == "z * 6 is 42."
