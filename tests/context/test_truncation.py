"""Where `truncation: "auto"` may cut a conversation, and how much room it leaves for the output."""

from __future__ import annotations

from vllm_responses.context.truncation import cut_points, output_reserve
from vllm_responses.engine.types import Message, ToolCall, ToolResult, Turn


def test_cuts_keep_instructions_and_the_last_user_message_and_never_split_a_call() -> None:
    turns: tuple[Turn, ...] = (
        Message("system", "rules"),  # 0: kept
        Message("user", "q1"),  # 1
        ToolCall("c1", "f", "{}"),  # 2
        ToolCall("c2", "f", "{}"),  # 3: parallel calls
        ToolResult("c1", "f", "r1"),  # 4
        ToolResult("c2", "f", "r2"),  # 5
        Message("assistant", "a1"),  # 6
        Message("user", "q2"),  # 7: the last user message, kept with all after it
        ToolCall("c3", "f", "{}"),  # 8
        ToolResult("c3", "f", "r3"),  # 9
    )
    assert cut_points(turns) == [1, 2, 6, 7]


def test_no_user_message_keeps_the_last_turn() -> None:
    turns: tuple[Turn, ...] = (Message("assistant", "a"), Message("assistant", "b"))
    assert cut_points(turns) == [0, 1]
    assert cut_points((Message("developer", "only"),)) == [1]


def test_output_reserve() -> None:
    assert output_reserve(2048, 100) == 100
    assert output_reserve(2048, 5000) == 1024  # at most half the window
    assert output_reserve(2048, None) == 256
