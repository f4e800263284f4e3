"""Per-key rate limits over a real server and the real `openai` SDK (max_retries=0: it retries 429s by default):
the 429 in OpenAI's shape with `retry-after`, OpenAI's `x-ratelimit-*` headers, tokens reserved when a response
is admitted and settled to its usage when it ends, and recovery after the window (on the limiter's clock, which
the tests move instead of sleeping)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import openai
import pytest

from tests.support.fakes import FakeEngine, say
from tests.support.keys import write_keys_file
from tests.support.serving import LiveServer
from vllm_responses.api import ratelimit
from vllm_responses.config import Config

MODEL = "fake-model"
KEY_RPM = "sk-rpm-0123456789abcdef0123456789abcdef"  # 3 requests a minute
KEY_TPM = "sk-tpm-0123456789abcdef0123456789abcdef"  # 10 tokens a minute
KEY_FLAG = "sk-flag-0123456789abcdef0123456789abcdef"  # the flags' limits: --rate-limit-rpm 100
KEY_120 = "sk-120-0123456789abcdef0123456789abcdef"  # 120 tokens a minute
KEY_REFUND = "sk-refund-0123456789abcdef0123456789abcdef"  # 120 tokens a minute


class Clock:
    """The limiter's clock: moved by the test (`advance`), never by time passing."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def next_window(self) -> None:
        """Past every count of the window so far."""
        self.now += ratelimit.WINDOW_S + 1


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, clock: Clock) -> Iterator[LiveServer]:
    entries = [
        {"key": KEY_RPM, "project": "p", "rpm": 3},
        {"key": KEY_TPM, "project": "p", "tpm": 10},
        {"key": KEY_FLAG, "project": "q"},
        {"key": KEY_120, "project": "p", "rpm": 0, "tpm": 120},
        {"key": KEY_REFUND, "project": "p", "rpm": 0, "tpm": 120},
    ]
    keys = write_keys_file(tmp_path_factory.mktemp("limits") / "keys.json", entries)
    live = LiveServer(Config(api_keys_file=keys, rate_limit_rpm=100), FakeEngine(), None)
    live.app.state.rate_limits.clock = clock
    live.start()
    yield live
    live.stop()


@pytest.fixture
def engine(server: LiveServer, clock: Clock) -> FakeEngine:
    clock.next_window()  # each test in a window of its own
    fake: FakeEngine = server.engine
    fake.reset()
    return fake


def _sdk(server: LiveServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


def test_requests_per_minute(server: LiveServer, engine: FakeEngine, clock: Clock) -> None:
    sdk = _sdk(server, KEY_RPM)
    for left in (2, 1, 0):
        raw = sdk.models.with_raw_response.list()
        assert raw.headers["x-ratelimit-limit-requests"] == "3"
        assert raw.headers["x-ratelimit-remaining-requests"] == str(left)
        assert raw.headers["x-ratelimit-reset-requests"].endswith("s")
        assert "x-ratelimit-limit-tokens" not in raw.headers  # no token limit on this key
    clock.now += 10
    with pytest.raises(openai.RateLimitError) as caught:
        sdk.models.list()
    err = caught.value
    assert err.status_code == 429 and err.code == "rate_limit_exceeded"
    assert isinstance(err.body, dict) and str(err.body["message"]).startswith(
        "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 50s."
    )
    assert err.response.headers["retry-after"] == "50"
    assert err.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert [m.id for m in _sdk(server, KEY_FLAG).models.list()] == [MODEL]  # another key: its own count
    clock.now += 50
    assert sdk.models.with_raw_response.list().headers["x-ratelimit-remaining-requests"] == "2"  # recovered


def test_tokens_per_minute(server: LiveServer, engine: FakeEngine, clock: Clock) -> None:
    sdk = _sdk(server, KEY_TPM)
    raw = sdk.responses.with_raw_response.create(model=MODEL, input="count my tokens, please")
    assert raw.headers["x-ratelimit-limit-tokens"] == "10"
    usage = raw.parse().usage
    assert usage is not None and usage.input_tokens + usage.output_tokens > 10
    assert raw.headers["x-ratelimit-remaining-tokens"] == "0"  # its reservation is the whole limit
    with pytest.raises(openai.RateLimitError) as caught:
        sdk.responses.create(model=MODEL, input="more")
    assert caught.value.code == "rate_limit_exceeded"
    body = caught.value.body
    assert isinstance(body, dict) and str(body["message"]).startswith(
        "Rate limit reached for tokens per min (TPM): Limit 10, Used "
    )
    assert caught.value.response.headers["x-ratelimit-remaining-tokens"] == "0"
    assert "retry-after" in caught.value.response.headers
    clock.next_window()
    assert sdk.responses.create(model=MODEL, input="again").status == "completed"  # recovered


async def _six_at_once(
    server: LiveServer, engine: FakeEngine
) -> tuple[list[int], list[openai.RateLimitError]]:
    """Six streamed responses created at once under the 120-token key while the engine holds them all; then
    the engine lets go. The tokens each admitted one used, and the 429s of the others."""
    sdk = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key=KEY_120, max_retries=0, timeout=30)

    async def one() -> object:
        return await sdk.responses.create(model=MODEL, input="hi", max_output_tokens=70, stream=True)

    opened = await asyncio.gather(*(one() for _ in range(6)), return_exceptions=True)
    assert engine.hold is not None
    engine.hold.set()
    spent: list[int] = []
    refused: list[openai.RateLimitError] = []
    for result in opened:
        if isinstance(result, openai.RateLimitError):
            refused.append(result)
            continue
        assert isinstance(result, openai.AsyncStream), result
        async for event in result:
            if event.type in ("response.completed", "response.incomplete"):
                usage = event.response.usage
                assert usage is not None
                spent.append(usage.input_tokens + usage.output_tokens)
    await sdk.close()
    return spent, refused


def test_concurrent_responses_cannot_pass_the_token_limit(server: LiveServer, engine: FakeEngine) -> None:
    """Each response reserves its prompt and `max_output_tokens` as it is admitted: of six created at once
    under a 120-token key, those whose reservation does not fit are refused up front (each would spend ~70)."""
    engine.script = [say("x" * 300)]  # 100 deltas: each response uses all of its 70 output tokens
    engine.hold = threading.Event()
    spent, refused = asyncio.run(_six_at_once(server, engine))
    assert len(refused) >= 4 and len(spent) + len(refused) == 6
    assert sum(spent) <= 120, spent
    for err in refused:
        assert err.status_code == 429 and err.code == "rate_limit_exceeded"
        assert "tokens per min (TPM): Limit 120, Used " in err.message
        assert err.response.headers["x-ratelimit-limit-tokens"] == "120"
        assert int(err.response.headers["x-ratelimit-remaining-tokens"]) < 72
        assert int(err.response.headers["retry-after"]) >= 1


def test_the_unused_reservation_is_given_back(server: LiveServer, engine: FakeEngine) -> None:
    """While a response runs its key holds its whole reservation; when it ends only what it used counts, so a
    second response that would not have fit beside the reservation fits beside the usage."""
    sdk = _sdk(server, KEY_REFUND)
    engine.hold = threading.Event()
    with sdk.responses.with_streaming_response.create(
        model=MODEL, input="hi", max_output_tokens=100, stream=True
    ) as raw:
        held = int(raw.headers["x-ratelimit-remaining-tokens"])
        assert held <= 20  # 100 output tokens and the prompt's held
        engine.hold.set()
        for line in raw.iter_lines():
            if line.startswith("data: ") and json.loads(line[6:])["type"] == "response.completed":
                usage = json.loads(line[6:])["response"]["usage"]
                break
    assert usage["input_tokens"] + usage["output_tokens"] < 20  # far less than was reserved
    later = sdk.responses.with_raw_response.create(model=MODEL, input="hi", max_output_tokens=100)
    assert later.parse().status == "completed"  # fits beside the first one's usage, not its reservation


def test_flag_limits_apply_to_keys_without_their_own(server: LiveServer) -> None:
    raw = _sdk(server, KEY_FLAG).models.with_raw_response.list()
    assert raw.headers["x-ratelimit-limit-requests"] == "100"


def test_duration_format() -> None:
    assert [ratelimit.duration(s) for s in (0.25, 1, 20.2, 360)] == ["250ms", "1s", "21s", "6m0s"]


def test_websocket_creates_count_as_requests(server: LiveServer, engine: FakeEngine, clock: Clock) -> None:
    """Each `response.create` on a WebSocket counts as a request of its key, as over HTTP (the upgrade counts
    too): past the limit the create gets the 429 as an error event, and the socket stays open."""
    from websockets.sync.client import connect

    url = f"ws://127.0.0.1:{server.port}/v1/responses"
    create = json.dumps({"type": "response.create", "model": MODEL, "input": "x"})
    with connect(url, open_timeout=10, additional_headers={"Authorization": f"Bearer {KEY_RPM}"}) as ws:
        for _ in range(2):  # the upgrade was the first of 3
            ws.send(create)
            while (event := json.loads(ws.recv(timeout=10)))["type"] not in ("response.completed", "error"):
                pass
            assert event["type"] == "response.completed", event
        ws.send(create)
        err = json.loads(ws.recv(timeout=10))
        assert err["type"] == "error" and err["status"] == 429, err
        assert err["error"]["code"] == "rate_limit_exceeded"
        assert "requests per min (RPM): Limit 3" in err["error"]["message"]
        clock.next_window()  # the window passes: the same socket creates again
        ws.send(create)
        assert json.loads(ws.recv(timeout=10))["type"] == "response.created"


def test_websocket_creates_reserve_tokens(server: LiveServer, engine: FakeEngine) -> None:
    """A create on a WebSocket reserves its tokens as over HTTP: a second one beside a running first one that
    holds most of the key's tokens gets the 429 as an error event."""
    from websockets.sync.client import connect

    engine.hold = threading.Event()
    url = f"ws://127.0.0.1:{server.port}/v1/responses"
    create = {"type": "response.create", "model": MODEL, "input": "hi", "max_output_tokens": 100}
    headers = {"Authorization": f"Bearer {KEY_120}"}
    with connect(url, open_timeout=10, additional_headers=headers) as ws:
        ws.send(json.dumps({**create, "stream_id": "a"}))
        assert json.loads(ws.recv(timeout=10))["type"] == "response.created"
        ws.send(json.dumps({**create, "stream_id": "b"}))
        while (event := json.loads(ws.recv(timeout=10)))["type"] != "error":
            pass
        assert event["status"] == 429 and event["error"]["code"] == "rate_limit_exceeded", event
        assert "tokens per min (TPM): Limit 120" in event["error"]["message"]
        engine.hold.set()


def test_background_responses_reserve_tokens(server: LiveServer, engine: FakeEngine) -> None:
    """A background response holds its reservation while it runs (its answer comes at once): a second one
    that does not fit beside it is refused up front; once the first ended, only its usage counts."""
    sdk = _sdk(server, KEY_REFUND)
    engine.hold = threading.Event()
    first = sdk.responses.with_raw_response.create(
        model=MODEL, input="hi", max_output_tokens=100, background=True
    )
    assert int(first.headers["x-ratelimit-remaining-tokens"]) <= 20
    with pytest.raises(openai.RateLimitError) as caught:
        sdk.responses.create(model=MODEL, input="hi", max_output_tokens=100, background=True)
    assert "tokens per min (TPM): Limit 120" in caught.value.message
    engine.hold.set()
    for _ in range(300):  # until the first one has ended: its reservation settled to its usage
        if int(sdk.models.with_raw_response.list().headers["x-ratelimit-remaining-tokens"]) > 100:
            break
        threading.Event().wait(0.05)
    assert sdk.responses.retrieve(first.parse().id).status == "completed"
    assert sdk.responses.create(model=MODEL, input="hi", max_output_tokens=100).status == "completed"
