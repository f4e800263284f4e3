"""Reasoning items given back: the text the model reads of each, and the check of the sealed copies clients send."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.inputs import InputItem, ReasoningInput

__all__ = ["Opener", "check_sealed_reasoning", "reasoning_text"]

# Opens a reasoning item's `encrypted_content` (store/sealing.py `ReasoningSeal.open`): `ValueError` when it
# is not a blob this server sealed.
Opener = Callable[[str], str]


def reasoning_text(raw: Mapping[str, Any], open_sealed: Opener | None) -> str:
    """What the model reads of a reasoning item: its sealed copy when it has one that opens (the server's own
    word wins over a plain `content` sent beside it), else its `reasoning_text` content, else its summary."""
    sealed = raw.get("encrypted_content")
    if isinstance(sealed, str) and sealed and open_sealed is not None:
        try:
            return open_sealed(sealed)
        except ValueError:  # a stored item sealed under an older key: its content is stored beside it
            pass
    for key, kind in (("content", "reasoning_text"), ("summary", "summary_text")):
        parts = raw.get(key) or []
        text = "\n\n".join(
            str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == kind
        )
        if text.strip():
            return text
    return ""


def check_sealed_reasoning(input_: str | Sequence[InputItem], open_sealed: Opener) -> None:
    """Every reasoning item of the input with an `encrypted_content` must hold one this server sealed
    (unaltered, under its key): a 400 at the item's `encrypted_content` otherwise."""
    if isinstance(input_, str):
        return
    for i, item in enumerate(input_):
        if isinstance(item, ReasoningInput) and item.encrypted_content:
            try:
                open_sealed(item.encrypted_content)
            except ValueError as exc:
                raise InvalidRequest(
                    f"The encrypted content of reasoning item {i} could not be verified: {exc}.",
                    param=f"input[{i}].encrypted_content",
                    code="invalid_encrypted_content",
                ) from None
