"""Behaviour of the worker pool against real Deno + Pyodide workers."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from interpreter_service.api import ContainerNotFound, InterpreterError, PoolExhausted
from interpreter_service.pool import PoolConfig, WorkerPool

from .conftest import png_size

pytestmark = pytest.mark.sandbox


async def test_state_value_stderr_and_traceback(pool: WorkerPool, container: str) -> None:
    async with asyncio.timeout(30):
        r = await pool.execute(
            container, "import sys\n[m in sys.modules for m in ('numpy', 'matplotlib.pyplot')]"
        )
        assert r.ok and r.logs == "[True, True]\n"  # warmed before the container got it
        r = await pool.execute(
            container, "x = 20\nprint('a')\nimport sys; print('b', file=sys.stderr)\nprint('c')"
        )
        assert r.ok and r.logs == "a\nb\nc\n" and r.error_kind is None
        r = await pool.execute(container, "x * 2 + 2")
        assert r.ok and r.logs == "42\n"
        r = await pool.execute(container, "y = None\ny")  # a None value is not shown, like a notebook
        assert r.ok and r.logs == ""
        r = await pool.execute(container, "def f():\n    return 1/0\nprint('before')\nf()")
        assert r.error_kind == "exception" and r.error == "ZeroDivisionError: division by zero"
        assert r.logs.startswith("before\nTraceback (most recent call last):\n")
        assert 'File "<cell>", line 4' in r.logs and "line 2, in f" in r.logs and "_pyodide" not in r.logs
        r = await pool.execute(container, "def g(:\n  pass")
        assert r.error_kind == "exception" and "SyntaxError" in r.error
        r = await pool.execute(container, "import asyncio\nawait asyncio.sleep(0.01)\nx")  # top-level await
        assert r.ok and r.logs == "20\n" and not r.worker_restarted


async def test_matplotlib_figure_is_png_and_closed(pool: WorkerPool, container: str) -> None:
    async with asyncio.timeout(60):
        code = (
            "import matplotlib.pyplot as plt\n"
            "fig, ax = plt.subplots(figsize=(4, 3), dpi=100)\nax.plot([1, 2, 3], [3, 1, 2])\n"
            "plt.figure(figsize=(2, 2), dpi=50)\nprint(plt.get_backend())"
        )
        r = await pool.execute(container, code)
        assert r.ok, r.logs
        assert r.logs.strip().lower() == "agg"
        assert [png_size(img) for img in r.images] == [(400, 300), (100, 100)]
        r = await pool.execute(container, "import matplotlib.pyplot as plt\nlen(plt.get_fignums())")
        assert r.logs == "0\n" and r.images == ()


async def test_scientific_stack_imports_offline(pool: WorkerPool, container: str) -> None:
    code = (
        "import numpy as np, pandas as pd, scipy, sklearn, PIL\n"
        "from sklearn.linear_model import LinearRegression\nfrom scipy import linalg\n"
        "m = LinearRegression().fit(np.arange(10).reshape(-1, 1), 2 * np.arange(10) + 1)\n"
        "df = pd.DataFrame({'a': [1, 2, 3]})\n"
        "(np.__version__, pd.__version__, scipy.__version__, sklearn.__version__, PIL.__version__,"
        " round(float(m.coef_[0]), 6), int(df.a.sum()), float(linalg.det(np.eye(3))))"
    )
    async with asyncio.timeout(90):
        r = await pool.execute(container, code, timeout_s=80)
    assert r.ok, r.logs
    assert r.logs == "('2.0.2', '2.2.3', '1.14.1', '1.6.1', '10.2.0', 2.0, 6, 1.0)\n"


async def test_timeout_interrupts_and_container_survives(pool: WorkerPool, container: str) -> None:
    async with asyncio.timeout(30):
        await pool.execute(container, "kept = 'yes'")
        t0 = time.monotonic()
        r = await pool.execute(container, "while True: pass", timeout_s=1.0)
        assert time.monotonic() - t0 < 4.0
        assert r.error_kind == "timeout" and "timed out after 1 s" in r.error
        r = await pool.execute(container, "kept")
        assert r.ok and r.logs == "'yes'\n" and not r.worker_restarted


@pytest.mark.parametrize(
    "code",
    [
        "import asyncio\nasyncio.get_event_loop().run_until_complete(asyncio.sleep(1000))",
        "import asyncio\nawait asyncio.sleep(1000)",
        "import asyncio\nwhile True:\n    await asyncio.sleep(0)",
        "import asyncio\nasync def spin():\n    while True:\n        sum(range(1000))\n"
        "asyncio.ensure_future(spin())\nawait asyncio.sleep(1000)",
    ],
    ids=["run_until_complete", "await_sleep", "sleep0_loop", "busy_task"],
)
async def test_a_timed_out_asyncio_wait_is_a_timeout_not_a_crash(
    pool: WorkerPool, container: str, code: str
) -> None:
    """Code awaiting never sees the interrupt flag (Python checks it only while it runs): the interrupt
    cancels what the cell awaits instead, so the call ends as a timeout and the container keeps its state."""
    async with asyncio.timeout(60):
        await pool.execute(container, "kept = 'yes'")
        r = await pool.execute(container, code, timeout_s=1.0)
        assert r.error_kind == "timeout" and r.error == "timed out after 1 s (interrupted)", (r.error, r.logs)
        assert not r.worker_restarted
        r = await pool.execute(container, "import asyncio\nawait asyncio.sleep(0.01)\nkept")
        assert r.ok and r.logs == "'yes'\n" and not r.worker_restarted


async def test_interrupt_is_resent_until_the_code_yields(pool: WorkerPool, container: str) -> None:
    # Code that swallows the first KeyboardInterrupt still stops: the interrupt is sent again until the
    # call answers (which also covers one that landed before the code started, where the flag is cleared).
    # (The loop is in a callee: under Pyodide a KeyboardInterrupt skips handlers in the frame it hits.)
    code = (
        "seen = 0\ndef spin():\n    while True: pass\n"
        "while True:\n    try:\n        spin()\n    except KeyboardInterrupt:\n        seen += 1\n"
        "        if seen == 2: raise"
    )
    async with asyncio.timeout(60):
        r = await pool.execute(container, code, timeout_s=0.5)
        assert r.error_kind == "timeout" and not r.worker_restarted, r.error
        r = await pool.execute(container, "seen")
        assert r.ok and r.logs == "2\n"


async def test_code_that_ignores_interrupt_is_killed_and_replaced(pool: WorkerPool, container: str) -> None:
    code = "from pyodide.code import run_js\nrun_js('while (true) {}')"  # JS never checks the interrupt flag
    async with asyncio.timeout(90):
        await pool.execute(container, "gone = 1")
        pid = pool._containers[container].worker.pid
        t0 = time.monotonic()
        r = await pool.execute(container, code, timeout_s=1.0)
        assert r.error_kind == "timeout" and r.worker_restarted and "killed" in r.error
        assert time.monotonic() - t0 < 1.0 + pool.cfg.grace_s + 3
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        r = await pool.execute(container, "'gone' in globals()")
        assert r.ok and r.logs == "False\n" and not r.worker_restarted


async def test_worker_dying_while_idle_is_reported_once(pool: WorkerPool, container: str) -> None:
    async with asyncio.timeout(90):
        await pool.execute(container, "a = 1")
        w = pool._containers[container].worker
        os.kill(w.pid, signal.SIGKILL)
        for _ in range(50):  # wait until the pool's reader noticed the exit
            if not w.alive:
                break
            await asyncio.sleep(0.1)
        r = await pool.execute(container, "'a' in globals()")
        assert r.ok and r.worker_restarted, r
        note, _, logs = r.logs.partition("]\n")
        assert logs == "False\n" and "earlier state was lost" in note and "exit code -9" in note, r.logs
        r = await pool.execute(container, "1")
        assert r.ok and not r.worker_restarted


async def test_memory_bomb_is_contained(pool: WorkerPool, container: str) -> None:
    async with asyncio.timeout(90):
        await pool.execute(container, "marker = 1")
        r = await pool.execute(container, "a = []\nwhile True:\n    a.append(bytearray(10**7))", timeout_s=30)
        assert r.error_kind == "memory" and r.worker_restarted, (r.error, r.logs[-300:])
        r = await pool.execute(container, "print('alive'); 'marker' in globals()")
        assert r.ok and r.logs == "alive\nFalse\n" and not r.worker_restarted  # reported once, above


async def test_js_heap_exhaustion_kills_worker_and_pool_heals(pool: WorkerPool, container: str) -> None:
    code = "from pyodide.code import run_js\nrun_js('const a = []; while (true) a.push(new Array(1e6).fill(1.5));')"
    async with asyncio.timeout(120):
        r = await pool.execute(container, code, timeout_s=60)
        assert r.error_kind == "crashed" and r.worker_restarted, (r.error, r.logs[-300:])
        assert "out of memory" in r.error.lower() or "heap limit" in r.error.lower(), r.error
        r = await pool.execute(container, "print('ok')")
        assert r.ok and r.logs == "ok\n"


async def test_huge_output_is_truncated(pool: WorkerPool, container: str) -> None:
    async with asyncio.timeout(30):
        r = await pool.execute(container, "for i in range(200000):\n    print('line', i)")
    assert r.ok
    assert r.logs.startswith("line 0\nline 1\n")
    assert "[... output truncated:" in r.logs and len(r.logs) < 20_000 + 200
    async with asyncio.timeout(30):
        r = await pool.execute(container, "'y' * 50_000_000")  # a huge final value is clipped in the worker
    assert r.ok and r.logs.startswith("'yyy") and len(r.logs) < 20_000 + 200
    assert r.logs.rstrip().endswith("more bytes not shown ...]")


async def test_killed_worker_gives_error_and_heals(pool: WorkerPool, container: str) -> None:
    async with asyncio.timeout(90):
        await pool.execute(container, "v = 1")
        pid = pool._containers[container].worker.pid  # white-box: the Deno process of this container
        task = asyncio.create_task(pool.execute(container, "while True: pass", timeout_s=20))
        await asyncio.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        r = await task
        assert r.error_kind == "crashed" and r.worker_restarted
        r = await pool.execute(container, "print('back'); 'v' in globals()")
        assert r.ok and r.logs == "back\nFalse\n" and not r.worker_restarted
        assert pool._containers[container].worker.pid != pid


async def test_cancel_interrupts_and_pool_stays_healthy(pool: WorkerPool, container: str) -> None:
    async with asyncio.timeout(30):
        await pool.execute(container, "z = 5")
        task = asyncio.create_task(pool.execute(container, "while True: pass", timeout_s=20))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        t0 = time.monotonic()
        r = await pool.execute(container, "z + 1")
        assert r.ok and r.logs == "6\n" and not r.worker_restarted
        assert time.monotonic() - t0 < 2.0


async def test_calls_to_one_container_queue(pool: WorkerPool, container: str) -> None:
    code = "import time\nt0 = time.time()\nwhile time.time() - t0 < 0.5: pass\nround(time.time(), 3)"
    async with asyncio.timeout(30):
        t0 = time.monotonic()
        a, b = await asyncio.gather(pool.execute(container, code), pool.execute(container, code))
        assert a.ok and b.ok
        assert time.monotonic() - t0 >= 1.0
        assert abs(float(a.logs) - float(b.logs)) >= 0.45


async def test_parallel_containers_faster_than_serial(pool: WorkerPool) -> None:
    """Calls to different containers overlap in time; on an otherwise idle 2-core host also faster than serial
    (the ratio is best-of-3 because other jobs may share the machine)."""
    code = "import time\nt0 = time.time()\ns = 0\nfor i in range(N):\n    s += i * i\n(t0, time.time())"
    async with asyncio.timeout(150):
        await pool.wait_warm()
        t0 = time.monotonic()
        a = (await pool.create_container()).id
        assert time.monotonic() - t0 < 0.5, "a warm pool must hand out a worker without a cold start"
        b = (await pool.create_container()).id
        try:
            r = await pool.execute(a, "N = 200_000\n" + code)
            t_start, t_end = eval(r.logs)
            n = max(200_000, int(200_000 * 0.8 / max(t_end - t_start, 1e-3)))  # ~0.8 s of CPU each
            for c in (a, b):
                assert (await pool.execute(c, f"N = {n}")).ok
            ratios = []
            for _ in range(3):
                t0 = time.monotonic()
                assert (await pool.execute(a, code)).ok and (await pool.execute(b, code)).ok
                serial = time.monotonic() - t0
                t0 = time.monotonic()
                ra, rb = await asyncio.gather(pool.execute(a, code), pool.execute(b, code))
                parallel = time.monotonic() - t0
                (a0, a1), (b0, b1) = eval(ra.logs), eval(rb.logs)
                overlap = min(a1, b1) - max(a0, b0)
                assert overlap > 0.5 * min(a1 - a0, b1 - b0), (
                    "the two calls did not run concurrently",
                    ra,
                    rb,
                )
                ratios.append(parallel / serial)
                if ratios[-1] < 0.8:
                    break
            # Other jobs on a loaded host take CPU from both runs; then only require a clear gain.
            busy = os.getloadavg()[0] > (os.cpu_count() or 1)
            limit = 0.92 if busy else 0.8
            assert min(ratios) < limit, (ratios, "loadavg", os.getloadavg())
        finally:
            await pool.delete_container(a)
            await pool.delete_container(b)


async def test_files_roundtrip(pool: WorkerPool, container: str) -> None:
    # Loading pandas for the first time takes well over the default 20 s on a slow or busy host: this test is
    # about files, so its cell is given the time the package test gives an import.
    async with asyncio.timeout(90):
        info = await pool.write_file(container, "in.csv", b"a,b\n1,2\n3,4\n")
        assert info.path == "/mnt/data/in.csv" and info.bytes == 12 and info.source == "user"
        r = await pool.execute(
            container,
            "import pandas as pd\ndf = pd.read_csv('/mnt/data/in.csv')\n"
            "df.assign(c=df.a + df.b).to_csv('/mnt/data/out.csv', index=False)\nint(df.b.sum())",
            timeout_s=80,
        )
        assert r.ok and r.logs == "6\n", r.logs
        assert r.files_changed == ("/mnt/data/out.csv",)
        assert await pool.read_file(container, "out.csv") == b"a,b,c\n1,2,3\n3,4,7\n"
        files = {f.path: f for f in await pool.list_files(container)}
        assert set(files) == {"/mnt/data/in.csv", "/mnt/data/out.csv"}
        assert files["/mnt/data/in.csv"].source == "user" and files["/mnt/data/out.csv"].source == "assistant"
        await pool.delete_file(container, "in.csv")
        assert [f.path for f in await pool.list_files(container)] == ["/mnt/data/out.csv"]
        r = await pool.execute(container, "import os\nos.path.exists('/mnt/data/in.csv')")
        assert r.logs == "False\n"
        with pytest.raises(InterpreterError, match="cannot delete /mnt/data/in.csv"):
            await pool.delete_file(container, "in.csv")


async def test_unknown_container(pool: WorkerPool) -> None:
    with pytest.raises(ContainerNotFound):
        await pool.execute("cntr_nope", "1")
    with pytest.raises(ContainerNotFound):
        await pool.delete_container("cntr_nope")


async def test_exhaustion_and_expiry(dist_dir) -> None:
    async with asyncio.timeout(120):
        async with WorkerPool(
            PoolConfig(
                workers=1,
                spares=0,
                max_workers=1,
                queue_timeout_s=0.5,
                dist_dir=dist_dir,
                idle_expiry_s=1.5,
                reap_interval_s=0.3,
                preload=(),
                evict_idle=False,
            )
        ) as small:
            c = await small.create_container()
            with pytest.raises(PoolExhausted, match="no code-interpreter container became free within 0.5 s"):
                await small.create_container()
            assert (await small.execute(c.id, "1 + 1")).logs == "2\n"
            await asyncio.sleep(2.5)
            with pytest.raises(ContainerNotFound):
                await small.get_container(c.id)
            assert await small.list_containers() == []
            c2 = await small.create_container()  # the slot is free again (a fresh worker)
            r = await small.execute(c2.id, "'x' in globals()")
            assert r.ok and r.logs == "False\n"


async def test_broken_distribution_fails_loudly(dist_dir, tmp_path) -> None:
    import shutil

    for name in ("pyodide.mjs", "pyodide.asm.js", "python_stdlib.zip", "pyodide-lock.json"):
        shutil.copyfile(dist_dir / name, tmp_path / name)
    (tmp_path / "pyodide.asm.wasm").write_bytes(b"\0asm not really")
    async with asyncio.timeout(60):
        t0 = time.monotonic()
        with pytest.raises(InterpreterError, match="no worker could be started.*failed to load"):
            async with WorkerPool(
                PoolConfig(workers=1, spares=0, dist_dir=tmp_path, preload=(), start_timeout_s=30)
            ):
                pass
        assert time.monotonic() - t0 < 15, "a broken distribution must fail fast, not by start timeout"


async def test_full_pool_evicts_the_least_recently_used_idle_container(dist_dir) -> None:
    async with asyncio.timeout(180):
        async with WorkerPool(
            PoolConfig(workers=2, spares=0, max_workers=2, queue_timeout_s=1.0, dist_dir=dist_dir, preload=())
        ) as small:
            a = await small.create_container()
            b = await small.create_container()
            await small.execute(b.id, "x = 1")
            await small.execute(a.id, "x = 2")  # b is now the least recently used
            c = await small.create_container()
            with pytest.raises(ContainerNotFound):
                await small.get_container(b.id)
            assert (await small.execute(a.id, "x")).logs == "2\n"
            assert {x.id for x in await small.list_containers()} == {a.id, c.id}
            # A container that is running code is never evicted: with both busy, a new one waits, then the
            # pool is exhausted.
            busy = [
                asyncio.create_task(small.execute(cid, "import time; time.sleep(3)")) for cid in (a.id, c.id)
            ]
            await asyncio.sleep(0.5)
            with pytest.raises(PoolExhausted):
                await small.create_container()
            await asyncio.gather(*busy)


async def test_a_containers_own_expiry_is_kept_by_the_pool(pool: WorkerPool, container: str) -> None:
    """`expires_after_s` (shorter than the pool's idle expiry) is the container's, in its info and its reaping."""
    async with asyncio.timeout(60):
        short = await pool.create_container(expires_after_s=60.0)
        assert (
            short.expires_after_s == 60.0 and (await pool.get_container(container)).expires_after_s == 1200.0
        )
        assert (await pool.get_container(short.id)).expires_after_s == 60.0
        for cid in (short.id, container):  # both idle for 61 s: only the short one is past its expiry
            pool._containers[cid].last_active_at -= 61
        assert pool.expire_idle() == [short.id]
        assert container in {c.id for c in await pool.list_containers()}
