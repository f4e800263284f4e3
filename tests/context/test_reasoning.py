"""Reasoning items given back: the text the model reads (sealed copy first, then content, then summary), what is
kept of a client's (the sealed copy's text, the server's kept copy, or no text), and the 400 for a sealed copy
that does not open."""

from __future__ import annotations

from functools import partial

import pytest

from vllm_responses.context.reasoning import check_sealed_reasoning, client_reasoning, reasoning_text
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.requests import parse_create_request
from vllm_responses.store.sealing import ReasoningSeal

SEAL = ReasoningSeal(bytes(32))
OPEN = partial(SEAL.open, project="proj")


def item(**fields: object) -> dict[str, object]:
    return {"type": "reasoning", "id": "rs_1", "summary": [], **fields}


def test_the_sealed_copy_wins_over_content_then_content_then_summary() -> None:
    content = [{"type": "reasoning_text", "text": "edited by the client"}]
    summary = [{"type": "summary_text", "text": "In short."}]
    sealed = SEAL.seal("what the model thought", "proj")
    assert reasoning_text(item(encrypted_content=sealed, content=content), OPEN) == "what the model thought"
    assert reasoning_text(item(content=content, summary=summary), OPEN) == "edited by the client"
    assert reasoning_text(item(summary=summary), OPEN) == "In short."
    assert reasoning_text(item(), OPEN) == ""
    # A stored item whose blob no longer opens (another key) falls back to its stored content.
    foreign = ReasoningSeal(bytes([7] * 32)).seal("x", "proj")
    assert reasoning_text(item(encrypted_content=foreign, content=content), OPEN) == "edited by the client"


def test_a_sealed_copy_that_does_not_open_is_a_400_at_its_item() -> None:
    good = SEAL.seal("plan", "proj")
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": "hi"},
            item(encrypted_content=good),
            item(encrypted_content=good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")),
        ],
    }
    req = parse_create_request(body)
    with pytest.raises(InvalidRequest) as err:
        check_sealed_reasoning(req.input, OPEN)
    assert err.value.param == "input[2].encrypted_content"
    assert err.value.code == "invalid_encrypted_content"
    check_sealed_reasoning(parse_create_request({**body, "input": body["input"][:2]}).input, OPEN)
    check_sealed_reasoning("hi", OPEN)


def test_a_clients_reasoning_keeps_only_the_servers_words() -> None:
    written = [{"type": "reasoning_text", "text": "written by the client"}]
    summary = [{"type": "summary_text", "text": "also the client's"}]
    sealed = SEAL.seal("what the model thought", "proj")
    opened = client_reasoning(
        item(encrypted_content=sealed, content=written, summary=summary), None, OPEN, "input[1]"
    )
    assert opened["content"] == [{"type": "reasoning_text", "text": "what the model thought"}]
    assert opened["summary"] == [] and opened["encrypted_content"] == sealed
    kept = item(content=[{"type": "reasoning_text", "text": "the server's own"}])
    assert client_reasoning(item(content=written), kept, OPEN, "input[1]") == kept
    bare = client_reasoning(item(content=written, summary=summary), None, OPEN, "input[1]")
    assert reasoning_text(bare, OPEN) == "" and bare["id"] == "rs_1"
    assert reasoning_text(client_reasoning(item(content=written), {"type": "message"}, OPEN, "x"), OPEN) == ""
    with pytest.raises(InvalidRequest) as err:
        client_reasoning(item(encrypted_content=SEAL.seal("x", "other")), None, OPEN, "items[3]")
    assert err.value.param == "items[3].encrypted_content" and "another project" in str(err.value)
