"""`POST /v1/embeddings` on the real embedded all-MiniLM-L6-v2 in a pooling vLLM engine, beside the chat engine
(the tiny model) in the same server process, through the openai SDK and LangChain."""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.embedding_reference import ReferenceEmbedder
from tests.support.real import TINY, tiny_model_server
from tests.support.serving import LiveServer
from tests.support.wire import sdk_refusal, validate_as
from vllm_responses.engine.models import EMBEDDING_MODEL_NAME, default_embedding_model_path
from vllm_responses.server import open_embedder

pytestmark = pytest.mark.engine

MODEL = EMBEDDING_MODEL_NAME
TEXTS = [
    "The cat sits on the mat.",
    "A kitten is resting on a rug.",
    "Quarterly revenue grew by five percent.",
    "Der Hund schläft im Garten, während es regnet.",
]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


def model_folder() -> Path:
    folder = default_embedding_model_path()
    if folder is None:
        pytest.fail("the embedded embedding model is not set up: run scripts/setup.sh")
    return folder


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    """The tiny chat model and the embedded embedding model (as `serve` opens it by default), no sandbox."""
    model_folder()
    live = tiny_model_server(workers=0, open_embedder=open_embedder)
    yield live
    live.stop()


@pytest.fixture(scope="module")
def reference() -> ReferenceEmbedder:
    return ReferenceEmbedder(model_folder())


@pytest.fixture(scope="module")
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def test_vectors_equal_the_reference(
    client: openai.OpenAI, reference: ReferenceEmbedder, server: LiveServer
) -> None:
    raw = client.embeddings.with_raw_response.create(model=MODEL, input=TEXTS, encoding_format="float")
    body = raw.http_response.json()
    parsed = validate_as(openai.types.CreateEmbeddingResponse, body)
    assert parsed.model == MODEL and [d.index for d in parsed.data] == [0, 1, 2, 3]
    assert all(len(d.embedding) == 384 for d in parsed.data)
    assert parsed.usage.prompt_tokens == parsed.usage.total_tokens > len(TEXTS)
    for got, want in zip(parsed.data, reference.embed(TEXTS), strict=True):
        assert cosine(got.embedding, want) > 0.999
    listed = [m.id for m in client.models.list()]
    assert listed == [TINY, MODEL]


def test_similar_sentences_score_higher(client: openai.OpenAI) -> None:
    vectors = [d.embedding for d in client.embeddings.create(model=MODEL, input=TEXTS[:3]).data]
    cat, kitten, revenue = vectors
    assert cosine(cat, kitten) > cosine(cat, revenue) + 0.2
    assert cosine(cat, kitten) > cosine(kitten, revenue) + 0.2


def test_base64_decoded_by_the_sdk(client: openai.OpenAI) -> None:
    floats = (
        client.embeddings.create(model=MODEL, input="hello world", encoding_format="float").data[0].embedding
    )
    raw = (
        client.embeddings.create(model=MODEL, input="hello world", encoding_format="base64").data[0].embedding
    )
    assert isinstance(raw, str)  # asked for by name, the SDK hands the text over as it came
    packed = base64.b64decode(raw)
    assert (
        list(struct.unpack(f"<{len(packed) // 4}f", packed)) == floats
    )  # float32 both ways: the same values
    # with no encoding named the SDK asks for base64 itself and decodes it into floats
    decoded = client.embeddings.create(model=MODEL, input="hello world").data[0].embedding
    assert decoded == floats


def test_token_ids_embed_as_their_text(client: openai.OpenAI, reference: ReferenceEmbedder) -> None:
    ids = [reference.tokenizer(t)["input_ids"] for t in TEXTS[:2]]
    by_ids = client.embeddings.create(model=MODEL, input=ids, encoding_format="float")
    by_text = client.embeddings.create(model=MODEL, input=TEXTS[:2], encoding_format="float")
    for a, b in zip(by_ids.data, by_text.data, strict=True):
        assert cosine(a.embedding, b.embedding) > 0.9999
    one = client.embeddings.create(model=MODEL, input=ids[0], encoding_format="float")  # one input of ids
    assert len(one.data) == 1 and by_ids.usage.prompt_tokens == sum(len(i) for i in ids)


def test_dimensions_shorten_and_renormalise(client: openai.OpenAI) -> None:
    full = (
        client.embeddings.create(model=MODEL, input="hello world", encoding_format="float").data[0].embedding
    )
    short = client.embeddings.create(model=MODEL, input="hello world", dimensions=64, encoding_format="float")
    vector = short.data[0].embedding
    assert len(vector) == 64 and abs(math.sqrt(sum(v * v for v in vector)) - 1) < 1e-5
    assert cosine(vector, full[:64]) > 0.99999
    same = client.embeddings.create(model=MODEL, input="hello world", dimensions=384, encoding_format="float")
    assert cosine(same.data[0].embedding, full) > 0.99999


@pytest.mark.parametrize(
    ("kwargs", "param", "status"),
    [
        ({"input": ""}, "input", 400),
        ({"input": []}, "input", 400),
        ({"input": ["ok", ""]}, "input[1]", 400),
        ({"input": "word " * 300}, "input", 400),
        ({"input": ["fine", "word " * 300]}, "input", 400),
        ({"input": [[1, 2], [999999]]}, "input", 400),
        ({"input": ["x"] * 2049}, "input", 400),
        ({"input": ["x", [1, 2]]}, "input", 400),
        ({"input": "hi", "model": "text-embedding-3-small"}, "model", 404),
        ({"input": "hi", "dimensions": 1000}, "dimensions", 400),
        ({"input": "hi", "dimensions": 0}, "dimensions", 400),
        ({"input": "hi", "encoding_format": "int8"}, "encoding_format", 400),
    ],
)
def test_bad_input_is_a_4xx_naming_it(
    client: openai.OpenAI, kwargs: dict[str, Any], param: str, status: int
) -> None:
    body = {"model": MODEL, **kwargs}
    with pytest.raises(openai.APIStatusError) as caught:
        client.embeddings.create(**body)
    assert caught.value.status_code == status
    error = sdk_refusal(lambda: client.embeddings.create(**body))
    assert error["param"] == param, error
    assert error["type"] == "invalid_request_error"


def test_too_long_is_worded_as_openai(client: openai.OpenAI) -> None:
    error = sdk_refusal(lambda: client.embeddings.create(model=MODEL, input="word " * 300))
    assert error["code"] == "context_length_exceeded"
    assert "maximum input length is 256 tokens" in error["message"]


def test_chat_engine_answers_beside_the_pooling_engine(client: openai.OpenAI, server: LiveServer) -> None:
    client.embeddings.create(model=MODEL, input="load it first")
    embedder = server.app.state.vr.embeddings.embedder
    assert embedder.loaded  # the pooling AsyncLLM runs in this process, beside the chat engine's
    resp = client.responses.create(model=TINY, input="hi", max_output_tokens=16)
    assert resp.status in ("completed", "incomplete") and resp.output
    again = client.embeddings.create(model=MODEL, input="and again", encoding_format="float")
    assert len(again.data[0].embedding) == 384
    metrics = httpx.get(server.base_url + "/metrics").text  # the chat engine's own metrics are kept
    assert "vllm:prompt_tokens" in metrics


def test_langchain_openai_embeddings(server: LiveServer, reference: ReferenceEmbedder) -> None:
    from langchain_openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(
        model=MODEL,
        base_url=server.base_url + "/v1",
        api_key="unused",  # type: ignore[arg-type]
        check_embedding_ctx_length=False,  # send the texts, not tiktoken's token ids of them
        max_retries=0,
    )
    docs = embeddings.embed_documents(TEXTS[:2])
    query = embeddings.embed_query(TEXTS[2])
    for got, want in zip([*docs, query], reference.embed(TEXTS[:3]), strict=True):
        assert cosine(got, want) > 0.999
