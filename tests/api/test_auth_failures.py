"""Failed API-key checks throttled per client address (a real server; clients bound to two loopback
addresses): after the burst an address gets 429s with `Retry-After`, whatever key it sends, until its bucket
refills (on the throttle's clock, which the test moves); another address is not affected."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.fakes import FakeEngine
from tests.support.keys import write_keys_file
from tests.support.serving import LiveServer
from vllm_responses.config import Config

KEY = "sk-good-0123456789abcdef0123456789abcdef"
WRONG = "sk-bad-0123456789abcdef0123456789abcdef0"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, clock: Clock) -> Iterator[LiveServer]:
    keys = write_keys_file(tmp_path_factory.mktemp("keys") / "keys.json", [{"key": KEY, "project": "p"}])
    live = LiveServer(Config(api_keys_file=keys, auth_failures_per_minute=3), FakeEngine(), None)
    live.app.state.auth_failures.clock = clock
    yield live.start()
    live.stop()


def _client(server: LiveServer, address: str) -> httpx.Client:
    """A client whose connections come from `address` (a loopback address of this machine)."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=server.base_url, transport=transport, timeout=30)


def _models(client: httpx.Client, key: str) -> httpx.Response:
    return client.get("/v1/models", headers={"Authorization": f"Bearer {key}"})


def test_an_address_that_keeps_failing_is_throttled(server: LiveServer, clock: Clock) -> None:
    with _client(server, "127.0.0.2") as guesser, _client(server, "127.0.0.1") as other:
        for _ in range(3):  # the burst
            assert _models(guesser, WRONG).status_code == 401
        throttled = _models(guesser, WRONG)
        assert throttled.status_code == 429, throttled.text
        error = throttled.json()["error"]
        assert error["type"] == "rate_limit_error" and error["code"] == "rate_limit_exceeded"
        assert "incorrect API key" in error["message"]
        assert throttled.headers["retry-after"] == "20"  # one failure back after 20 s at 3 a minute
        # refused before the key is checked: a valid key from that address tells nothing apart now
        assert _models(guesser, KEY).status_code == 429
        # another address: its keys work, and its own failures are its own
        assert _models(other, KEY).status_code == 200
        assert _models(other, WRONG).status_code == 401
        clock.now += 20
        assert _models(guesser, KEY).status_code == 200  # one try back
        assert _models(guesser, WRONG).status_code == 401
        assert _models(guesser, WRONG).status_code == 429
