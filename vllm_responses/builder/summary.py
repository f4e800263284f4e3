"""A reasoning item's summary (`reasoning.summary`): its one `summary_text` part and the four events of it.

`auto` and `detailed` stream the reasoning itself as the summary, each summary delta beside its reasoning delta
(`begin`, `delta`, `end`); `concise` gives the whole summary at once as the item closes (`whole`): a short
one the served model wrote (agent/loop.py asks for it), or the reasoning itself when that is short.
"""

from __future__ import annotations

from vllm_responses.builder import events as ev
from vllm_responses.builder.core import ResponseState
from vllm_responses.protocol.events import Event, SummaryRef
from vllm_responses.protocol.items import SummaryText

__all__ = ["begin", "delta", "end", "streams", "whole"]

STREAMED = frozenset({"auto", "detailed"})


def streams(state: ResponseState) -> bool:
    """Whether the summary is the reasoning itself, streamed as it is generated."""
    return state.summary in STREAMED


def _ref(state: ResponseState, index: int) -> SummaryRef:
    return {"item_id": state.output[index]["id"], "output_index": index, "summary_index": 0}


def begin(state: ResponseState, index: int) -> list[Event]:
    """The item's summary part, empty: `reasoning_summary_part.added`."""
    part: SummaryText = {"type": "summary_text", "text": ""}
    state.reasoning(index)["summary"].append(part)
    return [ev.summary_part_added(state.seq(), _ref(state, index), part.copy())]


def delta(state: ResponseState, index: int, text: str) -> list[Event]:
    """More summary text: `reasoning_summary_text.delta`."""
    state.reasoning(index)["summary"][0]["text"] += text
    return [ev.summary_text_delta(state.seq(), _ref(state, index), text)]


def end(state: ResponseState, index: int) -> list[Event]:
    """The summary part finished: `reasoning_summary_text.done`, then `reasoning_summary_part.done`."""
    part = state.reasoning(index)["summary"][0]
    ref = _ref(state, index)
    return [
        ev.summary_text_done(state.seq(), ref, part["text"]),
        ev.summary_part_done(state.seq(), ref, part.copy()),
    ]


def whole(state: ResponseState, index: int, text: str) -> list[Event]:
    """A summary given at once: its part added, its text in one delta, then done."""
    return [*begin(state, index), *delta(state, index, text), *end(state, index)]
