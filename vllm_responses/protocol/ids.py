"""Object ids as OpenAI writes them: a type prefix, an underscore and 24 random hex digits."""

from __future__ import annotations

import secrets

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    """A fresh id for an object of the kind `prefix` names (`resp`, `msg`, `fc`, `conv`, ...)."""
    return f"{prefix}_{secrets.token_hex(12)}"
