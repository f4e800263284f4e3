"""The message or reasoning item a response is streaming: its text deltas, and how it closes (citations)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from vllm_responses.builder import events as ev
from vllm_responses.builder import summary
from vllm_responses.builder.citations import file_citations, found_file_citations, url_citations
from vllm_responses.builder.core import ResponseState
from vllm_responses.engine.types import TokenLogprob
from vllm_responses.protocol.events import Event, Logprob, TopLogprob
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import (
    Annotation,
    ItemStatus,
    MessageItem,
    OutputItem,
    OutputLogprob,
    OutputText,
    ReasoningItem,
)

__all__ = ["OpenText", "event_logprob", "part_logprob"]


def _position(annotation: Annotation) -> tuple[int, int]:
    """Where an annotation stands in its text: its span, or (a file citation's) its insertion point."""
    if annotation["type"] == "file_citation":
        return annotation["index"], annotation["index"]
    return annotation["start_index"], annotation["end_index"]


def part_logprob(token: TokenLogprob) -> OutputLogprob:
    """One token's logprob as the `output_text` part carries it (with the UTF-8 `bytes` of each token)."""
    return {
        "token": token.token,
        "bytes": list(token.token.encode()),
        "logprob": token.logprob,
        "top_logprobs": [{"token": t, "bytes": list(t.encode()), "logprob": lp} for t, lp in token.top],
    }


def event_logprob(logprob: OutputLogprob) -> Logprob:
    """A part's logprob as the `output_text` delta and done events carry it (no `bytes`)."""
    top: list[TopLogprob] = [{"token": t["token"], "logprob": t["logprob"]} for t in logprob["top_logprobs"]]
    return {"token": logprob["token"], "logprob": logprob["logprob"], "top_logprobs": top}


class OpenText:
    """The open message or reasoning item of `state`, if any: at most one of each, text only growing.

    A delta of one kind closes the other's item; a new item of any other kind closes both (`start_item`).
    """

    def __init__(self, state: ResponseState) -> None:
        self.state = state
        self.message: int | None = None  # output_index of the open message, if any
        self.reasoning: int | None = None  # output_index of the open reasoning item, if any
        self.summary: str | None = None  # the open reasoning's `concise` summary, once written (`summarise`)

    def start_item(self, item: OutputItem) -> tuple[int, list[Event]]:
        """Close the open text and add `item` after it: its index and the events."""
        events = self.close()
        index, added = self.state.add(item)
        return index, [*events, added]

    def close(self, status: ItemStatus = "completed", *, final: bool = False) -> list[Event]:
        """Finish an open message or reasoning item (before a tool call, or at the end). `final`: nothing
        follows, so a message closed now cites the written files no message mentioned."""
        events: list[Event] = []
        if self.reasoning is not None:
            events += self._close_reasoning(status)
        if self.message is not None:
            events += self._close_message(status, final=final)
        return events

    # --- message text ---------------------------------------------------------------------------------

    def text_delta(self, text: str, logprobs: Sequence[TokenLogprob] = ()) -> list[Event]:
        """More message text, with the logprobs of the tokens that wrote it (when they were asked for)."""
        state = self.state
        events = self._close_reasoning("completed") if self.reasoning is not None else []
        if self.message is None:
            self.message, opened = self._open_message()
            events += opened
        index = self.message
        part = state.message(index)["content"][0]
        part["text"] += text
        added = [part_logprob(t) for t in logprobs]
        part["logprobs"] += added
        shown = [event_logprob(lp) for lp in added]
        return [*events, ev.text_delta(state.seq(), state.part_ref(index), text, shown)]

    def _open_message(self) -> tuple[int, list[Event]]:
        state = self.state
        part: OutputText = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        new: MessageItem = {
            "id": new_id("msg"),
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        index, added = state.add(new)
        new["content"].append(part)
        return index, [added, ev.content_part_added(state.seq(), state.part_ref(index), part.copy())]

    def _close_message(self, status: ItemStatus, *, final: bool = False) -> list[Event]:
        state = self.state
        assert self.message is not None
        index, self.message = self.message, None
        item = state.message(index)
        part = item["content"][0]
        item["status"] = status
        files = file_citations(part["text"], state.files, cite_rest=final, already_cited=state.cited)
        state.cited |= {a["file_id"] for a in files}
        urls = url_citations(part["text"], state.sources)
        found = found_file_citations(part["text"], state.found_files)
        part["annotations"] = sorted([*files, *urls, *found], key=_position)
        ref = state.part_ref(index)
        events: list[Event] = [
            ev.annotation_added(state.seq(), ref, i, a.copy()) for i, a in enumerate(part["annotations"])
        ]
        logprobs = [event_logprob(lp) for lp in part["logprobs"]]
        events.append(ev.text_done(state.seq(), ref, part["text"], logprobs))
        events.append(ev.content_part_done(state.seq(), ref, copy.deepcopy(part)))
        return [*events, state.item_done(index)]

    # --- reasoning ------------------------------------------------------------------------------------

    def reasoning_delta(self, text: str) -> list[Event]:
        state = self.state
        events = self._close_message("completed") if self.message is not None else []
        if self.reasoning is None:
            self.reasoning, opened = self._open_reasoning()
            events += opened
        index = self.reasoning
        state.reasoning(index)["content"][0]["text"] += text
        events.append(ev.reasoning_text_delta(state.seq(), state.part_ref(index), text))
        return events + summary.delta(state, index, text) if summary.streams(state) else events

    def summarise(self, text: str) -> None:
        """The open reasoning item's `concise` summary, written apart from it: given as the item closes."""
        assert self.reasoning is not None
        self.summary = text

    def unsummarised(self) -> str | None:
        """The open reasoning's text when `concise` asked for a summary it was not given yet."""
        if self.reasoning is None or self.state.summary != "concise" or self.summary is not None:
            return None
        return self.state.reasoning(self.reasoning)["content"][0]["text"]

    def _open_reasoning(self) -> tuple[int, list[Event]]:
        state = self.state
        new: ReasoningItem = {
            "id": new_id("rs"),
            "type": "reasoning",
            "summary": [],
            "status": "in_progress",
            "content": [{"type": "reasoning_text", "text": ""}],
        }
        index, added = state.add(new)
        part_added = ev.content_part_added(
            state.seq(), state.part_ref(index), {"type": "reasoning_text", "text": ""}
        )
        events: list[Event] = [added, part_added]
        return index, events + summary.begin(state, index) if summary.streams(state) else events

    def _close_reasoning(self, status: ItemStatus) -> list[Event]:
        state = self.state
        assert self.reasoning is not None
        index, self.reasoning = self.reasoning, None
        item = state.reasoning(index)
        item["status"] = status
        text = item["content"][0]["text"]
        if state.include_reasoning and state.seal is not None:  # sealed, for a client that stores nothing
            item["encrypted_content"] = state.seal(text)
        ref = state.part_ref(index)
        events: list[Event] = [
            ev.reasoning_text_done(state.seq(), ref, text),
            ev.content_part_done(state.seq(), ref, {"type": "reasoning_text", "text": text}),
        ]
        if summary.streams(state):
            events += summary.end(state, index)
        elif state.summary == "concise":  # a short reasoning is its own summary
            events += summary.whole(state, index, text if self.summary is None else self.summary)
            self.summary = None
        return [*events, state.item_done(index)]
