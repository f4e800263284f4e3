"""`ContainerService`: the containers and container files of one interpreter, with per-container expiry.

It owns every lookup of a container by id (the routes of `api/containers.py` and the responses service
both go through it), so that a container's own `expires_after` is enforced in one place. It knows no HTTP:
it raises the interpreter's domain errors (`ContainerNotFound`, `PoolExhausted`, `InterpreterError`), which
`errors.api_error` maps to API errors. A container file's id is the one the interpreter gives it (stable:
a hash of container and path), so a file written by code and cited in a response can be fetched later.

Each container belongs to the project whose API key made it (a response's `auto` container: the response's
project), kept by the interpreter with the container (`ContainerInfo.owner`), so that every gateway of a
shared sandbox service, and this one after a restart, sees it. A container of another project is
`ContainerNotFound` once its (side-effect free) lookup says whose it is, so it is neither run, listed,
touched (its idle clock), expired nor deleted through this project. One made with no owner (through the
sandbox service directly) is `DEFAULT_PROJECT`'s. A project's containers are bounded by its `OwnerQuota`
(`quota_of`), which the sandbox holds: a full pool evicts only the project's own idle containers.

Files of the Files API (`file_ids`) are copied into a container's `DATA_DIR` under their filenames
(`copy_files`): when it is made with them, or later (`POST /v1/containers/{id}/files` with a `file_id`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from interpreter_service import (
    DATA_DIR,
    ContainerInfo,
    ContainerNotFound,
    FileInfo,
    Interpreter,
    MemoryLimitRefused,
    OwnerQuota,
)
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.ids import is_id
from vllm_responses.store.base import DEFAULT_PROJECT, StoredFile
from vllm_responses.tools.files import FileService

__all__ = ["ContainerService"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


def _not_found(container_id: str) -> ContainerNotFound:
    return ContainerNotFound(f"Container {container_id!r} not found or expired.")


class ContainerService:
    """Containers of one interpreter, each expired exactly when it is next looked up past its expiry.

    A container's idle expiry is the pool's (`--code-interpreter-idle-expiry`) or its own shorter
    `expires_after`, kept by the pool with the container (so every gateway on a shared sandbox service sees
    it); the pool's reaper deletes it within a reap interval, and a lookup here past it deletes it at once.

    Every method that reaches the interpreter raises `InvalidRequest` when the server runs without one,
    `ContainerNotFound` for a container that is unknown, deleted or expired, and lets the interpreter's
    `InterpreterError` (`PoolExhausted` included) through.
    """

    def __init__(
        self,
        interpreter: Interpreter | None,
        quota_of: Callable[[str], OwnerQuota | None] | None = None,
        files: FileService | None = None,
    ) -> None:
        self.interpreter = interpreter
        self.quota_of = quota_of  # a project's bounds in the sandbox (None: none)
        self.files_api = files  # the Files API's files, copied in by `copy_files` (None: no Files API)

    @staticmethod
    def owns(info: ContainerInfo, project: str) -> bool:
        """Whether the container belongs to `project` (one made with no owner: `DEFAULT_PROJECT`'s)."""
        return (info.owner or DEFAULT_PROJECT) == project

    def _interp(self) -> Interpreter:
        if self.interpreter is None:
            raise InvalidRequest(
                "The code interpreter is disabled on this server, so there are no containers.",
                param=None,
                code="unsupported_value",
            )
        return self.interpreter

    def expires_after_s(self, info: ContainerInfo) -> float:
        """The container's idle time before it expires: its own `expires_after`, capped at the pool's."""
        return info.expires_after_s

    async def _expire(self, info: ContainerInfo) -> bool:
        if time.time() - info.last_active_at <= self.expires_after_s(info):
            return False
        logger.info("container %s expired (idle past its expires_after)", info.id)
        with contextlib.suppress(ContainerNotFound):
            await self._interp().delete_container(info.id)
        return True

    async def get(self, container_id: str, project: str = DEFAULT_PROJECT) -> ContainerInfo:
        """A live container of `project`; `ContainerNotFound` when it is unknown, another project's,
        deleted or expired (an id not of ours is refused before the interpreter is asked about it: it never
        reaches the interpreter's URLs; another project's is refused before it can be expired)."""
        interp = self._interp()
        if not is_id(container_id, "cntr"):
            raise _not_found(container_id)
        try:
            info = await interp.get_container(container_id)
        except ContainerNotFound:
            info = None
        if info is None or not self.owns(info, project) or await self._expire(info):
            raise _not_found(container_id)
        return info

    def check_memory_limit(self, memory_limit: str | None, *, param: str) -> None:
        """`InvalidRequest` naming `param` when a container with this `memory_limit` could never be granted
        (above what the sandbox can address, or above its whole memory budget): a check before any work."""
        if self.interpreter is None or memory_limit is None:
            return
        try:
            self.interpreter.check_memory_limit(memory_limit)
        except MemoryLimitRefused as exc:
            raise InvalidRequest(f"The memory_limit cannot be granted: {exc}.", param=param) from None

    async def create(
        self,
        *,
        name: str | None = None,
        memory_limit: str | None = None,
        expires_after_s: float | None = None,
        project: str = DEFAULT_PROJECT,
        wait_for_worker: bool = True,
        files: Sequence[StoredFile] = (),
    ) -> ContainerInfo:
        """A new container of `project` (unnamed: a response's `auto` container), holding `files` (copied in;
        if one cannot be, the container is deleted and the error raised). `PoolExhausted` when every sandbox
        is busy running code; `InterpreterError` when none could be started. `wait_for_worker=False`: its
        worker is got in the background, and its first call waits for it (`Interpreter.create_container`)."""
        info = await self._interp().create_container(
            name=name,
            memory_limit=memory_limit,
            expires_after_s=expires_after_s,
            owner=project,
            quota=self.quota_of(project) if self.quota_of else None,
            wait_for_worker=wait_for_worker,
        )
        try:
            await self.copy_files(info.id, files)
        except BaseException:
            with contextlib.suppress(ContainerNotFound):
                await self._interp().delete_container(info.id)
            raise
        return info

    async def list_all(self, project: str = DEFAULT_PROJECT) -> list[ContainerInfo]:
        """The live containers of `project`, oldest first (expired ones are deleted on the way)."""
        mine = [info for info in await self._interp().list_containers() if self.owns(info, project)]
        live = [info for info in mine if not await self._expire(info)]
        return sorted(live, key=lambda i: i.created_at)

    async def delete(self, container_id: str, project: str = DEFAULT_PROJECT) -> None:
        await self.get(container_id, project)
        await self._in(container_id, self._interp().delete_container(container_id))

    # --- files --------------------------------------------------------------------------------------

    async def files(self, container_id: str, project: str = DEFAULT_PROJECT) -> list[FileInfo]:
        """The files under `DATA_DIR` (uploaded, and written by code), oldest first."""
        await self.get(container_id, project)
        infos = await self._in(container_id, self._interp().list_files(container_id))
        return sorted(infos, key=lambda f: (f.created_at, f.path))

    async def file(self, container_id: str, file_id: str, project: str = DEFAULT_PROJECT) -> FileInfo | None:
        """The container's file with that id; None when it has none."""
        return next((info for info in await self.files(container_id, project) if info.id == file_id), None)

    async def upload(
        self, container_id: str, filename: str, data: bytes, project: str = DEFAULT_PROJECT
    ) -> FileInfo:
        """Store `data` as `DATA_DIR/filename`, replacing a file of that name (`filename`: a base name)."""
        await self.get(container_id, project)
        path = f"{DATA_DIR}/{filename}"
        return await self._in(container_id, self._interp().write_file(container_id, path, data))

    async def copy_files(
        self, container_id: str, files: Sequence[StoredFile], *, missing_only: bool = False
    ) -> list[FileInfo]:
        """Copy `files` (already checked to be the container's project's) into `DATA_DIR` under their
        filenames, replacing files of those names (`missing_only`: only those it has no file of that name)."""
        if not files:
            return []
        assert self.files_api is not None
        present: set[str] = set()
        if missing_only:
            present = {f.path for f in await self._in(container_id, self._interp().list_files(container_id))}
        copied = []
        for file in files:
            path = f"{DATA_DIR}/{file.filename}"
            if path not in present:
                data = await self.files_api.read(file)
                copied.append(
                    await self._in(container_id, self._interp().write_file(container_id, path, data))
                )
                present.add(path)
        return copied

    async def content(self, info: FileInfo) -> bytes:
        return await self._in(info.container_id, self._interp().read_file(info.container_id, info.path))

    async def delete_file(self, info: FileInfo) -> None:
        await self._in(info.container_id, self._interp().delete_file(info.container_id, info.path))

    async def _in(self, container_id: str, call: Awaitable[T]) -> T:
        """Await an interpreter call on the container, naming it if it is gone meanwhile."""
        try:
            return await call
        except ContainerNotFound:
            raise _not_found(container_id) from None
