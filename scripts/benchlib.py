"""Shared helpers of the `scripts/bench_*.py` benchmarks: machine facts, statistics, JSON, servers, SSE client.

Layout: machine and run facts; statistics; engine flags shared by every target; a child server process
that is started, waited for and stopped; a minimal HTTP/1.1 client that streams SSE with asyncio streams
(lighter than httpx on a 2-core host where the load client competes with the server for the cores).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import platform
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

__all__ = [
    "REPO",
    "BenchError",
    "HTTPStatusError",
    "ServerProcess",
    "engine_flags",
    "exactly",
    "get_text",
    "hermes_call",
    "free_port",
    "machine_info",
    "model_path",
    "percentile",
    "post_sse",
    "ratio",
    "write_json",
]

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


class BenchError(RuntimeError):
    """A benchmark step failed (a server did not start, a request was refused)."""


class HTTPStatusError(BenchError):
    """A request answered with another status than 200: the status, the headers (lower-case names), the body."""

    def __init__(self, path: str, status: int, headers: dict[str, str], body: str) -> None:
        super().__init__(f"HTTP {status} from {path}: {body}")
        self.status, self.headers, self.body = status, headers, body


# -- machine and run facts ------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(module: str) -> str | None:
    from importlib import metadata

    for dist in (module, f"{module}-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def machine_info() -> dict[str, Any]:
    """CPU, its bf16/AVX-512 flags, cores, memory, load, versions, date and git commit of this run."""
    from vllm_responses.engine.args import cpu_flags

    flags = cpu_flags()
    mem_gib = None
    try:
        kb = next(
            int(ln.split()[1])
            for ln in Path("/proc/meminfo").read_text().splitlines()
            if ln.startswith("MemTotal:")
        )
        mem_gib = round(kb / 2**20, 1)
    except (OSError, StopIteration):
        pass
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
    )
    gpu = None
    try:
        import torch

        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001, S110  # torch missing or broken: no GPU facts
        pass
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "cpu": _cpu_model(),
        "cpu_flags": sorted(f for f in flags if f.startswith(("avx512f", "avx512_bf16", "amx", "avx2"))),
        "cores": os.cpu_count(),
        "mem_gib": mem_gib,
        "gpu": gpu,
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "versions": {m: _version(m) for m in ("vllm", "torch", "xgrammar", "uvicorn", "starlette")},
        "git_commit": commit.stdout.strip() or None,
    }


def write_json(out_dir: str | Path, name: str, data: dict[str, Any]) -> Path:
    """Write `data` (plus the end load average) to `out_dir/name.json` and return the path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data.setdefault("machine", {})["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    path = out / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


# -- statistics -----------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile `q` (0-100) of `values`; None when empty."""
    if not values:
        return None
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


# -- models and engine flags ----------------------------------------------------------------------------


def model_path(name: str) -> str:
    """`tiny`, `default` or a model path / Hugging Face name, as a path or name vLLM can load."""
    from vllm_responses.engine.models import default_model_path, tiny_model_path

    if name == "tiny":
        path = tiny_model_path()
        if not (path / "config.json").is_file():
            raise BenchError(f"the tiny model is missing at {path}: run scripts/setup.sh")
        return str(path)
    if name == "default":
        return str(default_model_path())
    return name


def engine_flags(model: str, *, max_model_len: int, extra: str = "") -> tuple[list[str], dict[str, str]]:
    """The vLLM engine flags and environment every target gets, so that all run the same engine.

    On CPU: the dtype our server would pick (`cpu_dtype`), eager mode and the small KV-cache env.
    """
    from vllm_responses.engine.args import CPU_ENV_DEFAULTS, cpu_dtype, is_cpu_platform

    cpu = is_cpu_platform()
    flags = ["--model", model, "--max-model-len", str(max_model_len), "--seed", "0", "--disable-log-stats"]
    flags += ["--dtype", cpu_dtype() if cpu else "auto"]
    if cpu:
        flags.append("--enforce-eager")
    flags += shlex.split(extra)
    env = {k: os.environ.get(k, v) for k, v in CPU_ENV_DEFAULTS.items()} if cpu else {}
    return flags, env


# -- forced outputs and small requests ------------------------------------------------------------------


def exactly(text: str) -> dict[str, str]:
    """A `structured_outputs` constraint that makes the model write exactly `text`."""
    return {"regex": re.escape(text)}


def hermes_call(code: str) -> str:
    """The tiny model's tool-call text (Hermes format) for a code-interpreter call running `code`."""
    return "<tool_call>\n" + json.dumps({"name": "python", "arguments": {"code": code}}) + "\n</tool_call>"


def get_text(port: int, path: str) -> str:
    """GET `path` on a local server, the body as text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()  # type: ignore[no-any-return]


# -- child server processes ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def our_server_argv(
    flags: Sequence[str], port: int, *extra: str, isolated: bool = False, sandbox_workers: int | None = None
) -> list[str]:
    """`vllm-responses serve` as the benchmarks run it: `flags` (the engine's), no sandbox pool (or one of
    `sandbox_workers` warm workers), an in-memory store, quiet logs; `extra` flags of ours; `isolated`
    (`python -P`): a PYTHONPATH tree wins over this one."""
    sandbox = (
        ["--no-code-interpreter"]
        if sandbox_workers is None
        else ["--code-interpreter-workers", str(sandbox_workers)]
    )
    return [
        sys.executable,
        *(["-P"] if isolated else []),
        "-m",
        "vllm_responses",
        "serve",
        *flags,
        *extra,
        "--port",
        str(port),
        *sandbox,
        "--db",
        ":memory:",
        "--log-level",
        "warning",
    ]


@dataclass
class ServerProcess:
    """A server started as a child process (own process group); `with` waits for `ready_path`, then stops it."""

    name: str
    argv: list[str]
    port: int
    env: dict[str, str]
    log_path: Path
    ready_path: str = "/health"
    ready_headers: dict[str, str] | None = None  # e.g. the sandbox service's bearer token
    start_timeout_s: float = 600.0
    proc: subprocess.Popen[bytes] | None = None
    ready_s: float = 0.0

    def __enter__(self) -> Self:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv,
            cwd=REPO,
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{self.port}{self.ready_path}"
        while True:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited with {self.proc.returncode}: {self.log_tail()}")
            if time.monotonic() - t0 > self.start_timeout_s:
                self.stop()
                raise BenchError(f"{self.name} not ready after {self.start_timeout_s} s: {self.log_tail()}")
            try:
                req = urllib.request.Request(url, headers=self.ready_headers or {})
                with urllib.request.urlopen(req, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        self.ready_s = time.monotonic() - t0
        return self

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # the server shuts its engine down; the group is killed if not
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything the server left behind

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- a light SSE client ----------------------------------------------------------------------------------


async def post_sse(
    port: int, path: str, body: dict[str, Any], host: str = "127.0.0.1"
) -> AsyncIterator[bytes]:
    """POST `body` as JSON over HTTP/1.1 and yield each SSE event block (bytes, without the blank line).

    Plain asyncio streams and a hand-parsed chunked body: a few microseconds per event, so the load
    client is not what limits the server on a 2-core host. A non-200 answer raises `HTTPStatusError`.
    """
    payload = json.dumps(body).encode()
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    try:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode() + payload)
        await writer.drain()
        status = int((await reader.readline()).split()[1])
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        if status != 200:
            body_text = (await reader.read(2000)).decode(errors="replace")
            raise HTTPStatusError(path, status, headers, body_text)
        buf = b""
        while True:
            if chunked:
                size = int((await reader.readline()).split(b";")[0], 16)
                if size == 0:
                    break
                data = await reader.readexactly(size + 2)
                buf += data[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    break
                buf += data
            if b"\n\n" in buf:
                *blocks, buf = buf.replace(b"\r\n", b"\n").split(b"\n\n")
                for block in blocks:
                    if block:
                        yield block
        if buf.strip():
            yield buf.strip()
    finally:
        writer.close()
