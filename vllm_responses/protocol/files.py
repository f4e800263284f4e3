"""Wire shapes of the Files and Uploads APIs: purposes, `expires_after`, the create-upload and complete bodies
we accept (a 400 naming the field otherwise), and the id forms (`file-...`, `upload_...`, `part_...`)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.ids import is_id, new_id

__all__ = [
    "EXPIRES_LEAST_S",
    "EXPIRES_MOST_S",
    "PART_MOST_BYTES",
    "PURPOSES",
    "UPLOAD_EXPIRES_S",
    "CompleteUpload",
    "CreateUpload",
    "expires_after_s",
    "is_file_id",
    "new_file_id",
    "parse_body",
    "plain_filename",
    "purpose_of",
]

# The SDK's `FilePurpose` values: what `purpose` may be on a file and on an upload.
PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
# `expires_after.seconds` bounds (one hour to thirty days), as OpenAI's.
EXPIRES_LEAST_S, EXPIRES_MOST_S = 3600, 2_592_000
# An upload not completed within this long expires (its parts are dropped), as OpenAI's do.
UPLOAD_EXPIRES_S = 3600
# The most one part of an upload may carry (64 MiB, OpenAI's bound and the SDK's part size).
PART_MOST_BYTES = 64 * 1024 * 1024


def new_file_id() -> str:
    return new_id("file", "-")


def is_file_id(value: str) -> bool:
    """Whether `value` is a Files API id in the form this server makes (`file-` and 24 hex digits)."""
    return is_id(value, "file", "-")


def plain_filename(raw: str | None, param: str) -> str:
    """The name a file is kept under (and copied into a container as): its base name, no path tricks; a 400
    naming `param` when nothing plain is left."""
    name = posixpath.basename((raw or "").replace("\\", "/")).strip()
    if not name or name in (".", "..") or "\x00" in name or len(name) > 255:
        raise InvalidRequest("The file needs a plain file name.", param=param)
    return name


def purpose_of(value: object, param: str = "purpose") -> str:
    """`value` as a file purpose, or a 400 naming `param`."""
    if not isinstance(value, str) or value not in PURPOSES:
        raise InvalidRequest(
            f"Invalid value for '{param}': expected one of {', '.join(PURPOSES)}.", param=param
        )
    return value


def expires_after_s(anchor: object, seconds: object, param: str = "expires_after") -> float:
    """An `expires_after` (`anchor` "created_at", `seconds` within the bounds) as its seconds; a 400 naming the
    field at fault."""
    if anchor != "created_at":
        raise InvalidRequest(
            f"Invalid value for '{param}.anchor': expected 'created_at'.", param=f"{param}.anchor"
        )
    try:
        value = int(str(seconds)) if not isinstance(seconds, bool) else None
    except ValueError:
        value = None
    if value is None or not EXPIRES_LEAST_S <= value <= EXPIRES_MOST_S:
        raise InvalidRequest(
            f"Invalid value for '{param}.seconds': expected an integer from {EXPIRES_LEAST_S} to "
            f"{EXPIRES_MOST_S}.",
            param=f"{param}.seconds",
        )
    return float(value)


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class _ExpiresAfter(_Model):
    anchor: Any = None
    seconds: Any = None


class CreateUpload(_Model):
    """The body of `POST /v1/uploads`."""

    filename: str
    purpose: str
    bytes: int = Field(ge=0)
    mime_type: str = Field(min_length=1, max_length=255)
    expires_after: _ExpiresAfter | None = None


class CompleteUpload(_Model):
    """The body of `POST /v1/uploads/{upload_id}/complete`."""

    part_ids: list[str] = Field(min_length=1)
    md5: str | None = None


def parse_body(model: type[CreateUpload] | type[CompleteUpload], body: Any) -> Any:
    """`body` validated as `model`, or a 400 naming the most specific field at fault."""
    if not isinstance(body, Mapping):
        raise InvalidRequest("The request body must be a JSON object.", param="body")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        err = max(exc.errors(), key=lambda e: len(e["loc"]))
        param = ".".join(str(p) for p in err["loc"]) or "body"
        raise InvalidRequest(f"Invalid value for '{param}': {err['msg']}.", param=param) from None
