"""`POST /v1/embeddings` over a fake embedder and over `--embedding-url` (another server's endpoint, real HTTP):
vectors passed through, refusals passed on, bounds in time and bytes, no proxy of the environment, admission
and rate limits, no embedding model."""

from __future__ import annotations

import base64
import struct
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import openai
import pytest

from tests.support.fake_embedder import FakeEmbedder, fake_vector
from tests.support.fakes import FakeEngine
from tests.support.serving import LiveServer
from tests.support.wire import sdk_refusal, validate_as
from vllm_responses.api import embeddings as embeddings_route
from vllm_responses.config import Config
from vllm_responses.engine import remote_embedder
from vllm_responses.engine.remote_embedder import RemoteEmbedder
from vllm_responses.server import open_embedder

NAME = "fake-embedder"


def sdk(server: LiveServer, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def fake() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture(scope="module")
def upstream(fake: FakeEmbedder) -> Iterator[LiveServer]:
    """A server whose embedding model is the fake: the remote server of the tests."""
    live = LiveServer(Config(), FakeEngine(), None, open_embedder=fake.opener).start()
    yield live
    live.stop()


def remote_server(upstream: LiveServer, **settings: object) -> LiveServer:
    config = Config(embedding_url=upstream.base_url + "/v1", embedding_model=NAME, **settings)  # type: ignore[arg-type]
    return LiveServer(config, FakeEngine(), None, open_embedder=open_embedder).start()


@pytest.fixture(scope="module")
def gateway(upstream: LiveServer) -> Iterator[LiveServer]:
    """A server embedding with `--embedding-url` at `upstream` (as `serve` opens it), in a bounded time."""
    live = remote_server(upstream, embedding_timeout=5.0)
    yield live
    live.stop()


def test_no_embedding_model_is_a_503(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        client.embeddings.create(model="anything", input="hi")
    assert caught.value.status_code == 503
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "embeddings_unavailable"


def test_remote_vectors_pass_through(gateway: LiveServer) -> None:
    client = sdk(gateway)
    assert NAME in [m.id for m in client.models.list()]
    raw = client.embeddings.with_raw_response.create(
        model=NAME, input=["abc", "hello"], encoding_format="float"
    )
    parsed = validate_as(openai.types.CreateEmbeddingResponse, raw.http_response.json())
    want = [fake_vector("abc"), fake_vector("hello")]
    for got, expected in zip(parsed.data, want, strict=True):
        assert got.embedding == pytest.approx(expected, abs=1e-6)
    assert parsed.usage.prompt_tokens == 8 and parsed.model == NAME
    ids = client.embeddings.create(model=NAME, input=[[5, 6, 7]], encoding_format="float")
    assert ids.data[0].embedding == pytest.approx(fake_vector([5, 6, 7]), abs=1e-6)
    short = client.embeddings.create(model=NAME, input="abc", dimensions=4, encoding_format="base64")
    packed = base64.b64decode(str(short.data[0].embedding))
    head = fake_vector("abc")[:4]
    norm = sum(v * v for v in head) ** 0.5
    assert struct.unpack("<4f", packed) == pytest.approx([v / norm for v in head], abs=1e-6)


def test_remote_refusal_is_passed_on(gateway: LiveServer) -> None:
    error = sdk_refusal(lambda: sdk(gateway).embeddings.create(model=NAME, input=["ok", "x" * 100]))
    assert error["param"] == "input" and "over 64 tokens" in error["message"]
    wrong = sdk_refusal(lambda: sdk(gateway).embeddings.create(model="other", input="hi"))
    assert wrong["param"] == "model" and wrong["code"] == "model_not_found"


def test_remote_past_its_time_is_a_503(upstream: LiveServer, fake: FakeEmbedder) -> None:
    live = remote_server(upstream, embedding_timeout=1.0)
    fake.gate = threading.Event()  # not opened before the gateway gives up: the remote call does not end
    try:
        with pytest.raises(openai.APIStatusError) as caught:
            sdk(live).embeddings.create(model=NAME, input="hi")
        assert caught.value.status_code == 503 and "no answer in 1 s" in caught.value.message
    finally:
        fake.gate.set()
        fake.gate = None
        live.stop()


def test_remote_answer_past_its_bytes_is_a_503(gateway: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote_embedder, "MAX_ANSWER_BYTES", 1000)
    with pytest.raises(openai.APIStatusError) as caught:
        sdk(gateway).embeddings.create(model=NAME, input=["abc"] * 40)
    assert caught.value.status_code == 503 and "over 1000 bytes" in caught.value.message


async def test_remote_ignores_the_environment_proxy(
    upstream: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    embedder = await RemoteEmbedder.start(upstream.base_url + "/v1", None, timeout_s=5.0)
    try:  # the models listed and the probes went straight to the server (the first listed is a chat model)
        assert embedder.model_name == NAME and embedder.dimensions == 8
        assert (await embedder.embed(["abc"])).vectors[0] == pytest.approx(fake_vector("abc"), abs=1e-6)
    finally:
        await embedder.aclose()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # uvicorn's exit 3
def test_a_remote_that_does_not_answer_stops_the_start() -> None:
    config = Config(embedding_url="http://127.0.0.1:9/v1", embedding_timeout=2.0)
    live = LiveServer(config, FakeEngine(), None, open_embedder=open_embedder)
    with pytest.raises(RuntimeError, match="died during start-up"):
        live.start(timeout=30)


def test_admission_bounds_embedding_requests(fake: FakeEmbedder) -> None:
    live = LiveServer(
        Config(max_concurrent_embeddings=1), FakeEngine(), None, open_embedder=fake.opener
    ).start()
    admission = live.app.state.vr.embeddings.admission
    fake.gate = threading.Event()
    answers: list[int] = []
    body = {"model": NAME, "input": "x"}

    def call() -> None:
        answers.append(httpx.post(live.base_url + "/v1/embeddings", json=body, timeout=60).status_code)

    threads = [threading.Thread(target=call) for _ in range(3)]
    try:
        for t in threads:
            t.start()
        wait_until(lambda: fake.running == 1 and admission.queued == 2)  # one runs, twice as many wait
        refused = httpx.post(live.base_url + "/v1/embeddings", json=body, timeout=60)
        assert refused.status_code == 429 and refused.headers["retry-after"]
        assert "--max-concurrent-embeddings 1" in refused.json()["error"]["message"]
    finally:
        fake.gate.set()
        for t in threads:
            t.join(timeout=60)
        fake.gate = None
        live.stop()
    assert answers == [200, 200, 200]


def wait_until(check: Callable[[], bool], limit_s: float = 30) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, "the state waited for was not reached"
        time.sleep(0.01)


def test_tokens_count_against_the_keys_limit(fake: FakeEmbedder) -> None:
    live = LiveServer(
        Config(api_key="k", rate_limit_tpm=10), FakeEngine(), None, open_embedder=fake.opener
    ).start()
    try:
        client = sdk(live, key="k")
        client.embeddings.create(model=NAME, input="0123456789abcdef")  # 16 tokens, counted once it ends
        with pytest.raises(openai.RateLimitError):
            client.embeddings.create(model=NAME, input="a")
    finally:
        live.stop()


def test_a_large_answer_is_written_off_the_loop_the_same(
    upstream: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"model": NAME, "input": ["abc", "hello"], "encoding_format": "float"}
    inline = httpx.post(upstream.base_url + "/v1/embeddings", json=body, timeout=30)
    monkeypatch.setattr(embeddings_route, "INLINE_FLOATS", 8)  # two vectors of 8: written in a worker thread
    threaded = httpx.post(upstream.base_url + "/v1/embeddings", json=body, timeout=30)
    assert threaded.status_code == inline.status_code == 200
    assert threaded.headers["content-type"] == inline.headers["content-type"] == "application/json"
    assert threaded.content == inline.content
