"""End to end with real parts: vLLM (CPU, tiny deterministic model), Deno + Pyodide workers, uvicorn, openai SDK.

The tiny model has random weights; vLLM structured outputs (`structured_outputs` extension, one regex
per model call) force exactly what it writes, so the test is exact: prompt -> streamed code -> sandbox ->
answer. The loop, the parser, the sandbox and the wire format are all the real ones.
"""

from __future__ import annotations

import base64
import concurrent.futures
import struct
import time

import httpx
import openai
import pytest

from tests.support.real import TINY as MODEL
from tests.support.real import exactly, hermes_call
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse

pytestmark = [pytest.mark.engine, pytest.mark.sandbox]


CI = [{"type": "code_interpreter", "container": {"type": "auto"}}]


def test_code_runs_in_the_sandbox_and_the_answer_follows(real_client: openai.OpenAI) -> None:
    code = 'import numpy as np\nprint("sum:", int(np.arange(10).sum()))'
    answer = "The sum is 45."
    with real_client.responses.stream(
        model=MODEL,
        input="Sum 0..9 with numpy.",
        tools=CI,  # type: ignore[arg-type]
        include=["code_interpreter_call.outputs"],
        temperature=0,
        extra_body={"structured_outputs": [exactly(hermes_call(code)), exactly(answer)]},
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "response.code_interpreter_call_code.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == code
    assert len(deltas) > 3, "the code should stream in several deltas, as the model writes it"
    call, message = final.output
    assert call.type == "code_interpreter_call" and call.status == "completed"
    assert call.code == code and call.container_id.startswith("cntr_")
    assert call.outputs is not None and call.outputs[0].type == "logs"
    assert call.outputs[0].logs == "sum: 45\n"
    assert message.type == "message" and final.output_text == answer
    assert final.usage is not None and final.usage.input_tokens > 0 and final.usage.output_tokens > 0


def test_raw_stream_is_exact_and_plots_come_back_as_png(real_server: LiveServer) -> None:
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')"
    body = {
        "model": MODEL,
        "input": "Plot squares.",
        "tools": CI,
        "include": ["code_interpreter_call.outputs"],
        "stream": True,
        "structured_outputs": [exactly(hermes_call(code)), exactly("Here is the plot.")],
    }
    r = httpx.post(real_server.base_url + "/v1/responses", json=body, timeout=300)
    events = parse_sse(r.text)
    check_stream(events)
    item = next(e["item"] for e in events if e["type"] == "response.output_item.done")
    images = [o for o in item["outputs"] if o["type"] == "image"]
    assert len(images) == 1
    png = base64.b64decode(images[0]["url"].removeprefix("data:image/png;base64,"))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 100 and height > 100


def test_state_persists_across_turns_in_the_container(real_client: openai.OpenAI) -> None:
    first = real_client.responses.create(
        model=MODEL,
        input="Set x.",
        tools=CI,
        include=["code_interpreter_call.outputs"],  # type: ignore[arg-type,list-item]
        extra_body={"structured_outputs": [exactly(hermes_call("x = 20 + 1")), exactly("Done.")]},
    )
    second = real_client.responses.create(
        model=MODEL,
        input="Double it.",
        tools=CI,
        include=["code_interpreter_call.outputs"],  # type: ignore[arg-type,list-item]
        previous_response_id=first.id,
        extra_body={"structured_outputs": [exactly(hermes_call("x * 2")), exactly("42.")]},
    )
    assert second.output[0].container_id == first.output[0].container_id  # type: ignore[union-attr]
    assert second.output[0].outputs[0].logs.strip() == "42"  # type: ignore[union-attr,index]


def test_python_error_is_reported_and_the_loop_goes_on(real_client: openai.OpenAI) -> None:
    r = real_client.responses.create(
        model=MODEL,
        input="Divide.",
        tools=CI,
        include=["code_interpreter_call.outputs"],  # type: ignore[arg-type,list-item]
        extra_body={"structured_outputs": [exactly(hermes_call("1/0")), exactly("It failed.")]},
    )
    assert r.status == "completed"
    assert "ZeroDivisionError" in r.output[0].outputs[0].logs  # type: ignore[union-attr,index]
    assert r.output_text == "It failed."


def test_max_output_tokens_is_incomplete(real_client: openai.OpenAI) -> None:
    r = real_client.responses.create(
        model=MODEL,
        input="Talk.",
        max_output_tokens=16,
        extra_body={"structured_outputs": {"regex": "(ab){200}"}},
    )
    assert r.status == "incomplete" and r.incomplete_details is not None
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage is not None and r.usage.output_tokens == 16


# Off-heap buffers through Pyodide's bridge to JS, past all the memory a worker may use (1 GiB wasm heap +
# 512 MiB JS heap + the runtime's share): the OS limits must stop it, not the host's memory.
OFF_HEAP = """import js
held = []
for i in range(10):
    a = js.Uint8Array.new(256 << 20)
    a.fill(1)
    held.append(a)
print("allocated", len(held))"""


def test_hostile_code_forced_through_the_model_is_held(real_server: LiveServer) -> None:
    """The model is made to write the attack (structured outputs: any caller can do this); meanwhile another
    response runs code in its own container and /health answers."""
    url = real_server.base_url
    attack = {
        "model": MODEL,
        "input": "Allocate.",
        "tools": CI,
        "include": ["code_interpreter_call.outputs"],
        "structured_outputs": [exactly(hermes_call(OFF_HEAP)), exactly("Held.")],
    }
    other = {**attack, "structured_outputs": [exactly(hermes_call("print(6 * 7)")), exactly("42.")]}
    health: list[float] = []
    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        hostile = ex.submit(httpx.post, url + "/v1/responses", json=attack, timeout=300)
        time.sleep(1.0)
        bystander = ex.submit(httpx.post, url + "/v1/responses", json=other, timeout=300)
        while not (hostile.done() and bystander.done()):
            t0 = time.monotonic()
            assert httpx.get(url + "/health", timeout=10).status_code == 200
            health.append(time.monotonic() - t0)
            time.sleep(0.2)
        r, b = hostile.result(), bystander.result()
    assert r.status_code == 200 and b.status_code == 200, (r.text[-500:], b.text[-500:])
    call, message = r.json()["output"]
    logs = "".join(o.get("logs", "") for o in call["outputs"] or [])
    assert "allocated 10" not in logs, logs
    # held either way: the allocation refused past the worker's data limit (a RangeError; or V8 itself out of
    # memory, its heap unable to grow either: the worker dies saying so), or the worker killed at its memory
    refused = ("RangeError" in logs and "allocation failed" in logs) or "out of memory" in logs.lower()
    killed = "memory" in logs and ("killed by the kernel" in logs or "killed by the sandbox" in logs)
    assert refused or killed, logs
    assert message["content"][0]["text"] == "Held."
    call_b = b.json()["output"][0]
    assert call_b["status"] == "completed" and call_b["outputs"][0]["logs"] == "42\n", call_b
    assert health and max(health) < 2.0, f"/health stalled: {max(health):.2f} s"
    sandbox = httpx.get(url + "/ready", timeout=10).json()["checks"]["sandbox"]
    assert f"isolation: {real_server.interpreter.stats()['isolation']}" in sandbox["detail"], sandbox
