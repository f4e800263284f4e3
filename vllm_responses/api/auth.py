"""API keys and the projects they belong to: the keys file read (`KeyRing.from_config`; again on SIGHUP,
`KeyRing.reload`), a bearer token resolved to its `Principal`, which the key check puts in the ASGI scope for
routes to read (`principal_of`).

The keys file must be owned by the server's user and closed to group and others (mode 0600 or 0400), and each
`key` given in it at least `MIN_KEY_CHARS` long: anything else stops the start (a reload keeps the keys read
before)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import HTTPConnection
from starlette.types import Scope

from vllm_responses.config import Config
from vllm_responses.store.base import DEFAULT_PROJECT
from vllm_responses.store.files import not_private

__all__ = [
    "ANONYMOUS",
    "KeyRing",
    "KeysFileError",
    "MIN_KEY_CHARS",
    "Principal",
    "bearer_token",
    "principal_of",
    "set_principal",
]

logger = logging.getLogger(__name__)

# The shortest `key` a keys file may give: guessing one is hopeless (a `sha256` entry is a digest already).
MIN_KEY_CHARS = 32

# a project's own bounds a key may give (None: the server's `--project-max-*`)
_QUOTA_FIELDS = ("max_containers", "max_sandbox_memory_mb", "max_stored_bytes")
_ENTRY_FIELDS = frozenset({"key", "sha256", "project", "name", "rpm", "tpm", *_QUOTA_FIELDS})


@dataclass(frozen=True)
class Principal:
    """Who a request comes from: the project whose objects it sees, the key's name (for logs), its limits
    per minute (0: unlimited) and `key_id`, what its rate limits are counted under (the key's hash); the
    project's bounds the key gives (None: the server's `--project-max-*`; 0: none)."""

    project: str
    name: str
    rpm: int
    tpm: int
    key_id: str
    max_containers: int | None = None
    max_sandbox_memory_mb: int | None = None
    max_stored_bytes: int | None = None


class KeysFileError(ValueError):
    """The keys file cannot be read or is malformed (the server does not start)."""


ANONYMOUS = "anonymous"  # the `key_id` of every caller when no key is configured


def bearer_token(authorization: str) -> str:
    """The token of an `Authorization: Bearer <token>` header's value ('' for any other value)."""
    return authorization[7:] if authorization.lower().startswith("bearer ") else ""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class KeyRing:
    """The keys a server accepts, by the SHA-256 of each: a token is hashed and looked up, so no comparison
    runs over the key itself (nothing to time). With no key at all, every request is `anonymous`."""

    def __init__(
        self, keys: dict[bytes, Principal], anonymous: Principal | None, config: Config | None = None
    ) -> None:
        self.keys = keys
        self.anonymous = anonymous
        self.config = config  # what `reload` reads again
        self.on_reload: list[Callable[[KeyRing], None]] = []  # told of each reload that replaced the keys

    @classmethod
    def from_config(cls, config: Config) -> KeyRing:
        """The keys of `--api-key` (project `default`) and `--api-keys-file`; `KeysFileError` on a bad file."""
        return cls(*_load(config), config)

    def reload(self) -> bool:
        """Read the keys file again (on SIGHUP): its keys replace the ones in use at once. A file that cannot
        be used keeps the keys in use, and the log says why. Returns whether the keys were replaced."""
        if self.config is None or not self.config.api_keys_file:
            return False
        try:
            self.keys, self.anonymous = _load(self.config)
        except KeysFileError as exc:
            logger.error("keys not reloaded, the keys read before are kept: %s", exc)
            return False
        logger.info("keys reloaded from %s: %d key(s)", self.config.api_keys_file, len(self.keys))
        for listener in self.on_reload:
            listener(self)
        return True

    def resolve(self, authorization: str) -> Principal | None:
        """The principal of an `Authorization` header's value; None when a key is needed and it gives none
        this server knows."""
        if self.anonymous is not None:
            return self.anonymous
        token = bearer_token(authorization)
        return self.keys.get(_digest(token)) if token else None


def _load(config: Config) -> tuple[dict[bytes, Principal], Principal | None]:
    """The keys of a config, by digest, and the principal of every request when there is none."""
    rpm, tpm = config.rate_limit_rpm, config.rate_limit_tpm
    keys: dict[bytes, Principal] = {}
    if config.api_keys_file:
        keys = _read_keys(Path(config.api_keys_file).expanduser(), rpm, tpm)
    if config.api_key:
        digest = _digest(config.api_key)
        if digest in keys:
            raise KeysFileError(f"--api-keys-file {config.api_keys_file}: it holds the --api-key key too")
        keys[digest] = Principal(DEFAULT_PROJECT, "api-key", rpm, tpm, digest.hex())
    if keys:
        return keys, None
    return {}, Principal(DEFAULT_PROJECT, ANONYMOUS, rpm, tpm, ANONYMOUS)


def _read_private(path: Path, where: str) -> str:
    """The text of the keys file, once it is known to be this user's alone (checked on the file opened)."""
    try:
        with path.open("rb") as f:
            problem = not_private(os.fstat(f.fileno()))
            if problem is not None:
                raise KeysFileError(f"{where}: {problem}")
            return f.read().decode()
    except (OSError, UnicodeDecodeError) as exc:
        raise KeysFileError(f"{where}: cannot be read: {exc}") from None


def _read_keys(path: Path, rpm: int, tpm: int) -> dict[bytes, Principal]:
    """The keys file's entries by digest (docs/settings.md, "API keys and projects")."""
    where = f"--api-keys-file {path}"
    text = _read_private(path, where)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KeysFileError(f"{where}: cannot be read as JSON: {exc}") from None
    entries = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise KeysFileError(f'{where}: expected an object {{"keys": [...]}} with at least one key')
    keys: dict[bytes, Principal] = {}
    for i, entry in enumerate(entries):
        digest, principal = _entry(entry, f"{where}: keys[{i}]", rpm, tpm)
        if digest in keys:
            raise KeysFileError(f"{where}: keys[{i}] repeats the key of an earlier entry")
        keys[digest] = principal
    return keys


def _entry(entry: Any, where: str, rpm: int, tpm: int) -> tuple[bytes, Principal]:
    """One entry of the keys file: its key's digest and its principal."""
    if not isinstance(entry, dict):
        raise KeysFileError(f"{where}: expected an object")
    if unknown := set(entry) - _ENTRY_FIELDS:
        raise KeysFileError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: {sorted(_ENTRY_FIELDS)}")
    key, hashed, project = entry.get("key"), entry.get("sha256"), entry.get("project")
    if (key is None) == (hashed is None):
        raise KeysFileError(f"{where}: give exactly one of 'key' and 'sha256'")
    if key is not None and (not isinstance(key, str) or len(key) < MIN_KEY_CHARS):
        raise KeysFileError(
            f"{where}: 'key' must be a string of at least {MIN_KEY_CHARS} characters (a longer random key, "
            "or its 'sha256')"
        )
    if hashed is not None and not _is_sha256(hashed):
        raise KeysFileError(f"{where}: 'sha256' must be 64 hexadecimal digits")
    if not isinstance(project, str) or not project:
        raise KeysFileError(f"{where}: 'project' must be a non-empty string")
    name = entry.get("name", project)
    if not isinstance(name, str):
        raise KeysFileError(f"{where}: 'name' must be a string")
    limits = []
    for field, default in (("rpm", rpm), ("tpm", tpm)):
        value = entry.get(field, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise KeysFileError(f"{where}: '{field}' must be an integer of at least 0")
        limits.append(value)
    for field in _QUOTA_FIELDS:
        value = entry.get(field, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise KeysFileError(f"{where}: '{field}' must be an integer of at least 0")
    quotas = {field: entry[field] for field in _QUOTA_FIELDS if field in entry}
    digest = _digest(key) if key is not None else bytes.fromhex(str(hashed))
    return digest, Principal(project, name, limits[0], limits[1], digest.hex(), **quotas)


def _is_sha256(value: Any) -> bool:
    if not isinstance(value, str) or len(value) != 64:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


def set_principal(scope: Scope, principal: Principal) -> None:
    """Put the request's principal in its scope (`principal_of` reads it)."""
    scope.setdefault("state", {})["principal"] = principal


def principal_of(connection: HTTPConnection) -> Principal:
    """The principal of a request or WebSocket (the key check set it); project `default` outside `/v1`."""
    found = connection.scope.get("state", {}).get("principal")
    if isinstance(found, Principal):
        return found
    return Principal(DEFAULT_PROJECT, ANONYMOUS, 0, 0, ANONYMOUS)
