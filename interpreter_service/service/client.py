"""`HTTPInterpreter`: the `Interpreter` interface over HTTP, so gateway replicas can share one pool.

Failures of the service become the interpreter's own errors: a 404 `ContainerNotFound`, a 503
`PoolExhausted` (`QuotaExceeded` when the owner's quota is full), a 401 an `InterpreterError` saying the
credentials were refused, and a connection that fails or drops (the service restarted, or is down) an
`InterpreterError` saying so, which the agent loop gives the model as the code call's output. Their texts
never name the service's URL: that, and the error, are logged. Every request is bounded: a code call by its
timeout plus `margin_s`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import quote

import httpx

from interpreter_service.api import (
    ContainerInfo,
    ContainerNotFound,
    ExecutionResult,
    FileInfo,
    Interpreter,
    InterpreterError,
    MemoryLimitRefused,
    OwnerQuota,
    PoolExhausted,
    PoolStats,
    QuotaExceeded,
)
from interpreter_service.service.auth import BOOT_HEADER
from interpreter_service.service.wire import container_from_json, file_from_json, result_from_json
from interpreter_service.sizes import format_size, memory_tier

__all__ = ["HTTPInterpreter"]

logger = logging.getLogger("interpreter_service.client")  # the name it has always logged under


def _seg(container_id: str) -> str:
    """`container_id` as one path segment of the service's URLs, percent-encoded (`/`, `%`, `?` included); an
    empty one, `.` or `..`, which a URL would read as a move up, names no container."""
    if container_id in ("", ".", ".."):
        raise ContainerNotFound(f"Container {container_id!r} not found.")
    return quote(container_id, safe="")


_STATS_KEYS = frozenset(PoolStats.__annotations__)
_REQUIRED_STATS = frozenset(PoolStats.__required_keys__)


class HTTPInterpreter(Interpreter):
    """Client of `python -m interpreter_service serve`. `start()` opens the connection pool.

    Parameters
    ----------
    base_url: the service, e.g. "http://sandbox:8765".
    token: sent as `Authorization: Bearer <token>` on every request (the service's `--token`).
    default_timeout_s: a code call's timeout when `execute` is given none (the service caps it at its own).
    margin_s: added to a code call's timeout for the whole HTTP exchange (queueing behind another call to
        the same container included).
    request_timeout_s: the bound of every other request; a `create_container` gets the service's queue
        timeout on top (it may wait that long for room).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        default_timeout_s: float = 30.0,
        margin_s: float = 30.0,
        request_timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.default_timeout_s = default_timeout_s
        self.margin_s = margin_s
        self.request_timeout_s = request_timeout_s
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._boot: str | None = None  # the service's boot id, as last seen
        self.restarts_seen = 0
        self._health: dict[str, Any] = {}
        self._stats: PoolStats | None = None
        self._pins: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._pinner: asyncio.Task[None] | None = None

    @property
    def closed(self) -> bool:
        return self._client is None

    async def start(self) -> None:
        if self._client is not None:
            return
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            transport=self._transport,
            headers=self._headers,
            timeout=self.request_timeout_s,
        )
        self._pinner = asyncio.create_task(self._pin_loop(), name="sandbox-pins")
        try:
            await self.refresh()
        except InterpreterError as e:  # the service may come up later: calls fail until it does
            logger.warning("the sandbox service at %s does not answer yet: %s", self.base_url, e)

    async def aclose(self) -> None:
        if self._pinner is not None:
            self._pinner.cancel()
            await asyncio.gather(self._pinner, return_exceptions=True)
            self._pinner = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- transport -----------------------------------------------------------------------------------
    def _note_boot(self, resp: httpx.Response) -> None:
        boot = resp.headers.get(BOOT_HEADER)
        if boot and boot != self._boot:
            if self._boot is not None:
                self.restarts_seen += 1
                logger.warning("the sandbox service at %s restarted: its containers are gone", self.base_url)
            self._boot = boot

    async def _call(
        self, method: str, url: str, *, timeout: float | None = None, **kw: Any
    ) -> httpx.Response:
        if self._client is None:
            raise InterpreterError("the sandbox service client is not started")
        try:
            resp = await self._client.request(method, url, timeout=timeout or self.request_timeout_s, **kw)
        except httpx.TimeoutException as e:
            logger.warning(
                "the sandbox service at %s did not answer %s %s in time", self.base_url, method, url
            )
            raise InterpreterError("the sandbox service did not answer in time") from e
        except httpx.HTTPError as e:
            logger.warning(
                "the sandbox service at %s is unreachable: %s: %s", self.base_url, type(e).__name__, e
            )
            raise InterpreterError(
                "the sandbox service is unreachable or restarted; the call's state is lost, retry"
            ) from e
        self._note_boot(resp)
        if resp.status_code < 400:
            return resp
        kind, msg = self._error_of(resp)
        if resp.status_code == 401:
            logger.error(
                "the sandbox service at %s refused this gateway's token (HTTP 401): check "
                "--code-interpreter-token",
                self.base_url,
            )
            raise InterpreterError("the sandbox service refused this server's credentials (HTTP 401)")
        if resp.status_code == 404 or kind == "container_not_found":
            gone = " (the sandbox service restarted since)" if self.restarts_seen else ""
            raise ContainerNotFound(f"{msg}{gone}")
        if kind == "quota_exceeded":
            raise QuotaExceeded(msg)
        if resp.status_code == 503 or kind == "pool_exhausted":
            raise PoolExhausted(msg)
        if kind == "memory_limit_refused":
            raise MemoryLimitRefused(msg)
        raise InterpreterError(f"HTTP {resp.status_code}: {msg}")

    def _error_of(self, resp: httpx.Response) -> tuple[str | None, str]:
        """The `type` and `message` of the service's error body; a body that is not one (from a proxy in
        front, say) is logged and read as just its HTTP status, so no page of it reaches a client."""
        try:
            err = resp.json()["error"]
            return err.get("type"), str(err.get("message", ""))
        except (ValueError, KeyError, TypeError, AttributeError):
            logger.warning(
                "the sandbox service at %s answered HTTP %s: %s",
                self.base_url,
                resp.status_code,
                resp.text[:500],
            )
            return None, f"HTTP {resp.status_code}"

    # -- pool state ------------------------------------------------------------------------------------
    async def refresh(self) -> None:
        try:
            data = (await self._call("GET", "/health", timeout=min(5.0, self.request_timeout_s))).json()
        except InterpreterError:
            self._stats = None  # stale figures of a pool that does not answer are not reported
            raise
        self._health = data
        self._stats = PoolStats(**{k: data[k] for k in _STATS_KEYS if k in data})  # type: ignore[typeddict-item]
        if not _REQUIRED_STATS <= set(self._stats):
            self._stats = None

    def stats(self) -> PoolStats | None:
        return self._stats

    def check_memory_limit(self, memory_limit: str | None) -> None:
        """Checked here against the service's budget as last seen (`refresh`); the service checks again."""
        if memory_limit is None:
            return
        memory_tier(memory_limit)  # above 4 GiB or below 64 MiB: never
        budget = self._stats["memory_budget_bytes"] if self._stats else None
        if budget is not None and memory_tier(memory_limit) > budget:
            raise MemoryLimitRefused(
                f"memory_limit {memory_limit!r} is more than the sandbox's whole memory budget of "
                f"{format_size(budget)}"
            )

    def _queue_timeout_s(self) -> float:
        limits = self._health.get("limits") or {}
        return float(limits.get("queue_timeout_s") or 60.0)

    # -- pins: ordered, sent in the background (`pin` and `unpin` are synchronous) ---------------------
    def pin(self, container_id: str) -> None:
        self._pins.put_nowait(("pin", container_id))

    def unpin(self, container_id: str) -> None:
        self._pins.put_nowait(("unpin", container_id))

    async def _pin_loop(self) -> None:
        while True:
            op, cid = await self._pins.get()
            try:
                await self._call("POST", f"/v1/containers/{_seg(cid)}/{op}")
            except InterpreterError as e:  # a pin is a hint against eviction: losing one is not an error
                logger.info("could not %s container %s: %s", op, cid, e)
            finally:
                self._pins.task_done()

    async def settle_pins(self) -> None:
        """Wait until the pins and unpins asked so far have been sent (tests use it; `aclose` drops the
        rest)."""
        await self._pins.join()

    # -- containers --------------------------------------------------------------------------------------
    async def create_container(
        self,
        *,
        name: str | None = None,
        memory_limit: str | None = None,
        expires_after_s: float | None = None,
        owner: str | None = None,
        quota: OwnerQuota | None = None,
        wait_for_worker: bool = True,
    ) -> ContainerInfo:
        body: dict[str, object] = {
            "name": name,
            "memory_limit": memory_limit,
            "expires_after_s": expires_after_s,
            "owner": owner,
        }
        if quota is not None:  # a service from before quotas is told nothing new
            body["quota"] = {
                "max_containers": quota.max_containers,
                "max_memory_bytes": quota.max_memory_bytes,
            }
        if not wait_for_worker:  # a service from before it is told nothing new (and waits, as it did)
            body["wait_for_worker"] = False
        r = await self._call(
            "POST",
            "/v1/containers",
            json=body,
            timeout=self._queue_timeout_s()
            + self.request_timeout_s
            + 90.0,  # waiting for room, then a worker
        )
        return container_from_json(r.json())

    async def get_container(self, container_id: str) -> ContainerInfo:
        return container_from_json((await self._call("GET", f"/v1/containers/{_seg(container_id)}")).json())

    async def list_containers(self) -> list[ContainerInfo]:
        return [container_from_json(c) for c in (await self._call("GET", "/v1/containers")).json()["data"]]

    async def delete_container(self, container_id: str) -> None:
        await self._call("DELETE", f"/v1/containers/{_seg(container_id)}")

    async def execute(
        self, container_id: str, code: str, *, timeout_s: float | None = None
    ) -> ExecutionResult:
        t = timeout_s or self.default_timeout_s
        r = await self._call(
            "POST",
            f"/v1/containers/{_seg(container_id)}/execute",
            json={"code": code, "timeout_s": t},
            timeout=t + self.margin_s,
        )
        return result_from_json(r.json())

    # -- files -------------------------------------------------------------------------------------------
    async def write_file(self, container_id: str, path: str, data: bytes) -> FileInfo:
        r = await self._call(
            "PUT", f"/v1/containers/{_seg(container_id)}/files/content", params={"path": path}, content=data
        )
        return file_from_json(r.json())

    async def read_file(self, container_id: str, path: str) -> bytes:
        r = await self._call(
            "GET", f"/v1/containers/{_seg(container_id)}/files/content", params={"path": path}
        )
        return r.content

    async def delete_file(self, container_id: str, path: str) -> None:
        await self._call(
            "DELETE", f"/v1/containers/{_seg(container_id)}/files/content", params={"path": path}
        )

    async def list_files(self, container_id: str) -> list[FileInfo]:
        r = await self._call("GET", f"/v1/containers/{_seg(container_id)}/files")
        return [file_from_json(f) for f in r.json()["data"]]
