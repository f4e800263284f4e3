"""The real engine and the fake engine of the fast tests both implement the `Engine` protocol."""

from __future__ import annotations

import pytest

from tests.support.conformance import assert_implements
from tests.support.fakes import FakeEngine
from vllm_responses.engine.base import Engine


def test_vllm_engine_implements_engine() -> None:
    from vllm_responses.engine.vllm import VLLMEngine

    assert_implements(VLLMEngine, Engine)


def test_fake_engine_implements_engine() -> None:
    """So the fast tests over the fake drive the agent loop through the interface the real engine has."""
    assert_implements(FakeEngine, Engine)


def test_a_mismatch_is_caught() -> None:
    class SyncCount:
        model_name = property(lambda self: "m")

        def generate(self, request):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def count_tokens(self, request):  # type: ignore[no-untyped-def]
            return 0

        async def aclose(self) -> None:
            return None

    with pytest.raises(AssertionError, match="SyncCount.count_tokens: def, expected async def"):
        assert_implements(SyncCount, Engine)
    del SyncCount.aclose
    with pytest.raises(AssertionError, match="SyncCount lacks Engine.aclose"):
        assert_implements(SyncCount, Engine)
