"""The Vector Stores API's request fields, checked as OpenAI's (a 400 naming the field at fault), and its ids."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.ids import is_id, new_id

__all__ = [
    "FILE_STATUSES",
    "MAX_BATCH_FILES",
    "is_batch_id",
    "is_vector_store_id",
    "new_batch_id",
    "new_vector_store_id",
    "parse_expires_after",
    "parse_file_ids",
    "parse_metadata",
    "parse_text",
    "string_list",
]

FILE_STATUSES = ("in_progress", "completed", "failed", "cancelled")
MAX_BATCH_FILES = 2000  # files one create or batch adds (OpenAI's bound)
_MAX_DAYS = 365


def new_vector_store_id() -> str:
    return new_id("vs")


def is_vector_store_id(value: str) -> bool:
    return is_id(value, "vs")


def new_batch_id() -> str:
    return new_id("vsfb")


def is_batch_id(value: str) -> bool:
    return is_id(value, "vsfb")


def parse_text(value: object, param: str, most: int) -> str | None:
    """A string of at most `most` characters (absent or null: None)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected a string.", param=param, code="invalid_type"
        )
    if len(value) > most:
        raise InvalidRequest(
            f"Invalid '{param}': string too long. Expected a string with maximum length {most}, but got a string "
            f"with length {len(value)} instead.",
            param=param,
            code="string_above_max_length",
        )
    return value


def parse_metadata(value: object, param: str = "metadata") -> dict[str, str]:
    """`metadata`: at most 16 keys of at most 64 characters, each value a string of at most 512 (null: none)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected an object.", param=param, code="invalid_type"
        )
    if len(value) > 16:
        raise InvalidRequest(
            f"Invalid '{param}': an object with at most 16 keys was expected, but got {len(value)}.",
            param=param,
            code="object_above_max_properties",
        )
    out = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or len(key) > 64:
            raise InvalidRequest(
                f"Invalid '{param}': each key is a string of 1 to 64 characters.", param=param
            )
        text = parse_text(item, f"{param}.{key}", 512)
        if text is None:
            raise InvalidRequest(
                f"Invalid type for '{param}.{key}': expected a string.",
                param=f"{param}.{key}",
                code="invalid_type",
            )
        out[key] = text
    return out


def parse_expires_after(value: object, param: str = "expires_after") -> int | None:
    """`expires_after` (`{"anchor": "last_active_at", "days": 1..365}`) as its days; absent or null: None."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected an object.", param=param, code="invalid_type"
        )
    if value.get("anchor") != "last_active_at":
        raise InvalidRequest(
            f"Invalid value for '{param}.anchor': {value.get('anchor')!r}. Supported values are: 'last_active_at'.",
            param=f"{param}.anchor",
        )
    days = value.get("days")
    if isinstance(days, bool) or not isinstance(days, int):
        raise InvalidRequest(
            f"Invalid type for '{param}.days': expected an integer.",
            param=f"{param}.days",
            code="invalid_type",
        )
    if not 1 <= days <= _MAX_DAYS:
        side = "below minimum" if days < 1 else "above maximum"
        raise InvalidRequest(
            f"Invalid '{param}.days': integer {side} value. Expected a value between 1 and {_MAX_DAYS}, but got "
            f"{days} instead.",
            param=f"{param}.days",
            code=f"integer_{'below_min' if days < 1 else 'above_max'}_value",
        )
    return days


def string_list(value: object, param: str, most: int) -> list[Any]:
    """A JSON array of at most `most` items (absent or null: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected an array.", param=param, code="invalid_type"
        )
    if len(value) > most:
        raise InvalidRequest(
            f"Invalid '{param}': array too long. Expected an array with maximum length {most}, but got an array "
            f"with length {len(value)} instead.",
            param=param,
            code="array_above_max_length",
        )
    return value


def parse_file_ids(value: object, param: str = "file_ids") -> list[str]:
    """`file_ids`: at most `MAX_BATCH_FILES` strings, each named once (absent or null: none)."""
    ids = string_list(value, param, MAX_BATCH_FILES)
    for i, item in enumerate(ids):
        if not isinstance(item, str) or not item:
            raise InvalidRequest(
                f"Invalid type for '{param}[{i}]': expected a file id.",
                param=f"{param}[{i}]",
                code="invalid_type",
            )
        if item in ids[:i]:
            raise InvalidRequest(f"Invalid '{param}[{i}]': {item!r} is named twice.", param=f"{param}[{i}]")
    return ids
