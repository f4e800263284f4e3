"""The HTTP API through the real `openai` SDK and raw SSE, over the scripted engine and in-process interpreter."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine, code_call, function_call, say, think
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, validate_response
from vllm_responses.engine.base import EngineError, EngineRejected
from vllm_responses.engine.types import CODE_TOOL_NAME, Message, ToolCall, ToolResult

MODEL = "fake-model"
CI = [{"type": "code_interpreter", "container": {"type": "auto"}}]


def _plain(resp: openai.types.responses.Response) -> object:
    """A response as JSON, without the SDK's client-side additions (`parsed`, `output_text`)."""
    data = json.loads(resp.model_dump_json(exclude={"output_text"}))
    for item in data["output"]:
        for part in item.get("content") or []:
            part.pop("parsed", None)
    return data


def wait_until(condition: Callable[[], object], timeout_s: float = 10.0) -> None:
    """Poll `condition` until it is true; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not true after {timeout_s} s"
        time.sleep(0.01)


def raw_stream(server: LiveServer, body: dict) -> list[dict]:
    with httpx.Client(timeout=30) as http:
        r = http.post(server.base_url + "/v1/responses", json={**body, "stream": True})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(r.text)
    check_stream(events)
    return events


def test_plain_text_non_stream(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say("The answer is 42."))
    resp = client.responses.create(model=MODEL, input="What is 6*7?", instructions="Be brief.")
    assert resp.status == "completed"
    assert resp.output_text == "The answer is 42."
    assert resp.usage is not None and resp.usage.output_tokens > 0
    assert resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens
    assert engine.requests[0].turns == (Message("system", "Be brief."), Message("user", "What is 6*7?"))
    validate_response(client.responses.retrieve(resp.id).model_dump(mode="json", exclude_unset=True))


def test_code_interpreter_stream_order_and_outputs(fake_server: LiveServer, engine: FakeEngine) -> None:
    code = 'x = 6 * 7\nprint("x is", x)\nx + 1  # fake-image'
    engine.reset(code_call(code), say("It printed x is 42."))
    events = raw_stream(
        fake_server,
        {"model": MODEL, "input": "compute", "tools": CI, "include": ["code_interpreter_call.outputs"]},
    )
    types = [e["type"] for e in events]
    ci = [t for t in types if "code_interpreter" in t or t.startswith("response.output_item")][:7]
    assert ci == [
        "response.output_item.added",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.delta",
    ]
    tail = [t for t in types if t != "response.code_interpreter_call_code.delta"]
    assert tail[:9] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.output_item.done",
        "response.output_item.added",
    ]
    added = events[types.index("response.output_item.added")]["item"]
    assert added["code"] == "" and added["status"] == "in_progress" and added["outputs"] is None
    assert added["container_id"].startswith("cntr_")
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.code_interpreter_call_code.delta")
    assert deltas == code
    done = next(e for e in events if e["type"] == "response.output_item.done")["item"]
    assert done["status"] == "completed"
    assert done["outputs"][0] == {"type": "logs", "logs": "x is 42\n43\n"}
    assert done["outputs"][1]["type"] == "image" and done["outputs"][1]["url"].startswith(
        "data:image/png;base64,"
    )
    # The second model call saw the code and what it printed.
    second = engine.requests[1].turns
    assert isinstance(second[-2], ToolCall) and json.loads(second[-2].arguments) == {"code": code}
    assert (
        isinstance(second[-1], ToolResult)
        and "x is 42" in second[-1].output
        and "figure 1" in second[-1].output
    )
    assert events[-1]["response"]["output"][-1]["content"][0]["text"] == "It printed x is 42."


def test_outputs_are_null_without_include(
    fake_server: LiveServer, engine: FakeEngine, client: openai.OpenAI
) -> None:
    engine.reset(code_call("print(1)"), say("done"))
    events = raw_stream(fake_server, {"model": MODEL, "input": "go", "tools": CI})
    items = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert items[0]["type"] == "code_interpreter_call" and items[0]["outputs"] is None
    final = events[-1]["response"]
    assert final["output"][0]["outputs"] is None
    assert client.responses.retrieve(final["id"]).output[0].outputs is None  # type: ignore[union-attr]
    # ...but the model still got the output
    assert engine.requests[1].turns[-1].output == "1\n"  # type: ignore[union-attr]


def test_sdk_stream_helper_accumulates_the_stored_response(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(think("Let me compute.") + code_call("print(2 ** 10)"), say("2**10 is 1024."))
    with client.responses.stream(
        model=MODEL,
        input="2**10?",
        tools=CI,
        include=["code_interpreter_call.outputs"],  # type: ignore[list-item]
    ) as stream:
        seen = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.code_interpreter_call_code.delta" in seen and "response.reasoning_text.delta" in seen
    assert [it.type for it in final.output] == ["reasoning", "code_interpreter_call", "message"]
    stored = client.responses.retrieve(final.id)
    assert _plain(final) == _plain(stored)
    assert final.output[1].outputs[0].logs == "1024\n"  # type: ignore[union-attr, index]


def test_reasoning_encrypted_content_is_opaque_and_accepted_back(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(think("Add them.") + say("5"), think("Double it.") + say("10"))
    plain = client.responses.create(model=MODEL, input="2+3?", store=False)
    assert plain.output[0].type == "reasoning" and plain.output[0].encrypted_content is None
    engine.reset(think("Add them.") + say("5"), think("Double it.") + say("10"))
    with client.responses.stream(
        model=MODEL, input="2+3?", store=False, include=["reasoning.encrypted_content"]
    ) as stream:
        first = stream.get_final_response()
    sealed = first.output[0]
    assert (
        sealed.type == "reasoning"
        and sealed.encrypted_content
        and "Add them." not in sealed.encrypted_content
    )
    # A stateless client sends the whole output back as input, encrypted reasoning included.
    history = [
        {"role": "user", "content": "2+3?"},
        *[it.model_dump(exclude_none=True) for it in first.output],
    ]
    second = client.responses.create(
        model=MODEL,
        input=[*history, {"role": "user", "content": "Double it."}],
        store=False,
        include=["reasoning.encrypted_content"],
    )
    assert second.output_text == "10" and second.output[0].encrypted_content
    assert [getattr(t, "text", None) for t in engine.requests[-1].turns][-2:] == ["5", "Double it."]


def test_function_tool_round_trip(client: openai.OpenAI, engine: FakeEngine) -> None:
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    engine.reset(function_call("get_weather", {"city": "Paris"}), say("It is sunny in Paris."))
    first = client.responses.create(model=MODEL, input="Weather in Paris?", tools=tools)  # type: ignore[arg-type]
    assert first.status == "completed"
    (call,) = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21C"}],
        tools=tools,  # type: ignore[arg-type]
    )
    assert second.output_text == "It is sunny in Paris."
    turns = engine.requests[1].turns
    assert turns[-2] == ToolCall(call.call_id, "get_weather", call.arguments)
    assert turns[-1] == ToolResult(call.call_id, "get_weather", "sunny, 21C")


def test_previous_response_id_across_three_turns(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(code_call("secret = 7 * 6\nprint(secret)"), say("It is 42."))
    r1 = client.responses.create(model=MODEL, input="Compute it.", tools=CI)  # type: ignore[arg-type]
    engine.reset(code_call("print(secret + 1)"), say("Now 43."))
    r2 = client.responses.create(model=MODEL, input="Add one.", tools=CI, previous_response_id=r1.id)  # type: ignore[arg-type]
    # The same container was reused, so the variable survived.
    assert r2.output[0].container_id == r1.output[0].container_id  # type: ignore[union-attr]
    assert engine.requests[1].turns[-1].output == "43\n"  # type: ignore[union-attr]
    engine.reset(say("We computed 42 then 43."))
    r3 = client.responses.create(model=MODEL, input="Summarize.", previous_response_id=r2.id)
    turns = engine.requests[0].turns
    texts = [t.output if isinstance(t, ToolResult) else getattr(t, "text", None) for t in turns]
    assert texts == [
        "Compute it.",
        None,
        "42\n",
        "It is 42.",
        "Add one.",
        None,
        "43\n",
        "Now 43.",
        "Summarize.",
    ]
    assert r3.output_text == "We computed 42 then 43."


def test_code_call_resent_as_input_reuses_its_container(client: openai.OpenAI, engine: FakeEngine) -> None:
    # Clients that keep the conversation themselves (openai-agents, langchain) send earlier items back as input.
    engine.reset(code_call("secret = 7 * 6\nprint(secret)"), say("It is 42."))
    r1 = client.responses.create(
        model=MODEL, input="Compute it.", tools=CI, include=["code_interpreter_call.outputs"]
    )  # type: ignore[arg-type,list-item]
    engine.reset(code_call("print(secret + 1)"), say("Now 43."))
    history = [
        {"role": "user", "content": "Compute it."},
        *(it.model_dump(exclude_none=True) for it in r1.output),
    ]
    r2 = client.responses.create(
        model=MODEL, input=[*history, {"role": "user", "content": "Add one."}], tools=CI
    )  # type: ignore[arg-type,list-item]
    assert r2.output[0].container_id == r1.output[0].container_id  # type: ignore[union-attr]
    assert engine.requests[1].turns[-1].output == "43\n"  # type: ignore[union-attr]


def test_item_references_bring_back_stored_items(client: openai.OpenAI, engine: FakeEngine) -> None:
    # The Vercel AI SDK sends earlier output back as `item_reference`s (it stores responses by default).
    engine.reset(code_call("secret = 7 * 6\nprint(secret)"), say("It is 42."))
    r1 = client.responses.create(model=MODEL, input="Compute it.", tools=CI)  # type: ignore[arg-type]
    engine.reset(code_call("print(secret + 1)"), say("Now 43."))
    refs = [{"type": "item_reference", "id": it.id} for it in r1.output]
    r2 = client.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": "Compute it."}, *refs, {"role": "user", "content": "Add one."}],
        tools=CI,
    )  # type: ignore[arg-type,list-item]
    texts = [
        t.output if isinstance(t, ToolResult) else getattr(t, "text", None) for t in engine.requests[0].turns
    ]
    assert texts == ["Compute it.", None, "42\n", "It is 42.", "Add one."]
    assert r2.output[0].container_id == r1.output[0].container_id  # type: ignore[union-attr]
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.create(model=MODEL, input=[{"type": "item_reference", "id": "msg_nope"}])  # type: ignore[list-item]
    assert err.value.body["param"] == "input[0].id"  # type: ignore[index]


def test_delete_then_404(client: openai.OpenAI, engine: FakeEngine) -> None:
    r = client.responses.create(model=MODEL, input="hi")
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.retrieve(r.id)
    assert err.value.body["param"] == "response_id"  # type: ignore[index]


def test_background_cancel(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say("x" * 600), delay=0.02)
    r = client.responses.create(model=MODEL, input="long", background=True)
    assert r.status == "queued"  # acknowledged `queued` (as OpenAI does), then it runs
    wait_until(lambda: engine.requests)  # the engine is generating (reset() cleared the list)
    cancelled = client.responses.cancel(r.id)
    assert cancelled.status == "cancelled"
    assert client.responses.retrieve(r.id).status == "cancelled"
    assert engine.aborted, "the engine request was not aborted"


def test_background_completes_and_restreams(
    fake_server: LiveServer, client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(say("background answer"), delay=0.01)
    r = client.responses.create(model=MODEL, input="bg", background=True)
    with httpx.Client(timeout=30) as http:
        text = http.get(f"{fake_server.base_url}/v1/responses/{r.id}", params={"stream": "true"}).text
        events = parse_sse(text)
        check_stream(events)
        # acknowledged `queued` although a slot was free: its stream opens as a queued one's does
        opening = ["response.created", "response.queued", "response.in_progress"]
        assert [e["type"] for e in events[:3]] == opening and events[0]["response"]["status"] == "queued"
        later = parse_sse(
            http.get(
                f"{fake_server.base_url}/v1/responses/{r.id}", params={"stream": "true", "starting_after": 3}
            ).text
        )
    assert [e["sequence_number"] for e in later] == list(range(4, len(events)))
    assert client.responses.retrieve(r.id).output_text == "background answer"


def test_max_output_tokens_incomplete(fake_server: LiveServer, engine: FakeEngine) -> None:
    """One budget for the whole response: each model call gets what earlier calls left, and the call
    that runs out (the fake engine stops at its `max_tokens`, as vLLM does) ends it `incomplete`."""
    answer = "one two three four five six seven eight nine ten"
    code = code_call("x = 1\n" * 10)  # long enough that the budget is at least 16 (OpenAI's minimum)
    engine.reset(code, say(answer))
    spent = len(code) - 1  # one token per event before the Finish
    body = {"model": MODEL, "input": "count", "tools": CI, "max_output_tokens": spent + 5}
    events = raw_stream(fake_server, body)
    assert [r.sampling.max_tokens for r in engine.requests] == [spent + 5, 5]
    final = events[-1]["response"]
    assert events[-1]["type"] == "response.incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [(it["type"], it["status"]) for it in final["output"]] == [
        ("code_interpreter_call", "completed"),
        ("message", "incomplete"),
    ]
    assert final["output"][1]["content"][0]["text"] == answer[:15]  # 5 deltas of 3 characters
    assert final["usage"]["output_tokens"] == spent + 5


def test_max_output_tokens_spent_by_a_tool_call(fake_server: LiveServer, engine: FakeEngine) -> None:
    """A code call that uses the whole budget runs, and no further model call is made."""
    code = code_call("x = 1\n" * 10)
    engine.reset(code, say("never"))
    events = raw_stream(
        fake_server, {"model": MODEL, "input": "x", "tools": CI, "max_output_tokens": len(code) - 1}
    )
    assert len(engine.requests) == 1
    assert events[-1]["type"] == "response.incomplete"
    assert [(it["type"], it["status"]) for it in events[-1]["response"]["output"]] == [
        ("code_interpreter_call", "completed")
    ]


def test_engine_failure_is_response_failed(fake_server: LiveServer, engine: FakeEngine) -> None:
    def boom(request: object) -> list:
        raise EngineError("the engine fell over")

    engine.reset(boom)
    events = raw_stream(fake_server, {"model": MODEL, "input": "hi"})
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["message"] == "the engine fell over"


def test_code_timeout_is_failed_item_and_loop_goes_on(fake_server: LiveServer, engine: FakeEngine) -> None:
    engine.reset(code_call("while True: pass  # fake-timeout"), say("The code timed out."))
    events = raw_stream(
        fake_server,
        {"model": MODEL, "input": "loop", "tools": CI, "include": ["code_interpreter_call.outputs"]},
    )
    item = next(e for e in events if e["type"] == "response.output_item.done")["item"]
    assert item["status"] == "failed" and "timed out" in item["outputs"][0]["logs"]
    assert "response.code_interpreter_call.completed" not in [e["type"] for e in events]
    assert events[-1]["type"] == "response.completed"
    assert "timed out" in engine.requests[1].turns[-1].output  # type: ignore[union-attr]


def test_python_exception_goes_back_to_the_model(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(code_call("1/0"), say("Division by zero."))
    r = client.responses.create(model=MODEL, input="x", tools=CI, include=["code_interpreter_call.outputs"])  # type: ignore[arg-type, list-item]
    assert r.output[0].status == "completed"  # type: ignore[union-attr]
    assert "ZeroDivisionError" in r.output[0].outputs[0].logs  # type: ignore[union-attr, index]
    assert "ZeroDivisionError" in engine.requests[1].turns[-1].output  # type: ignore[union-attr]


def test_max_tool_calls_then_answer_without_tools(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(code_call("print(1)"), lambda req: code_call("print(2)") if req.tools else say("enough"))
    r = client.responses.create(model=MODEL, input="x", tools=CI, max_tool_calls=1)  # type: ignore[arg-type]
    assert [it.type for it in r.output] == ["code_interpreter_call", "message"]
    assert engine.requests[0].tools and not engine.requests[1].tools


def test_agent_loop_is_bounded(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(code_call("print(1)"))  # a model that always writes code
    r = client.responses.create(model=MODEL, input="x", tools=CI)  # type: ignore[arg-type]
    assert len(engine.requests) == 8 and not engine.requests[-1].tools
    # The last call is offered no tools, so the loop ends there whatever the model writes.
    assert r.status == "completed"
    assert [it.type for it in r.output] == ["code_interpreter_call"] * 7


def test_disconnect_mid_stream_aborts(fake_server: LiveServer, engine: FakeEngine) -> None:
    engine.reset(say("y" * 3000), delay=0.01)
    with httpx.Client(timeout=30) as http:
        with http.stream(
            "POST",
            fake_server.base_url + "/v1/responses",
            json={"model": MODEL, "input": "x", "stream": True},
        ) as r:
            for line in r.iter_lines():
                if "output_text.delta" in line:
                    break
    wait_until(lambda: engine.aborted)
    assert engine.active == 0


def test_disconnect_while_code_runs_interrupts_it(fake_server: LiveServer, engine: FakeEngine) -> None:
    engine.reset(code_call("import time  # fake-sleep"), say("never"))
    before = fake_server.interpreter.cancelled
    with httpx.Client(timeout=30) as http:
        body = {"model": MODEL, "input": "x", "stream": True, "tools": CI}
        with http.stream("POST", fake_server.base_url + "/v1/responses", json=body) as r:
            for line in r.iter_lines():
                if "interpreting" in line:
                    break
    wait_until(lambda: fake_server.interpreter.cancelled != before)
    assert fake_server.interpreter.cancelled == before + 1


def test_input_items_listing(client: openai.OpenAI, engine: FakeEngine) -> None:
    r = client.responses.create(
        model=MODEL,
        input=[
            {"role": "user", "content": "first"},
            {"role": "user", "content": [{"type": "input_text", "text": "second"}]},
        ],
    )
    page = client.responses.input_items.list(r.id, order="asc")
    assert [it.content[0].text for it in page.data] == ["first", "second"]  # type: ignore[union-attr]
    assert [it.content[0].text for it in client.responses.input_items.list(r.id)] == ["second", "first"]  # type: ignore[union-attr]


def test_models_and_health(fake_server: LiveServer, client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == [MODEL]
    assert httpx.get(fake_server.base_url + "/health").json() == {"status": "ok"}


def test_request_the_engine_refuses_up_front_is_a_4xx(fake_server: LiveServer, engine: FakeEngine) -> None:
    """Checked before the response starts (`Engine.precheck`): a 400 whether streamed or not, and the model
    is never called."""
    for refusal in (
        None,
        EngineRejected("vLLM rejected the request: bad logit_bias", code="invalid_request"),
    ):
        for stream in (False, True):
            engine.reset()
            engine.context, engine.refusal = (None, refusal) if refusal else (10, None)
            r = httpx.post(
                fake_server.base_url + "/v1/responses",
                json={"model": MODEL, "input": "x" * 100, "stream": stream},
                timeout=30,
            )
            assert r.status_code == 400, r.text
            error = r.json()["error"]
            assert error["type"] == "invalid_request_error" and error["param"] == "input"
            assert error["code"] == ("invalid_request" if refusal else "context_length_exceeded")
            assert len(engine.prechecked) == 1 and engine.requests == []


def test_refusal_by_the_engine_itself_before_any_output(fake_server: LiveServer, engine: FakeEngine) -> None:
    """What only `generate` refuses: still a 400 when not streamed (nothing was output); a streamed response
    has started by then and fails."""

    def too_long(request: object) -> list:
        raise EngineRejected(
            "the prompt is 9000 tokens; this model's context is 4096", code="context_length_exceeded"
        )

    engine.reset(too_long)
    r = httpx.post(fake_server.base_url + "/v1/responses", json={"model": MODEL, "input": "x"}, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"] == {
        "message": "the prompt is 9000 tokens; this model's context is 4096",
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
    events = raw_stream(fake_server, {"model": MODEL, "input": "x"})
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", "response.failed"]
    assert events[-1]["response"]["error"]["code"] == "invalid_prompt"


def test_refusal_after_a_tool_call_fails_the_stream(fake_server: LiveServer, engine: FakeEngine) -> None:
    def too_long(request: object) -> list:
        raise EngineRejected(
            "the prompt is 9000 tokens; this model's context is 4096", code="context_length_exceeded"
        )

    engine.reset(code_call("print(1)"), too_long)
    events = raw_stream(fake_server, {"model": MODEL, "input": "x", "tools": CI})
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "invalid_prompt"


def test_code_call_resent_without_outputs_gets_the_stored_ones(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    """A client that resends a response's items without having asked for the outputs (openai-agents does)
    still lets the model read what the code printed."""
    engine.reset(code_call("print(6 * 7)"), say("42."))
    first = client.responses.create(model=MODEL, input="Compute.", tools=CI)  # type: ignore[arg-type]
    call = first.output[0].model_dump(exclude_none=True)
    assert call["type"] == "code_interpreter_call" and "outputs" not in call
    engine.reset(say("Still 42."))
    client.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": "Compute."}, call, {"role": "user", "content": "Again?"}],  # type: ignore[list-item]
        tools=CI,  # type: ignore[arg-type]
    )
    assert engine.requests[0].turns[-2] == ToolResult(call["id"], CODE_TOOL_NAME, "42\n")
