"""Shared fixtures for the sandbox tests: one distribution and one warm pool for the whole session."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from interpreter_service.dist.distribution import default_dist_dir, setup_distribution
from interpreter_service.pool import PoolConfig, WorkerPool

__all__ = ["png_size"]

os.environ["VR_TEST_SECRET"] = "s3cr3t-" + os.urandom(8).hex()  # set before any worker starts


def png_size(data: bytes) -> tuple[int, int]:
    """Validate a PNG's signature, IHDR chunk and its CRC; return (width, height)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    length, ctype = struct.unpack(">I4s", data[8:16])
    assert ctype == b"IHDR" and length == 13
    body = data[16 : 16 + length]
    (crc,) = struct.unpack(">I", data[16 + length : 20 + length])
    assert zlib.crc32(ctype + body) == crc, "IHDR CRC mismatch"
    width, height = struct.unpack(">II", body[:8])
    assert data.endswith(b"IEND\xaeB`\x82"), "missing IEND"
    return width, height


@pytest.fixture(scope="session")
def dist_dir() -> Path:
    """The real distribution (assembled by setup if missing; setup is idempotent and quick when present)."""
    return setup_distribution(default_dist_dir(), log=lambda _m: None)


@pytest.fixture(scope="session")
def dist_copy(dist_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the distribution that tests may modify (add-package)."""
    dest = tmp_path_factory.mktemp("dist") / "pyodide"
    shutil.copytree(dist_dir, dest)
    return dest


@pytest.fixture(scope="session")
async def pool(dist_dir: Path):
    p = WorkerPool(
        PoolConfig(
            workers=2,
            spares=1,
            max_workers=2,
            queue_timeout_s=1.0,
            timeout_s=20.0,
            max_output=20_000,
            dist_dir=dist_dir,
            memory_limit="512m",
            grace_s=3.0,
            evict_idle=False,
        )
    )
    async with p:
        yield p


@pytest.fixture
async def container(pool: WorkerPool):
    info = await pool.create_container(name="test")
    try:
        yield info.id
    finally:
        if info.id in {c.id for c in await pool.list_containers()}:
            await pool.delete_container(info.id)
