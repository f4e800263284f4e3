"""Object ids as OpenAI writes them: a type prefix, an underscore (a hyphen for files: `file-...`) and 24 random
hex digits."""

from __future__ import annotations

import re
import secrets

__all__ = ["is_id", "new_id"]

_RANDOM = re.compile(r"[0-9a-f]{24}")


def new_id(prefix: str, sep: str = "_") -> str:
    """A fresh id for an object of the kind `prefix` names (`resp`, `msg`, `fc`, `conv`, ...; `file` with
    `sep="-"`)."""
    return f"{prefix}{sep}{secrets.token_hex(12)}"


def is_id(value: str, prefix: str, sep: str = "_") -> bool:
    """Whether `value` is an id of the kind `prefix` names in the form `new_id` (and the sandbox service) makes:
    anything else (`../`, `%2F`, ...) names no object of ours and never goes into a URL."""
    head, _, tail = value.partition(sep)
    return head == prefix and _RANDOM.fullmatch(tail) is not None
