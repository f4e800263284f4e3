"""Reasoning items given back: the text the model reads of each, what is kept of the ones clients send, and the
check of their sealed copies.

Only the server's own words reach the model as its reasoning: a sealed copy that opens for the caller's
project, or the copy kept by the server under the item's id. A reasoning item a client wrote is kept without its
text (`client_reasoning`): it is the client's word, not the model's."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.inputs import InputItem, ReasoningInput

__all__ = ["Opener", "check_sealed_reasoning", "client_reasoning", "reasoning_text"]

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


def client_reasoning(
    raw: dict[str, Any], kept: dict[str, Any] | None, open_sealed: Opener | None, param: str
) -> dict[str, Any]:
    """A reasoning item of a client's input as it is kept and read (the model reads its `content`: see
    `reasoning_text`): with a sealed copy, that copy's text (a 400 at `{param}.encrypted_content` when it does
    not open); else the server's copy `kept` under its id (`find_item`); else the item without its text, so
    that no text the client wrote reaches the model as the model's own reasoning."""
    sealed = raw.get("encrypted_content")
    if isinstance(sealed, str) and sealed and open_sealed is not None:
        text = _opened(open_sealed, sealed, f"{param}.encrypted_content", param)
        return {**raw, "summary": [], "content": [{"type": "reasoning_text", "text": text}]}
    if kept is not None and kept.get("type") == "reasoning":
        return kept
    return {**raw, "summary": [], "content": []}


def _opened(open_sealed: Opener, sealed: str, param: str, where: str) -> str:
    """The text of a sealed copy; a 400 at `param` naming the item (`where`: `input[i]`) when it does not open."""
    try:
        return open_sealed(sealed)
    except ValueError as exc:
        raise InvalidRequest(
            f"The encrypted content of reasoning item {where} could not be verified: {exc}.",
            param=param,
            code="invalid_encrypted_content",
        ) from None


def check_sealed_reasoning(input_: str | Sequence[InputItem], open_sealed: Opener) -> None:
    """Every reasoning item of the input with an `encrypted_content` must hold one this server sealed
    (unaltered, under its key): a 400 at the item's `encrypted_content` otherwise."""
    if isinstance(input_, str):
        return
    for i, item in enumerate(input_):
        if isinstance(item, ReasoningInput) and item.encrypted_content:
            _opened(open_sealed, item.encrypted_content, f"input[{i}].encrypted_content", f"input[{i}]")
