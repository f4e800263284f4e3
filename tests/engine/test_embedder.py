"""`LazyEmbedder` (one load for concurrent first callers, a failed load tried again, none after close) and the
embedding model `serve` picks from its settings."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.fake_embedder import FakeEmbedder
from vllm_responses.config import Config
from vllm_responses.engine.base import EngineError, EngineUnavailable
from vllm_responses.engine.embedder import Embedder, LazyEmbedder
from vllm_responses.server import embedder_from_config


def lazy(loads: list[int], fail_first: bool = False) -> LazyEmbedder:
    async def load() -> Embedder:
        loads.append(1)
        await asyncio.sleep(0)
        if fail_first and len(loads) == 1:
            raise RuntimeError("no memory")
        return FakeEmbedder()

    return LazyEmbedder(load, model_name="fake-embedder", dimensions=8, max_input_tokens=64)


async def test_concurrent_first_calls_load_once() -> None:
    loads: list[int] = []
    embedder = lazy(loads)
    assert not embedder.loaded
    done = await asyncio.gather(*(embedder.embed(["abc"]) for _ in range(5)))
    assert loads == [1] and embedder.loaded and all(len(d.vectors[0]) == 8 for d in done)


async def test_a_failed_load_is_tried_again() -> None:
    loads: list[int] = []
    embedder = lazy(loads, fail_first=True)
    with pytest.raises(EngineUnavailable, match="could not be loaded; retry later"):
        await embedder.embed(["abc"])
    assert (await embedder.count_tokens(["abc"])) == [3] and loads == [1, 1]


async def test_a_model_that_died_is_loaded_again() -> None:
    made: list[FakeEmbedder] = []

    async def load() -> Embedder:
        made.append(FakeEmbedder())
        return made[-1]

    embedder = LazyEmbedder(load, model_name="fake-embedder", dimensions=8, max_input_tokens=64)
    await embedder.embed(["abc"])
    made[0].dead = True  # its engine process gone
    await embedder.embed(["abc"])
    assert len(made) == 2 and made[1].calls == [["abc"]]


async def test_closed_it_loads_nothing() -> None:
    loads: list[int] = []
    embedder = lazy(loads)
    await embedder.aclose()
    with pytest.raises(EngineUnavailable):
        await embedder.embed(["abc"])
    assert loads == []


async def test_none_serves_no_embedding_model() -> None:
    assert await embedder_from_config(Config(embedding_model="none")) is None


async def test_the_embedded_model_not_set_up_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VR_MODELS_DIR", str(tmp_path))
    assert await embedder_from_config(Config()) is None


async def test_a_folder_with_no_model_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="no model at"):
        await embedder_from_config(Config(embedding_model=str(tmp_path)))


async def test_a_model_folder_is_loaded_on_first_use(tmp_path: Path) -> None:
    folder = tmp_path / "my-embedder"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 768, "max_position_embeddings": 512}')
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    embedder = await embedder_from_config(Config(embedding_model=str(folder)))
    assert isinstance(embedder, LazyEmbedder) and not embedder.loaded
    assert (embedder.model_name, embedder.dimensions, embedder.max_input_tokens) == ("my-embedder", 768, 128)
