"""`ProjectLimits`: what each project may hold (containers, sandbox memory, stored bytes: responses,
conversation items, files), and the check of its stored bytes made before a write.

A project's bound is the one its API keys give in the keys file (`max_containers`, `max_sandbox_memory_mb`,
`max_stored_bytes`; when several keys of one project give different ones, the largest, 0 being none), else
the server's `--project-max-*`. 0 is no bound. The sandbox's bounds travel with each container the project
creates (`OwnerQuota`: the sandbox holds them, and evicts only the project's own idle containers); the
stored bytes are what the store counts (`ResponseStore.stored_bytes`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from interpreter_service import OwnerQuota
from vllm_responses.config import Config
from vllm_responses.context.turns import input_to_items
from vllm_responses.protocol.errors import Busy, InvalidRequest
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.store.base import ResponseStore, stored_size

__all__ = ["Bounds", "KeyBounds", "ProjectLimits", "input_size"]

# A key's own bounds as the keys file gives them: (project, max_containers, max_sandbox_memory_mb,
# max_stored_bytes), None where it gives none.
KeyBounds = tuple[str, int | None, int | None, int | None]


@dataclass(frozen=True)
class Bounds:
    """One project's bounds (0: none)."""

    containers: int = 0
    sandbox_memory_mb: int = 0
    stored_bytes: int = 0


def input_size(req: CreateResponseRequest) -> int:
    """The bytes a response's input takes as stored items."""
    return stored_size(json.dumps(input_to_items(req.input)))


def _larger(a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return b if a is None else a
    return 0 if 0 in (a, b) else max(a, b)


class ProjectLimits:
    """Each project's `Bounds`: its keys' own, else the server's."""

    def __init__(self, config: Config, keys: Iterable[KeyBounds] = ()) -> None:
        self._default = Bounds(
            config.project_max_containers,
            config.project_max_sandbox_memory_mb,
            config.project_max_stored_bytes,
        )
        self._own: Mapping[str, Bounds] = {}
        # what else a project keeps, in bytes, beside the store's count (its vector stores' chunks)
        self.counters: list[Callable[[str], Awaitable[int]]] = []
        self.update(keys)

    def update(self, keys: Iterable[KeyBounds]) -> None:
        """Take the keys' bounds anew (the keys file read again), replacing those given before."""
        own: dict[str, list[int | None]] = {}
        for project, *given in keys:
            held = own.setdefault(project, [None, None, None])
            own[project] = [_larger(a, b) for a, b in zip(held, given, strict=True)]
        default = (self._default.containers, self._default.sandbox_memory_mb, self._default.stored_bytes)
        self._own = {
            p: Bounds(*(d if v is None else v for v, d in zip(vs, default, strict=True)))
            for p, vs in own.items()
        }

    def of(self, project: str) -> Bounds:
        return self._own.get(project, self._default)

    def sandbox(self, project: str) -> OwnerQuota | None:
        """The project's bounds in the sandbox; None when it has none."""
        b = self.of(project)
        if not (b.containers or b.sandbox_memory_mb):
            return None
        return OwnerQuota(max_containers=b.containers, max_memory_bytes=b.sandbox_memory_mb << 20)

    async def check_store(self, store: ResponseStore, project: str, adding: int, param: str | None) -> None:
        """Before `adding` bytes of `project`'s are kept: a 400 naming `param` when they alone are more than
        its bound, a 429 `storage_quota_exceeded` when with what it keeps already they would be."""
        most = self.of(project).stored_bytes
        if not most:
            return
        if adding > most:
            raise InvalidRequest(
                f"This is {adding} bytes to store, more than the {most} bytes this project may keep.",
                param=param,
                code="storage_quota_exceeded",
            )
        kept = await store.stored_bytes(project) + sum([await count(project) for count in self.counters])
        if kept + adding > most:
            raise Busy(
                f"This project keeps {kept} bytes of stored responses, conversation items and files; with "
                f"{adding} more it would pass the {most} it may keep. Delete stored responses, "
                "conversations or files, or send store: false.",
                code="storage_quota_exceeded",
            )
