"""Files far larger than one protocol line go in and out of a container in chunks, keeping its state."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest

from interpreter_service.api import InterpreterError
from interpreter_service.pool import WorkerPool

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

BIG = 80 << 20  # more than the 64 MiB line limit of the protocol, base64 or not


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def test_big_file_written_by_the_pool_reads_back(pool: WorkerPool, container: str) -> None:
    data = os.urandom(BIG)
    async with asyncio.timeout(120):
        assert (await pool.execute(container, "x = 42")).ok
        info = await pool.write_file(container, "big.bin", data)
        assert info.bytes == BIG and info.path == "/mnt/data/big.bin"
        r = await pool.execute(
            container, "import hashlib\nhashlib.sha256(open('/mnt/data/big.bin', 'rb').read()).hexdigest()"
        )
        assert r.ok and r.logs == repr(sha(data)) + "\n", r.logs
        assert sha(await pool.read_file(container, "big.bin")) == sha(data)
        r = await pool.execute(container, "x")
        assert r.ok and r.logs == "42\n" and not r.worker_restarted


async def test_big_file_made_by_code_reads_out(pool: WorkerPool, container: str) -> None:
    async with asyncio.timeout(120):
        r = await pool.execute(container, "x = 42\nopen('/mnt/data/big.bin', 'wb').write(b'x' * 80_000_000)")
        assert r.ok and r.logs == "80000000\n", r.logs
        data = await pool.read_file(container, "/mnt/data/big.bin")
        assert len(data) == 80_000_000 and sha(data) == sha(b"x" * 80_000_000)
        r = await pool.execute(container, "x")
        assert r.ok and r.logs == "42\n" and not r.worker_restarted


async def test_write_that_does_not_fit(pool: WorkerPool) -> None:
    """A container's files may take at most its memory_limit: a larger file is refused before it is sent,
    one that runs out of room part way is deleted, and the container keeps its state either way."""
    cid = (await pool.create_container(name="small", memory_limit="256m")).id
    try:
        async with asyncio.timeout(180):
            assert (await pool.execute(cid, "x = 42")).ok
            with pytest.raises(InterpreterError, match=r"cannot write /mnt/data/huge\.bin: .* does not fit"):
                await pool.write_file(cid, "huge.bin", bytes(300 << 20))
            await pool.write_file(cid, "a.bin", bytes(200 << 20))
            with pytest.raises(InterpreterError, match=r"cannot write /mnt/data/b\.bin: .* did not fit"):
                await pool.write_file(cid, "b.bin", bytes(100 << 20))  # fails after ~56 MiB were written
            r = await pool.execute(
                cid, "import os\nx, sorted(os.listdir('/mnt/data')), os.path.getsize('a.bin')"
            )
            assert r.ok and r.logs == f"(42, ['a.bin'], {200 << 20})\n" and not r.worker_restarted, r.logs
            assert [(f.path, f.bytes) for f in await pool.list_files(cid)] == [("/mnt/data/a.bin", 200 << 20)]
    finally:
        await pool.delete_container(cid)
