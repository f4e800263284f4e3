"""The response event builder: pure, synchronous, and the only place that numbers events and output items.

`ResponseBuilder` holds one response's state (its output items, usage, status). Each method takes one
step of the response's life (text arrived, a code call started, ...) and returns the Responses API stream
events for it as plain dicts, already carrying their final `sequence_number`, `output_index`, `item_id`
and `content_index`. `snapshot()` gives the response object those events describe, so the streamed and
the stored/non-streamed forms cannot drift apart. Items always keep their full code-interpreter
`outputs` internally; `include_outputs=False` blanks them to `null` on the way out.
"""

from __future__ import annotations

import base64
import copy
import secrets
import time
from typing import Any, Literal

from vllm_responses.chat import Usage
from vllm_responses.citations import WrittenFile, file_citations

__all__ = ["ResponseBuilder", "new_id"]

Event = dict[str, Any]
Status = Literal["queued", "in_progress", "completed", "incomplete", "failed", "cancelled"]


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def usage_dict(u: Usage) -> dict[str, Any]:
    return {
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.input_tokens + u.output_tokens,
    }


REASONING_SEAL = "vr1:"


def seal_reasoning(text: str) -> str:
    """The `encrypted_content` of a reasoning item: not secret (the text is in the item already), only
    opaque to clients. Resent as input it is accepted; earlier reasoning is not rendered into prompts."""
    return REASONING_SEAL + base64.urlsafe_b64encode(text.encode()).decode()


class ResponseBuilder:
    """Builds the events and the snapshot of one response.

    Parameters
    ----------
    base: the response fields echoed from the request (model, tools, tool_choice, instructions, ...).
    include_outputs: whether code-interpreter `outputs` go out on the wire.
    include_reasoning: whether finished reasoning items carry `encrypted_content` (include
        "reasoning.encrypted_content"): an opaque copy of the reasoning a stateless client sends back.
    """

    def __init__(
        self, base: dict[str, Any], *, include_outputs: bool, include_reasoning: bool = False,
        response_id: str | None = None,
    ) -> None:
        self.id = response_id or new_id("resp")
        self.created_at = int(time.time())
        self.base = base
        self.include_outputs = include_outputs
        self.include_reasoning = include_reasoning
        self.status: Status = "in_progress"
        self.output: list[dict[str, Any]] = []
        self.usage = Usage()
        self.error: dict[str, Any] | None = None
        self.incomplete_reason: str | None = None
        self.completed_at: int | None = None
        # HTTP status of a failure caused by the request itself (e.g. a prompt longer than the context):
        # not on the wire; lets the route answer 4xx when nothing was streamed yet.
        self.failure_status: int | None = None
        self.failure_code: str | None = None
        self._seq = 0
        self._open: dict[str, int] = {}  # "message" / "reasoning" -> output_index of the open item
        # Files the response's code wrote (cited in messages, see citations.py) and the ids cited so far.
        self.files: list[WrittenFile] = []
        self._cited: set[str] = set()

    # --- plumbing -------------------------------------------------------------------------------------

    def _event(self, type_: str, **fields: Any) -> Event:
        ev = {"type": type_, "sequence_number": self._seq, **fields}
        self._seq += 1
        return ev

    def _wire_item(self, item: dict[str, Any]) -> dict[str, Any]:
        if item["type"] == "code_interpreter_call" and not self.include_outputs:
            return {**item, "outputs": None}
        return copy.deepcopy(item)

    def _add_item(self, item: dict[str, Any]) -> tuple[int, Event]:
        self.output.append(item)
        index = len(self.output) - 1
        return index, self._event("response.output_item.added", output_index=index, item=self._wire_item(item))

    def _item_done(self, index: int) -> Event:
        return self._event("response.output_item.done", output_index=index, item=self._wire_item(self.output[index]))

    def snapshot(self, *, include_outputs: bool | None = None) -> dict[str, Any]:
        """The response object as it stands now."""
        show = self.include_outputs if include_outputs is None else include_outputs
        items = [
            {**it, "outputs": None} if it["type"] == "code_interpreter_call" and not show else copy.deepcopy(it)
            for it in self.output
        ]
        terminal = self.status in ("completed", "incomplete", "failed", "cancelled")
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": self.status,
            "completed_at": self.completed_at,
            "error": self.error,
            "incomplete_details": {"reason": self.incomplete_reason} if self.incomplete_reason else None,
            "output": items,
            "usage": usage_dict(self.usage) if terminal else None,
            **self.base,
        }

    # --- lifecycle ------------------------------------------------------------------------------------

    def created(self) -> list[Event]:
        return [
            self._event("response.created", response=self.snapshot()),
            self._event("response.in_progress", response=self.snapshot()),
        ]

    def close_open(self, status: str = "completed", *, final: bool = False) -> list[Event]:
        """Finish an open message or reasoning item (before a tool call, or at the end). `final`: nothing
        follows, so a message closed now cites the written files no message mentioned."""
        events: list[Event] = []
        if "reasoning" in self._open:
            events += self._close_reasoning(status)
        if "message" in self._open:
            events += self._close_message(status, final=final)
        return events

    def note_files(self, files: list[WrittenFile]) -> None:
        """Files code wrote during this response (a file written again replaces its earlier entry)."""
        ids = {f.file_id for f in files}
        self.files = [f for f in self.files if f.file_id not in ids] + files

    def completed(self, usage: Usage) -> list[Event]:
        return self._finish("completed", "response.completed", usage)

    def incomplete(self, reason: str, usage: Usage) -> list[Event]:
        events = self.close_open("incomplete", final=True)
        self.incomplete_reason = reason
        return events + self._finish("incomplete", "response.incomplete", usage)

    def failed(self, message: str, usage: Usage, code: str = "server_error") -> list[Event]:
        events = self.close_open("incomplete")
        for index, item in enumerate(self.output):
            if item.get("status") in ("in_progress", "interpreting"):
                item["status"] = "failed" if item["type"] == "code_interpreter_call" else "incomplete"
                events.append(self._item_done(index))
        self.error = {"code": code, "message": message}
        return events + self._finish("failed", "response.failed", usage)

    def cancelled(self, usage: Usage) -> None:
        """Mark the response cancelled (no event: the stream that would carry it is gone)."""
        self.usage = usage
        self.status = "cancelled"
        self.completed_at = int(time.time())

    def _finish(self, status: Status, type_: str, usage: Usage) -> list[Event]:
        events = self.close_open(final=True)
        self.usage = usage
        self.status = status
        self.completed_at = int(time.time())
        return events + [self._event(type_, response=self.snapshot())]

    # --- message text ---------------------------------------------------------------------------------

    def text_delta(self, text: str) -> list[Event]:
        events: list[Event] = []
        if "reasoning" in self._open:
            events += self._close_reasoning("completed")
        if "message" not in self._open:
            item = {"id": new_id("msg"), "type": "message", "role": "assistant", "status": "in_progress", "content": []}
            index, ev = self._add_item(item)
            self._open["message"] = index
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            item["content"].append(part)
            events += [
                ev,
                self._event(
                    "response.content_part.added",
                    item_id=item["id"], output_index=index, content_index=0, part=dict(part),
                ),
            ]
        index = self._open["message"]
        item = self.output[index]
        item["content"][0]["text"] += text
        events.append(
            self._event(
                "response.output_text.delta",
                item_id=item["id"], output_index=index, content_index=0, delta=text, logprobs=[],
            )
        )
        return events

    def _close_message(self, status: str, *, final: bool = False) -> list[Event]:
        index = self._open.pop("message")
        item = self.output[index]
        part = item["content"][0]
        item["status"] = status
        part["annotations"] = file_citations(part["text"], self.files, cite_rest=final, already_cited=self._cited)
        self._cited |= {a["file_id"] for a in part["annotations"]}
        ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
        return [
            *(
                self._event("response.output_text.annotation.added", annotation_index=i, annotation=dict(a), **ids)
                for i, a in enumerate(part["annotations"])
            ),
            self._event(
                "response.output_text.done",
                item_id=item["id"], output_index=index, content_index=0, text=part["text"], logprobs=[],
            ),
            self._event(
                "response.content_part.done",
                item_id=item["id"], output_index=index, content_index=0, part=copy.deepcopy(part),
            ),
            self._item_done(index),
        ]

    # --- reasoning ------------------------------------------------------------------------------------

    def reasoning_delta(self, text: str) -> list[Event]:
        events: list[Event] = []
        if "message" in self._open:
            events += self._close_message("completed")
        if "reasoning" not in self._open:
            item = {
                "id": new_id("rs"), "type": "reasoning", "summary": [], "status": "in_progress",
                "content": [{"type": "reasoning_text", "text": ""}],
            }
            index, ev = self._add_item(item)
            self._open["reasoning"] = index
            events += [
                ev,
                self._event(
                    "response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                    part={"type": "reasoning_text", "text": ""},
                ),
            ]
        index = self._open["reasoning"]
        item = self.output[index]
        item["content"][0]["text"] += text
        events.append(
            self._event(
                "response.reasoning_text.delta", item_id=item["id"], output_index=index, content_index=0, delta=text
            )
        )
        return events

    def _close_reasoning(self, status: str) -> list[Event]:
        index = self._open.pop("reasoning")
        item = self.output[index]
        item["status"] = status
        text = item["content"][0]["text"]
        if self.include_reasoning:
            item["encrypted_content"] = seal_reasoning(text)
        return [
            self._event(
                "response.reasoning_text.done", item_id=item["id"], output_index=index, content_index=0, text=text
            ),
            self._event(
                "response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                part={"type": "reasoning_text", "text": text},
            ),
            self._item_done(index),
        ]

    # --- function calls -------------------------------------------------------------------------------

    def function_call_start(self, name: str) -> tuple[int, list[Event]]:
        events = self.close_open()
        item = {
            "id": new_id("fc"), "type": "function_call", "call_id": new_id("call"), "name": name,
            "arguments": "", "status": "in_progress",
        }
        index, ev = self._add_item(item)
        return index, events + [ev]

    def function_call_delta(self, index: int, delta: str) -> list[Event]:
        item = self.output[index]
        item["arguments"] += delta
        return [
            self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=delta)
        ]

    def function_call_done(self, index: int, arguments: str | None = None) -> list[Event]:
        item = self.output[index]
        if arguments is not None:
            item["arguments"] = arguments
        item["status"] = "completed"
        return [
            self._event(
                "response.function_call_arguments.done", item_id=item["id"], output_index=index,
                name=item["name"], arguments=item["arguments"],
            ),
            self._item_done(index),
        ]

    # --- code interpreter calls -----------------------------------------------------------------------

    def code_start(self, container_id: str) -> tuple[int, list[Event]]:
        events = self.close_open()
        item = {
            "id": new_id("ci"), "type": "code_interpreter_call", "code": "", "container_id": container_id,
            "status": "in_progress", "outputs": None,
        }
        index, ev = self._add_item(item)
        ids = {"item_id": item["id"], "output_index": index}
        return index, events + [ev, self._event("response.code_interpreter_call.in_progress", **ids)]

    def code_delta(self, index: int, delta: str) -> list[Event]:
        item = self.output[index]
        item["code"] += delta
        return [
            self._event(
                "response.code_interpreter_call_code.delta", item_id=item["id"], output_index=index, delta=delta
            )
        ]

    def code_done(self, index: int) -> list[Event]:
        item = self.output[index]
        item["status"] = "interpreting"
        ids = {"item_id": item["id"], "output_index": index}
        return [
            self._event("response.code_interpreter_call_code.done", code=item["code"], **ids),
            self._event("response.code_interpreter_call.interpreting", **ids),
        ]

    def code_finished(self, index: int, outputs: list[dict[str, Any]], *, failed: bool = False) -> list[Event]:
        item = self.output[index]
        item["outputs"] = outputs
        item["status"] = "failed" if failed else "completed"
        events = [] if failed else [
            self._event("response.code_interpreter_call.completed", item_id=item["id"], output_index=index)
        ]
        return events + [self._item_done(index)]
