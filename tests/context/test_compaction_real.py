"""Compaction on the real engine: the tiny model with the summary forced (exact), the SDK as the client,
token counts from the real tokenizer through `POST /v1/responses/input_tokens`."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.context.test_compaction import validate_compacted
from tests.support.real import TINY, exactly
from tests.support.wire import validate_response
from vllm_responses.context.turns import SUMMARY_HEADER

pytestmark = [pytest.mark.engine, pytest.mark.sandbox]

FACT = "the locker code is 4417"
SUMMARY = f"Ada told the assistant that {FACT}; they also chatted about the weather."
QUESTION = {"role": "user", "content": "What is my locker code?"}
CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": f"Hello, I am Ada and {FACT}. " + "The weather is mild today. " * 10},
    {"role": "assistant", "content": "Nice to meet you, Ada. " + "Mild weather indeed. " * 10},
    {"role": "user", "content": "Tell me more about the weather. " + "Clouds and sun. " * 8},
    {"role": "assistant", "content": "It stays mild. " + "Some clouds, some sun. " * 8},
    QUESTION,
]


def count(client: openai.OpenAI, **kw: Any) -> int:
    return client.responses.input_tokens.count(model=TINY, **kw).input_tokens


def test_compact_then_continue(real_client: openai.OpenAI) -> None:
    raw = real_client.responses.with_raw_response.compact(
        model=TINY,
        input=CONVERSATION,  # type: ignore[arg-type]
        extra_body={"structured_outputs": exactly(SUMMARY)},
    )
    compacted, body = raw.parse(), raw.http_response.json()
    validate_compacted(body)
    out = body["output"]
    assert [it["type"] for it in out] == ["message", "message", "message", "compaction"]
    assert FACT not in out[-1]["encrypted_content"]  # opaque to the client
    assert compacted.usage.input_tokens > 0 and compacted.usage.output_tokens > 0

    original, smaller = count(real_client, input=CONVERSATION), count(real_client, input=out)
    print(f"input tokens: {original} before compaction, {smaller} after")
    assert smaller < original
    # What the model reads for the compaction item is exactly the summary, fact included, as a user turn
    # after the user messages kept: the real tokenizer renders both contexts to the same prompt length.
    users = [m for m in CONVERSATION if m["role"] == "user"]
    as_text = [*users, {"role": "user", "content": f"{SUMMARY_HEADER}\n{SUMMARY}"}]
    assert smaller == count(real_client, input=as_text)
    assert count(real_client, input=[*users, {"role": "user", "content": f"{SUMMARY_HEADER}\n"}]) < smaller

    follow = real_client.responses.create(
        model=TINY, input=out, extra_body={"structured_outputs": exactly("It is 4417.")}
    )
    validate_response(follow.model_dump(mode="json", exclude_unset=True))
    assert follow.output_text == "It is 4417."
    assert follow.usage is not None and follow.usage.input_tokens == smaller


def test_context_management_on_create(real_client: openai.OpenAI) -> None:
    original = count(real_client, input=CONVERSATION)
    kwargs: dict[str, Any] = {
        "model": TINY,
        "input": CONVERSATION,
        "extra_body": {"structured_outputs": exactly("It is 4417.")},
    }
    plain = real_client.responses.create(**kwargs)
    entry = {"type": "compaction", "compact_threshold": original - 1, "structured_outputs": exactly(SUMMARY)}
    compacted = real_client.responses.create(**kwargs, context_management=[entry])
    for r in (plain, compacted):
        validate_response(real_client.responses.retrieve(r.id).model_dump(mode="json", exclude_unset=True))
        assert r.output_text == "It is 4417."
    assert plain.usage is not None and plain.usage.input_tokens == original
    # The compacted response's usage is the summarising call's plus its own call's; the summarising call
    # is the one /compact makes over the same items (same prompt), so the rest is the answering call's.
    summarising = real_client.responses.compact(
        model=TINY,
        input=CONVERSATION,  # type: ignore[arg-type]
        extra_body={"structured_outputs": exactly(SUMMARY)},
    ).usage
    assert compacted.usage is not None and compacted.usage.input_tokens > summarising.input_tokens
    assert compacted.usage.input_tokens - summarising.input_tokens < original // 3
    assert compacted.output[0].type == "compaction"
    # the next turn continues from the compacted history
    after_plain = count(real_client, input="Thanks!", previous_response_id=plain.id)
    after_compacted = count(real_client, input="Thanks!", previous_response_id=compacted.id)
    assert after_compacted < after_plain // 2
