"""Per-key rate limits over a real server and the real `openai` SDK (max_retries=0: it retries 429s by default):
the 429 in OpenAI's shape with `retry-after`, OpenAI's `x-ratelimit-*` headers, and recovery after the window."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import openai
import pytest

from tests.fakes import FakeEngine
from tests.serving import LiveServer
from vllm_responses.api import ratelimit
from vllm_responses.config import Config

MODEL = "fake-model"
KEY_RPM = "sk-rpm-0123456789"  # 3 requests a minute
KEY_TPM = "sk-tpm-0123456789"  # 10 tokens a minute
KEY_FLAG = "sk-flag-0123456789"  # the flags' limits: --rate-limit-rpm 100


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    keys = tmp_path_factory.mktemp("limits") / "keys.json"
    entries = [
        {"key": KEY_RPM, "project": "p", "rpm": 3},
        {"key": KEY_TPM, "project": "p", "tpm": 10},
        {"key": KEY_FLAG, "project": "q"},
    ]
    keys.write_text(json.dumps({"keys": entries}))
    live = LiveServer(Config(api_keys_file=str(keys), rate_limit_rpm=100), FakeEngine(), None).start()
    yield live
    live.stop()


@pytest.fixture(autouse=True)
def short_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ratelimit, "WINDOW_S", 2.0)  # the server runs in this process: a 2 s "minute"


def _sdk(server: LiveServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


def test_requests_per_minute(server: LiveServer) -> None:
    sdk = _sdk(server, KEY_RPM)
    time.sleep(2.1)  # a window of its own
    for left in (2, 1, 0):
        raw = sdk.models.with_raw_response.list()
        assert raw.headers["x-ratelimit-limit-requests"] == "3"
        assert raw.headers["x-ratelimit-remaining-requests"] == str(left)
        assert raw.headers["x-ratelimit-reset-requests"].endswith("s")
        assert "x-ratelimit-limit-tokens" not in raw.headers  # no token limit on this key
    with pytest.raises(openai.RateLimitError) as caught:
        sdk.models.list()
    err = caught.value
    assert err.status_code == 429 and err.code == "rate_limit_exceeded"
    assert isinstance(err.body, dict) and str(err.body["message"]).startswith(
        "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in "
    )
    assert 1 <= int(err.response.headers["retry-after"]) <= 2
    assert err.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert [m.id for m in _sdk(server, KEY_FLAG).models.list()] == [MODEL]  # another key: its own count
    time.sleep(2.1)
    assert sdk.models.with_raw_response.list().headers["x-ratelimit-remaining-requests"] == "2"  # recovered


def test_tokens_per_minute(server: LiveServer) -> None:
    sdk = _sdk(server, KEY_TPM)
    time.sleep(2.1)
    raw = sdk.responses.with_raw_response.create(model=MODEL, input="count my tokens, please")
    assert raw.headers["x-ratelimit-limit-tokens"] == "10"
    usage = raw.parse().usage
    assert usage is not None and usage.input_tokens + usage.output_tokens > 10
    # counted when its run's task ends, which is about when a non-streamed answer goes out
    assert raw.headers["x-ratelimit-remaining-tokens"] in ("0", "10")
    time.sleep(0.2)
    with pytest.raises(openai.RateLimitError) as caught:
        sdk.responses.create(model=MODEL, input="more")
    assert caught.value.code == "rate_limit_exceeded"
    body = caught.value.body
    assert isinstance(body, dict) and str(body["message"]).startswith(
        "Rate limit reached for tokens per min (TPM): Limit 10, Used "
    )
    assert caught.value.response.headers["x-ratelimit-remaining-tokens"] == "0"
    assert "retry-after" in caught.value.response.headers
    time.sleep(2.1)
    assert sdk.responses.create(model=MODEL, input="again").status == "completed"  # recovered


def test_flag_limits_apply_to_keys_without_their_own(server: LiveServer) -> None:
    raw = _sdk(server, KEY_FLAG).models.with_raw_response.list()
    assert raw.headers["x-ratelimit-limit-requests"] == "100"


def test_duration_format() -> None:
    assert [ratelimit.duration(s) for s in (0.25, 1, 20.2, 360)] == ["250ms", "1s", "21s", "6m0s"]


def test_websocket_creates_count_as_requests(server: LiveServer) -> None:
    """Each `response.create` on a WebSocket counts as a request of its key, as over HTTP (the upgrade counts
    too): past the limit the create gets the 429 as an error event, and the socket stays open."""
    from websockets.sync.client import connect

    time.sleep(2.1)  # a window of its own
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
        time.sleep(2.1)  # the window passes: the same socket creates again
        ws.send(create)
        assert json.loads(ws.recv(timeout=10))["type"] == "response.created"
