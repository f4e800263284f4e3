"""Compaction on the wire: the `compaction` item (its sealed summary), `context_management`, the compact request and response."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Literal, TypedDict, Union

from pydantic import Field, field_validator

from vllm_responses.protocol.items import CompactionItem, ResponseUsage
from vllm_responses.protocol.lenient import LenientModel

__all__ = [
    "COMPACTION_SEAL",
    "CompactRequest",
    "CompactedResponse",
    "CompactionInput",
    "CompactionItem",
    "ContextManagement",
    "open_summary",
    "seal_summary",
]

COMPACTION_SEAL = "vrc1:"


def seal_summary(summary: str) -> str:
    """A compaction item's `encrypted_content`: opaque to clients (base64 of a small JSON document), not
    secret; the server reads it back with `open_summary` when the item returns as input."""
    doc = json.dumps({"summary": summary}, ensure_ascii=False)
    return COMPACTION_SEAL + base64.urlsafe_b64encode(doc.encode()).decode()


def open_summary(sealed: str) -> str:
    """The summary inside `encrypted_content`; `ValueError` when it is not one this server sealed."""
    if not sealed.startswith(COMPACTION_SEAL):
        raise ValueError("encrypted_content is not a compaction made by this server")
    try:
        doc = json.loads(base64.urlsafe_b64decode(sealed[len(COMPACTION_SEAL) :].encode()))
    except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError("encrypted_content is damaged") from None
    summary = doc.get("summary") if isinstance(doc, dict) else None
    if not isinstance(summary, str):
        raise ValueError("encrypted_content is damaged")
    return summary


class CompactionInput(LenientModel):
    """A `compaction` item sent back as input (`ResponseCompactionItemParam`); its seal is checked here."""

    type: Literal["compaction"]
    encrypted_content: str
    id: str | None = None

    @field_validator("encrypted_content")
    @classmethod
    def _sealed(cls, v: str) -> str:
        open_summary(v)
        return v


class ContextManagement(LenientModel):
    """One `context_management` entry of a create. Vendor extension: `structured_outputs` forces the
    summarising call's output (as the create field of that name does for the response's own calls)."""

    type: Literal["compaction"]
    compact_threshold: int = Field(ge=1)
    structured_outputs: dict[str, Any] | None = None


class CompactRequest(LenientModel):
    """The `POST /v1/responses/compact` body (`ResponseCompactParams`); other SDK fields are accepted and
    ignored. Vendor extension: `structured_outputs` forces the summarising call's output."""

    model: str
    input: Union[str, list[Any], None] = None
    instructions: str | None = None
    previous_response_id: str | None = None
    structured_outputs: dict[str, Any] | None = None


class CompactedResponse(TypedDict):
    """`CompactedResponse`: the body of `POST /v1/responses/compact`."""

    id: str
    object: Literal["response.compaction"]
    created_at: int
    output: list[dict[str, Any]]
    usage: ResponseUsage
