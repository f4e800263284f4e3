"""A response's statuses, the sets of them that code tests, and the stream events that end a response."""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal, get_args

__all__ = ["END_EVENTS", "TERMINAL", "TERMINAL_EVENTS", "UNFINISHED", "EndEventType", "ResponseStatus"]


class ResponseStatus(StrEnum):
    """A response's `status` (the SDK's `ResponseStatus`). A `str`: JSON carries its plain value."""

    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    CANCELLED = "cancelled"


# The statuses a response ends in: it then has its usage and `completed_at`.
TERMINAL: Final = (
    ResponseStatus.COMPLETED,
    ResponseStatus.INCOMPLETE,
    ResponseStatus.FAILED,
    ResponseStatus.CANCELLED,
)

# The statuses of a response that some replica should still be running.
UNFINISHED: Final = (ResponseStatus.QUEUED, ResponseStatus.IN_PROGRESS)

EndEventType = Literal["response.completed", "response.incomplete", "response.failed"]

# The event a response's stream ends with, by the status it ends in (a cancelled response's stream is gone).
END_EVENTS: Final[dict[ResponseStatus, EndEventType]] = {
    ResponseStatus.COMPLETED: "response.completed",
    ResponseStatus.INCOMPLETE: "response.incomplete",
    ResponseStatus.FAILED: "response.failed",
}

TERMINAL_EVENTS: Final[frozenset[str]] = frozenset(get_args(EndEventType))
