"""The response event builder (`vllm_responses/builder/response.py`) alone: numbering, item order, include, ends."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from tests.support.fakes import echo_fields
from tests.support.wire import (
    CODE_TURN_EVENT_RUNS,
    MESSAGE_EVENT_RUNS,
    check_stream,
    event_runs,
    validate_event,
    validate_response,
)
from vllm_responses.builder.citations import WrittenFile
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.engine.types import Usage
from vllm_responses.store.sealing import ReasoningSeal

CONTAINER = "cntr_test"
LOGS = [{"type": "logs", "logs": "42\n"}]
USAGE = Usage(input_tokens=10, output_tokens=7)
# The response fields echoed from a request, as the service fills them in.
BASE = echo_fields(model="m", tools=[{"type": "code_interpreter", "container": {"type": "auto"}}])


def builder(**kwargs: Any) -> ResponseBuilder:
    return ResponseBuilder(BASE.copy(), include_outputs=kwargs.pop("include_outputs", True), **kwargs)


def code_turn(b: ResponseBuilder, outputs: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Text, a code call that runs, text again, completed: the events, in order."""
    events = b.created() + b.text.text_delta("Let me ") + b.text.text_delta("compute.")
    index, started = b.calls.code_start(CONTAINER)
    events += (
        started
        + b.calls.code_delta(index, "print(6")
        + b.calls.code_delta(index, " * 7)")
        + b.calls.code_done(index)
    )
    events += b.calls.code_finished(index, LOGS if outputs is None else outputs)
    events += b.text.text_delta("It is 42.")
    return events + b.completed(USAGE)


def of_type(events: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == type_]


def test_text_code_text_numbers_every_event_and_closes_items_in_order() -> None:
    b = builder()
    events = code_turn(b)
    check_stream(events)  # sequence 0, 1, ...; every event valid; items added, used, then done; one end
    # created, in_progress, a message, then the code turn's own runs (a code call, then a message)
    assert event_runs(e["type"] for e in events) == [
        *CODE_TURN_EVENT_RUNS[:2],
        *MESSAGE_EVENT_RUNS,
        *CODE_TURN_EVENT_RUNS[2:],
    ]
    added = [e["item"] for e in of_type(events, "response.output_item.added")]
    assert [(it["type"], it["id"][:3]) for it in added] == [
        ("message", "msg"),
        ("code_interpreter_call", "ci_"),
        ("message", "msg"),
    ]
    assert [e["output_index"] for e in of_type(events, "response.output_item.done")] == [0, 1, 2]
    for e in events:
        if "content_index" in e:
            assert e["content_index"] == 0 and e["item_id"] == added[e["output_index"]]["id"], e
    texts = of_type(events, "response.output_text.done")
    assert [(e["output_index"], e["text"]) for e in texts] == [(0, "Let me compute."), (2, "It is 42.")]
    code = of_type(events, "response.code_interpreter_call_code.done")
    assert [(e["output_index"], e["code"]) for e in code] == [(1, "print(6 * 7)")]
    final = events[-1]["response"]
    assert final["status"] == "completed" and final["completed_at"] is not None
    assert [it["status"] for it in final["output"]] == ["completed"] * 3
    assert final["output"][1] == {
        "id": added[1]["id"],
        "type": "code_interpreter_call",
        "code": "print(6 * 7)",
        "container_id": CONTAINER,
        "status": "completed",
        "outputs": LOGS,
    }
    assert final["usage"]["input_tokens"] == 10 and final["usage"]["total_tokens"] == 17
    assert b.snapshot() == final


def test_the_first_events_carry_an_in_progress_response_without_usage() -> None:
    b = builder()
    created, in_progress = b.created()
    for e in (created, in_progress):
        validate_event(e)
        assert e["response"]["status"] == "in_progress" and e["response"]["output"] == []
        assert e["response"]["usage"] is None and e["response"]["id"] == b.id
    assert (created["sequence_number"], in_progress["sequence_number"]) == (0, 1)


def test_a_queued_response_opens_with_created_and_queued_then_goes_on_in_progress() -> None:
    b = builder()
    created, queued = b.queued()
    assert b.status == "queued" and b.snapshot()["status"] == "queued"
    assert [created["type"], queued["type"]] == ["response.created", "response.queued"]
    for e in (created, queued):
        validate_event(e)
        assert e["response"]["status"] == "queued" and e["response"]["usage"] is None
    events = [created, queued, *code_turn(b)]  # `created()` now gives only in_progress
    assert [e["type"] for e in events[:4]] == [
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.output_item.added",
    ]
    assert events[2]["response"]["status"] == "in_progress" and events[-1]["type"] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_without_include_outputs_are_null_on_the_wire_but_kept() -> None:
    b = builder(include_outputs=False)
    events = code_turn(b)
    check_stream(events)
    items = [e["item"] for e in events if e["type"].startswith("response.output_item.")]
    code_items = [it for it in items if it["type"] == "code_interpreter_call"]
    assert len(code_items) == 2 and all(it["outputs"] is None for it in code_items)
    assert events[-1]["response"]["output"][1]["outputs"] is None
    assert b.snapshot()["output"][1]["outputs"] is None
    assert b.output[1]["outputs"] == LOGS  # kept inside: the store and the model still get them
    assert b.snapshot(include_outputs=True)["output"][1]["outputs"] == LOGS


def test_with_include_outputs_the_finished_item_carries_them() -> None:
    b = builder(include_outputs=True)
    events = code_turn(b)
    done = [e["item"] for e in of_type(events, "response.output_item.done") if e["output_index"] == 1]
    assert done[0]["outputs"] == LOGS
    assert b.snapshot(include_outputs=False)["output"][1]["outputs"] is None


def test_events_do_not_share_state_with_the_builder() -> None:
    b = builder()
    events = b.created() + b.text.text_delta("a")
    added = of_type(events, "response.output_item.added")[0]
    b.text.text_delta("b")
    assert added["item"]["status"] == "in_progress" and b.output[0]["content"][0]["text"] == "ab"
    events = b.completed(USAGE)
    done = of_type(events, "response.output_item.done")[0]
    done["item"]["content"][0]["text"] = "changed"
    assert b.output[0]["content"][0]["text"] == "ab"


def test_incomplete_closes_the_open_message_as_incomplete() -> None:
    b = builder()
    events = b.created() + b.text.text_delta("one two thr")
    events += b.incomplete("max_output_tokens", USAGE)
    check_stream(events)
    assert [e["type"] for e in events[-5:]] == [
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.incomplete",
    ]
    assert events[-2]["item"]["status"] == "incomplete"
    final = events[-1]["response"]
    assert final["status"] == "incomplete" and final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["output"][0]["status"] == "incomplete" and final["error"] is None


def test_incomplete_closes_open_reasoning_too() -> None:
    b = builder()
    events = b.created() + b.text.reasoning_delta("Let me think")
    events += b.incomplete("max_output_tokens", USAGE)
    check_stream(events)
    assert [it["status"] for it in events[-1]["response"]["output"]] == ["incomplete"]


def test_failed_closes_open_items_and_fails_a_running_code_call() -> None:
    b = builder()
    events = b.created()
    index, started = b.calls.code_start(CONTAINER)
    events += (
        started + b.calls.code_delta(index, "while True: pass") + b.calls.code_done(index)
    )  # now interpreting
    events += b.failed("the engine fell over", USAGE)
    check_stream(events)
    assert [e["type"] for e in events[-2:]] == ["response.output_item.done", "response.failed"]
    final = events[-1]["response"]
    assert final["status"] == "failed"
    assert final["error"] == {"code": "server_error", "message": "the engine fell over"}
    assert final["output"][0]["status"] == "failed"
    assert "response.code_interpreter_call.completed" not in [e["type"] for e in events]


def test_failed_mid_message_marks_it_incomplete() -> None:
    b = builder()
    events = b.created() + b.text.text_delta("Half an ans")
    events += b.failed("the engine fell over", USAGE, code="invalid_prompt")
    check_stream(events)
    final = events[-1]["response"]
    assert final["output"][0]["status"] == "incomplete" and final["error"]["code"] == "invalid_prompt"


def test_a_failed_code_call_has_no_completed_event() -> None:
    b = builder()
    events = b.created()
    index, started = b.calls.code_start(CONTAINER)
    events += started + b.calls.code_delta(index, "x") + b.calls.code_done(index)
    events += b.calls.code_finished(index, [{"type": "logs", "logs": "timed out"}], failed=True)
    events += b.text.text_delta("It timed out.") + b.completed(USAGE)
    check_stream(events)
    assert "response.code_interpreter_call.completed" not in [e["type"] for e in events]
    assert events[-1]["response"]["output"][0]["status"] == "failed"


def test_reasoning_then_text_and_encrypted_content_only_when_included() -> None:
    for include in (False, True):
        b = builder(include_reasoning=include, seal=partial(ReasoningSeal(bytes(32)).seal, project="proj"))
        events = (
            b.created()
            + b.text.reasoning_delta("Add ")
            + b.text.reasoning_delta("them.")
            + b.text.text_delta("5")
        )
        events += b.completed(USAGE)
        check_stream(events)
        reasoning, message = events[-1]["response"]["output"]
        assert reasoning["type"] == "reasoning"
        assert reasoning["content"] == [{"type": "reasoning_text", "text": "Add them."}]
        assert message["content"][0]["text"] == "5"
        # The reasoning item was finished before the message started.
        types = [e["type"] for e in events]
        assert types.index("response.reasoning_text.done") < types.index("response.content_part.added", 4)
        sealed = reasoning.get("encrypted_content")
        assert bool(sealed) is include
        if sealed:
            assert "Add them." not in sealed


def function_turn() -> list[dict[str, Any]]:
    b = builder()
    events = b.created() + b.text.text_delta("Checking.")
    index, started = b.calls.function_call_start("get_weather")
    events += (
        started
        + b.calls.function_call_delta(index, '{"city": ')
        + b.calls.function_call_delta(index, '"Paris"}')
    )
    return events + b.calls.function_call_done(index, '{"city":"Paris"}') + b.completed(USAGE)


def test_function_call_arguments_stream_then_finish() -> None:
    events = function_turn()
    done = of_type(events, "response.function_call_arguments.done")[0]
    assert "name" not in done  # the SDK's event has no `name`: clients read it from the item
    check_stream(events)
    assert (done["output_index"], done["arguments"]) == (1, '{"city":"Paris"}')
    deltas = "".join(e["delta"] for e in of_type(events, "response.function_call_arguments.delta"))
    assert deltas == '{"city": "Paris"}'
    call = events[-1]["response"]["output"][1]
    assert (call["type"], call["name"], call["status"]) == ("function_call", "get_weather", "completed")
    assert call["call_id"].startswith("call_")


def test_citations_are_added_before_the_text_is_done() -> None:
    b = builder()
    events = b.created()
    index, started = b.calls.code_start(CONTAINER)
    events += started + b.calls.code_done(index) + b.calls.code_finished(index, [])
    b.note_files(
        [
            WrittenFile(CONTAINER, "cfile_a", "/mnt/data/out.csv"),
            WrittenFile(CONTAINER, "cfile_b", "/mnt/data/plot.png"),
        ]
    )
    events += b.text.text_delta("Saved out.csv.") + b.completed(USAGE)
    check_stream(events)
    types = [e["type"] for e in events]
    added = of_type(events, "response.output_text.annotation.added")
    assert types.index("response.output_text.annotation.added") < types.index("response.output_text.done")
    assert [(e["annotation_index"], e["annotation"]["file_id"]) for e in added] == [
        (0, "cfile_a"),
        (1, "cfile_b"),
    ]
    spans = [(e["annotation"]["start_index"], e["annotation"]["end_index"]) for e in added]
    # out.csv where the text mentions it; plot.png, never mentioned, at the end of the last message
    assert spans == [(6, 13), (14, 14)]
    part = of_type(events, "response.content_part.done")[0]["part"]
    assert [x["file_id"] for x in part["annotations"]] == ["cfile_a", "cfile_b"]
    assert events[-1]["response"]["output"][1]["content"][0]["annotations"] == part["annotations"]


def test_a_message_before_more_code_cites_only_what_it_mentions() -> None:
    b = builder()
    b.note_files(
        [
            WrittenFile(CONTAINER, "cfile_a", "/mnt/data/a.txt"),
            WrittenFile(CONTAINER, "cfile_b", "/mnt/data/b.txt"),
        ]
    )
    events = b.created() + b.text.text_delta("Wrote a.txt; now b.")
    _, started = b.calls.code_start(CONTAINER)  # closes the message: not the response's last
    events += started
    first = of_type(events, "response.output_text.done")
    assert len(first) == 1
    assert [x["file_id"] for x in b.output[0]["content"][0]["annotations"]] == ["cfile_a"]


def test_cancelled_marks_the_response_without_an_event() -> None:
    b = builder()
    events = b.created() + b.text.text_delta("partial")
    b.cancelled(USAGE)
    snap = b.snapshot()
    assert snap["status"] == "cancelled" and snap["usage"]["output_tokens"] == 7 and snap["completed_at"]
    validate_response(snap)
    assert len(events) == 5  # nothing was added by cancelled()


def test_statuses_go_out_as_plain_strings() -> None:
    b = builder()
    events = b.created() + b.text.text_delta("hi") + b.failed("boom", USAGE)
    assert [json.loads(json.dumps(e))["response"]["status"] for e in events if "response" in e] == [
        "in_progress",
        "in_progress",
        "failed",
    ]
    assert '"status": "failed"' in json.dumps(b.snapshot())
