"""Wire shapes of `/v1/containers`: the create body we accept, and the container and file objects we send."""

from __future__ import annotations

import logging
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from interpreter_service import ContainerInfo, FileInfo
from vllm_responses.protocol.errors import InvalidRequest

__all__ = [
    "SKILLS_REFUSED",
    "CreateContainerRequest",
    "ExpiresAfter",
    "MemoryLimit",
    "container_json",
    "file_json",
    "parse_create_container",
]

logger = logging.getLogger(__name__)

MemoryLimit = Literal["1g", "4g", "16g", "64g"]  # the values the SDK's `memory_limit` allows
# Why skills (a container's, a code interpreter tool's container's, a shell tool's environment's) are refused.
SKILLS_REFUSED = (
    "Skills are not supported: this server has no skills to mount in a container or offer the model."
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class ExpiresAfter(_Model):
    anchor: Literal["last_active_at"]
    minutes: int = Field(ge=1)


class NetworkPolicy(_Model):
    type: Literal["disabled", "allowlist"]
    allowed_domains: list[str] | None = None


class CreateContainerRequest(_Model):
    name: str = Field(max_length=256)
    expires_after: ExpiresAfter | None = None
    file_ids: list[str] = Field(default_factory=list)
    memory_limit: MemoryLimit | None = None
    network_policy: NetworkPolicy | None = None
    skills: list[Any] = Field(default_factory=list)


def parse_create_container(body: Any) -> CreateContainerRequest:
    """Validate a create-container body, raising `InvalidRequest` with the offending `param`."""
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.", param="body")
    try:
        req = CreateContainerRequest.model_validate(body)
    except ValidationError as exc:
        err = max(exc.errors(), key=lambda e: len(e["loc"]))
        param = ".".join(str(p) for p in err["loc"]) or "body"
        raise InvalidRequest(f"Invalid value for '{param}': {err['msg']}.", param=param) from None
    if req.network_policy is not None and req.network_policy.type != "disabled":
        raise InvalidRequest(
            "Per-container network policies are not supported; the sandbox's network access is set when the "
            "server starts (--code-interpreter-allow-net).",
            param="network_policy.type",
            code="unsupported_value",
        )
    if req.skills:
        raise InvalidRequest(SKILLS_REFUSED, param="skills", code="unsupported_parameter")
    extra = sorted(set(body) - set(CreateContainerRequest.model_fields))
    if extra:
        logger.info("ignoring container fields this server does not use: %s", ", ".join(extra))
    return req


def container_json(info: ContainerInfo, expires_after_s: float) -> dict[str, Any]:
    """A container as `openai.types.ContainerRetrieveResponse` (`expires_after_s`: its idle expiry)."""
    out: dict[str, Any] = {
        "id": info.id,
        "object": "container",
        "created_at": int(info.created_at),
        "status": info.status,
        "expires_after": {"anchor": "last_active_at", "minutes": max(1, round(expires_after_s / 60))},
        "last_active_at": int(info.last_active_at),
        "name": info.name or "",
    }
    if info.memory_limit in get_args(MemoryLimit):
        out["memory_limit"] = info.memory_limit
    return out


def file_json(info: FileInfo) -> dict[str, Any]:
    """A container file as `openai.types.containers.FileRetrieveResponse`."""
    return {
        "id": info.id,
        "object": "container.file",
        "bytes": info.bytes,
        "container_id": info.container_id,
        "created_at": int(info.created_at),
        "path": info.path,
        "source": info.source,
    }
