"""A response's stored record: built from its run (when acknowledged, when ended), and the ones a stopped
replica (or an earlier process) left `queued` / `in_progress` marked failed, so that they are found, not 404."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, cast

from vllm_responses.protocol.items import ResponseObject
from vllm_responses.protocol.status import UNFINISHED, ResponseStatus
from vllm_responses.runs.run import Run
from vllm_responses.store.base import ResponseStore, StoredResponse

__all__ = [
    "INTERRUPTED_CODE",
    "INTERRUPTED_MESSAGE",
    "fail_abandoned",
    "generated",
    "keep_record",
    "response_record",
]

logger = logging.getLogger(__name__)

# `error` of a response the server stopped running: `code` is one of the SDK's fixed `ResponseError` codes.
INTERRUPTED_CODE = "server_error"
INTERRUPTED_MESSAGE = (
    "The server running this response stopped or restarted before it finished, so it did not finish; "
    "create it again."
)


def generated(run: Run) -> list[dict[str, Any]]:
    """The response's output as history items: its compaction item is already in the context it stands for."""
    return [cast(dict[str, Any], item) for item in run.builder.output if item["type"] != "compaction"]


def response_record(
    run: Run, include_outputs: bool, context: list[dict[str, Any]], input_items: list[dict[str, Any]]
) -> StoredResponse:
    """The response as it is kept now: its snapshot (full code outputs), its input, and its history (the
    items the model saw, `context`, then its output so far)."""
    return StoredResponse(
        id=run.id,
        response=run.builder.snapshot(include_outputs=True),
        input_items=input_items,
        history=[*context, *generated(run)],
        include_outputs=include_outputs,
        created_at=time.time(),
        project=run.project,
    )


async def keep_record(store: ResponseStore, record: StoredResponse) -> None:
    """Write a running response's record (its first, when acknowledged, and its last, when it ends): the one
    write of both; a failure is logged, not raised (the response itself went fine)."""
    try:
        await store.save(record)
    except Exception:
        logger.exception("could not store response %s", record.id)


def _failed(response: ResponseObject) -> ResponseObject:
    """`response` ended as failed (its server stopped): its unfinished items incomplete, an error saying why."""
    output = [
        {**item, "status": "incomplete"} if item.get("status") in ("in_progress", "interpreting") else item
        for item in response.get("output", [])
    ]
    return cast(
        ResponseObject,
        {
            **response,
            "status": ResponseStatus.FAILED,
            "error": {"code": INTERRUPTED_CODE, "message": INTERRUPTED_MESSAGE},
            "output": output,
        },
    )


async def fail_abandoned(store: ResponseStore, response_ids: list[str]) -> int:
    """Mark failed the responses `response_ids` (found unfinished with no live lease: the replica running
    them stopped, replicas.py), those still unfinished when re-read, and drop their leases. Returns how many.

    Failed, not resumed: resuming mid-way through an agent loop would run its tool calls again (code, MCP
    calls, function calls the client already acted on), and the partial output is already out."""
    failed: list[str] = []
    for response_id in response_ids:
        record = await store.get(response_id)
        if record is not None and record.response.get("status") in UNFINISHED:
            await store.save(dataclasses.replace(record, response=_failed(record.response)))
            failed.append(response_id)
        await store.release_lease(response_id)
    if failed:
        logger.warning(
            "%d response(s) were running on a replica that stopped; marked failed: %s",
            len(failed),
            ", ".join(failed),
        )
    return len(failed)
