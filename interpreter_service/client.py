"""`HTTPInterpreter`: the `Interpreter` interface over HTTP, so gateway replicas can share one pool."""

from __future__ import annotations

from typing import Any

import httpx

from interpreter_service.api import (
    ContainerInfo,
    ContainerNotFound,
    ExecutionResult,
    FileInfo,
    Interpreter,
    InterpreterError,
    MemoryLimitRefused,
    PoolExhausted,
)
from interpreter_service.wire import container_from_json, file_from_json, result_from_json

__all__ = ["HTTPInterpreter"]


class HTTPInterpreter(Interpreter):
    """Client of `python -m interpreter_service serve`. `start()` opens the connection pool."""

    def __init__(
        self,
        base_url: str,
        *,
        default_timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.default_timeout_s = default_timeout_s
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    async def start(self) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(base_url=self.base_url, transport=self._transport, timeout=60.0)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _call(self, method: str, url: str, *, timeout: float = 60.0, **kw: Any) -> httpx.Response:
        if self._client is None:
            raise InterpreterError("HTTPInterpreter is not started")
        try:
            resp = await self._client.request(method, url, timeout=timeout, **kw)
        except httpx.HTTPError as e:
            raise InterpreterError(f"interpreter service unreachable: {e!r}") from e
        if resp.status_code < 400:
            return resp
        try:
            err = resp.json()["error"]
            kind, msg = err.get("type"), err.get("message", "")
        except (ValueError, KeyError, TypeError):
            kind, msg = None, resp.text[:500]
        if resp.status_code == 404 or kind == "container_not_found":
            raise ContainerNotFound(msg)
        if resp.status_code == 503 or kind == "pool_exhausted":
            raise PoolExhausted(msg)
        if kind == "memory_limit_refused":
            raise MemoryLimitRefused(msg)
        raise InterpreterError(f"HTTP {resp.status_code}: {msg}")

    async def create_container(
        self, *, name: str | None = None, memory_limit: str | None = None
    ) -> ContainerInfo:
        r = await self._call(
            "POST", "/v1/containers", json={"name": name, "memory_limit": memory_limit}, timeout=180.0
        )
        return container_from_json(r.json())

    async def get_container(self, container_id: str) -> ContainerInfo:
        return container_from_json((await self._call("GET", f"/v1/containers/{container_id}")).json())

    async def list_containers(self) -> list[ContainerInfo]:
        return [container_from_json(c) for c in (await self._call("GET", "/v1/containers")).json()["data"]]

    async def delete_container(self, container_id: str) -> None:
        await self._call("DELETE", f"/v1/containers/{container_id}")

    async def execute(
        self, container_id: str, code: str, *, timeout_s: float | None = None
    ) -> ExecutionResult:
        t = timeout_s or self.default_timeout_s
        r = await self._call(
            "POST",
            f"/v1/containers/{container_id}/execute",
            json={"code": code, "timeout_s": timeout_s},
            timeout=t + 120.0,
        )
        return result_from_json(r.json())

    async def write_file(self, container_id: str, path: str, data: bytes) -> FileInfo:
        r = await self._call(
            "PUT", f"/v1/containers/{container_id}/files/content", params={"path": path}, content=data
        )
        return file_from_json(r.json())

    async def read_file(self, container_id: str, path: str) -> bytes:
        r = await self._call("GET", f"/v1/containers/{container_id}/files/content", params={"path": path})
        return r.content

    async def delete_file(self, container_id: str, path: str) -> None:
        await self._call("DELETE", f"/v1/containers/{container_id}/files/content", params={"path": path})

    async def list_files(self, container_id: str) -> list[FileInfo]:
        r = await self._call("GET", f"/v1/containers/{container_id}/files")
        return [file_from_json(f) for f in r.json()["data"]]
