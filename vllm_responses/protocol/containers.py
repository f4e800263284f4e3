"""Pydantic model of the `POST /v1/containers` body, and a 400 naming the `param` for what we cannot honour."""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vllm_responses.errors import InvalidRequest

__all__ = ["CreateContainerRequest", "ExpiresAfter", "parse_create_container"]

logger = logging.getLogger(__name__)


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
    memory_limit: Literal["1g", "4g", "16g", "64g"] | None = None
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
    if req.file_ids:
        raise InvalidRequest(
            "file_ids refer to the Files API, which this server does not have; create the container, then "
            "upload each file with POST /v1/containers/{container_id}/files.",
            param="file_ids",
            code="unsupported_parameter",
        )
    if req.network_policy is not None and req.network_policy.type != "disabled":
        raise InvalidRequest(
            "Per-container network policies are not supported; the sandbox's network access is set when the "
            "server starts (--code-interpreter-allow-net).",
            param="network_policy.type",
            code="unsupported_value",
        )
    if req.skills:
        raise InvalidRequest("Skills are not supported.", param="skills", code="unsupported_parameter")
    extra = sorted(set(body) - set(CreateContainerRequest.model_fields))
    if extra:
        logger.info("ignoring container fields this server does not use: %s", ", ".join(extra))
    return req
