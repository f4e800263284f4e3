"""JSON (de)serialization of the interpreter's dataclasses for the HTTP API."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from interpreter_service.api import ContainerInfo, ExecutionResult, FileInfo

__all__ = ["container_from_json", "file_from_json", "result_from_json", "to_json"]


def to_json(obj: ExecutionResult | ContainerInfo | FileInfo) -> dict[str, Any]:
    data = dataclasses.asdict(obj)
    if isinstance(obj, ExecutionResult):
        data["images"] = [base64.b64encode(i).decode() for i in obj.images]
        data["files_changed"] = list(obj.files_changed)
    return data


def result_from_json(data: dict[str, Any]) -> ExecutionResult:
    return ExecutionResult(
        logs=data["logs"],
        images=tuple(base64.b64decode(i) for i in data.get("images", ())),
        error=data.get("error"),
        error_kind=data.get("error_kind"),
        duration_s=float(data.get("duration_s", 0.0)),
        worker_restarted=bool(data.get("worker_restarted", False)),
        files_changed=tuple(data.get("files_changed", ())),
    )


def container_from_json(data: dict[str, Any]) -> ContainerInfo:
    fields = {f.name for f in dataclasses.fields(ContainerInfo)}
    return ContainerInfo(**{k: v for k, v in data.items() if k in fields})


def file_from_json(data: dict[str, Any]) -> FileInfo:
    fields = {f.name for f in dataclasses.fields(FileInfo)}
    return FileInfo(**{k: v for k, v in data.items() if k in fields})
