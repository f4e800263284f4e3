"""`vllm_responses/context/turns.py` alone: request input to stored items, code results, items to model turns."""

from __future__ import annotations

import base64
import json
from typing import Any

from interpreter_service import ExecutionResult
from tests.support.fakes import TINY_PNG
from vllm_responses.context.turns import code_result_text, input_to_items, items_to_turns
from vllm_responses.engine.types import CODE_TOOL_NAME, Image, Message, Reasoning, ToolCall, ToolResult
from vllm_responses.protocol.requests import parse_create_request
from vllm_responses.tools.code_interpreter import code_outputs

PNG_URL = "data:image/png;base64," + base64.b64encode(TINY_PNG).decode()
NOT_KEPT = "(the output of this code was not kept)"


def items(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`raw` as a request's input, parsed as the server parses it, to stored items."""
    req = parse_create_request({"model": "m", "input": raw})
    assert not isinstance(req.input, str)
    return input_to_items(req.input)


# --- input_to_items ---------------------------------------------------------------------------------------


def test_a_string_input_is_one_user_message() -> None:
    (item,) = input_to_items("What is 6*7?")
    assert item.pop("id").startswith("msg_")
    assert item == {
        "type": "message",
        "role": "user",
        "status": "completed",
        "content": [{"type": "input_text", "text": "What is 6*7?"}],
    }


def test_easy_messages_become_one_text_part_of_the_role_s_kind() -> None:
    got = items(
        [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [{"type": "input_text", "text": "Hi, "}, {"type": "input_text", "text": "you"}],
            },
            {"role": "assistant", "content": "Hi.", "status": "incomplete"},
        ]
    )
    assert [(it["role"], it["content"], it["status"]) for it in got] == [
        ("system", [{"type": "input_text", "text": "Be brief."}], "completed"),
        ("user", [{"type": "input_text", "text": "Hi, you"}], "completed"),
        # a given status is kept; an assistant's text has `annotations`, as the SDK's ResponseOutputText
        ("assistant", [{"type": "output_text", "text": "Hi.", "annotations": []}], "incomplete"),
    ]


def test_ids_are_kept_or_made_with_the_item_s_prefix() -> None:
    got = items(
        [
            {"type": "message", "role": "user", "content": "hi", "id": "msg_given"},
            {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
            {"role": "user", "content": "again"},
        ]
    )
    ids = [it["id"] for it in got]
    assert ids[0] == "msg_given"
    assert [i.split("_")[0] for i in ids[1:]] == ["fc", "item", "msg"]
    assert len(set(ids)) == 4
    call = {"type": "function_call", "id": ids[1], "call_id": "call_1", "name": "f", "arguments": "{}"}
    assert got[1] == call


# --- code_outputs -----------------------------------------------------------------------------------------


def test_code_outputs_are_logs_then_one_image_per_figure() -> None:
    result = ExecutionResult(logs="plotted\n", images=(TINY_PNG, TINY_PNG))
    assert code_outputs(result) == [
        {"type": "logs", "logs": "plotted\n"},
        {"type": "image", "url": PNG_URL},
        {"type": "image", "url": PNG_URL},
    ]
    assert code_outputs(ExecutionResult(logs="")) == []
    assert code_outputs(ExecutionResult(logs="", images=(TINY_PNG,))) == [{"type": "image", "url": PNG_URL}]


def test_an_interruption_is_appended_to_the_logs_but_an_exception_is_not() -> None:
    timeout = "Execution timed out after 0.5 s"
    assert code_outputs(ExecutionResult(logs="started\n", error=timeout, error_kind="timeout")) == [
        {"type": "logs", "logs": f"started\n\n{timeout}"}
    ]
    assert code_outputs(ExecutionResult(logs="", error=timeout, error_kind="timeout")) == [
        {"type": "logs", "logs": timeout}
    ]
    # already in the logs: not repeated
    assert code_outputs(ExecutionResult(logs=f"x\n{timeout}\n", error=timeout, error_kind="timeout")) == [
        {"type": "logs", "logs": f"x\n{timeout}\n"}
    ]
    # an exception's traceback is in the logs already; the short message is not added
    traceback = "Traceback (most recent call last):\n  ...\nZeroDivisionError: division by zero\n"
    exc = ExecutionResult(logs=traceback, error="ZeroDivisionError: division by 0", error_kind="exception")
    assert code_outputs(exc) == [{"type": "logs", "logs": traceback}]


# --- code_result_text -------------------------------------------------------------------------------------


def test_code_result_text_for_the_model() -> None:
    assert code_result_text(None) == NOT_KEPT
    assert code_result_text([]) == "(no output)"
    assert code_result_text([{"type": "logs", "logs": ""}]) == "(no output)"
    image = {"type": "image", "url": PNG_URL}
    assert code_result_text([{"type": "logs", "logs": "42\n"}, image, image]) == (
        "42\n\n[figure 1: an image was produced and shown to the user]\n"
        "[figure 2: an image was produced and shown to the user]"
    )


def test_long_logs_keep_their_head_and_tail_around_a_marker() -> None:
    short = "".join(f"line {i}\n" for i in range(100))
    assert code_result_text([{"type": "logs", "logs": short}]) == short
    long = "HEAD" + "x" * 50_000 + "TAIL"
    text = code_result_text([{"type": "logs", "logs": long}])
    assert text.startswith("HEADxxx") and text.endswith("xxxTAIL")
    assert text.count("\n...[output truncated]...\n") == 1
    assert len(text) < 20_000


# --- items_to_turns ---------------------------------------------------------------------------------------


def test_messages_and_function_calls_with_their_names_resolved() -> None:
    turns = items_to_turns(
        [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {"role": "assistant", "content": "Let me look."},  # no type: a message
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "P"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {"type": "function_call_output", "call_id": "call_unknown", "output": "?"},
        ]
    )
    assert turns == [
        Message("user", "Weather?"),
        Message("assistant", "Let me look."),
        ToolCall("call_1", "get_weather", '{"city": "P"}'),
        ToolResult("call_1", "get_weather", "sunny"),
        ToolResult("call_unknown", "", "?"),
    ]


def test_a_code_call_is_a_call_and_its_result_and_reasoning_a_reasoning_turn() -> None:
    code = 'print("hi")'
    raw = [
        {"type": "reasoning", "id": "rs_1", "content": [{"type": "reasoning_text", "text": "Plan."}]},
        {
            "type": "code_interpreter_call",
            "id": "ci_1",
            "code": code,
            "container_id": "cntr_1",
            "outputs": [{"type": "logs", "logs": "hi\n"}, {"type": "image", "url": PNG_URL}],
        },
        {"type": "code_interpreter_call", "id": "ci_2", "code": "1", "outputs": None},
    ]
    assert items_to_turns(raw) == [
        Reasoning("Plan."),
        ToolCall("ci_1", CODE_TOOL_NAME, json.dumps({"code": code})),
        ToolResult(
            "ci_1",
            CODE_TOOL_NAME,
            "hi\n\n[figure 1: an image was produced and shown to the user]",
            (Image(TINY_PNG, "image/png"),),  # shown to a vision model
        ),
        ToolCall("ci_2", CODE_TOOL_NAME, json.dumps({"code": "1"})),
        ToolResult("ci_2", CODE_TOOL_NAME, NOT_KEPT),
    ]
    renamed = items_to_turns(raw[1:2], code_tool_name="code_exec")
    assert [t.name for t in renamed] == ["code_exec", "code_exec"]  # type: ignore[union-attr]


def test_stored_input_items_read_back_as_the_same_turns() -> None:
    raw = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "2+3?"}]},
    ]
    assert items_to_turns(items(raw)) == [Message("system", "Be brief."), Message("user", "2+3?")]
