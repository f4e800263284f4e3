"""Sealed reasoning: a reasoning item's `encrypted_content`, AES-GCM under the server's key, opened only here."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["SEAL_VERSION", "ReasoningSeal", "key_file", "reasoning_seal"]

SEAL_VERSION = b"\x01"  # the first byte of every blob, authenticated with it (a later format gets another)
_AAD = b"vllm-responses reasoning"  # binds a blob to its use: one sealed for something else does not open
_NONCE = 12
KEY_FILE = "reasoning.key"
_DEFAULT_DIR = "~/.cache/vllm-responses"


class ReasoningSeal:
    """Seals reasoning text for a client that stores nothing (`include: ["reasoning.encrypted_content"]`)
    and opens what such a client sends back: version byte, random nonce, AES-256-GCM ciphertext and tag, in
    URL-safe base64. A blob sealed under another key, altered, or not one of ours does not open. `key` is
    the 32-byte key, or what gives it on first use (a key file is only made once reasoning is sealed)."""

    def __init__(self, key: bytes | Callable[[], bytes]) -> None:
        self._key = key
        self._cipher: AESGCM | None = None

    @property
    def _aead(self) -> AESGCM:
        if self._cipher is None:
            key = self._key if isinstance(self._key, bytes) else self._key()
            if len(key) != 32:
                raise ValueError("a reasoning key is 32 bytes")
            self._cipher = AESGCM(key)
        return self._cipher

    def seal(self, text: str) -> str:
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, text.encode(), _AAD + SEAL_VERSION)
        return base64.urlsafe_b64encode(SEAL_VERSION + nonce + sealed).decode()

    def open(self, blob: str) -> str:
        """The reasoning text of `blob`; `ValueError` when it is not a blob this server's key sealed."""
        try:
            raw = base64.urlsafe_b64decode(blob.encode())
        except (ValueError, UnicodeError):
            raise ValueError("not a sealed reasoning blob") from None
        if raw[:1] != SEAL_VERSION or len(raw) < 1 + _NONCE + 16:
            raise ValueError("not a sealed reasoning blob of this server")
        try:
            plain = self._aead.decrypt(raw[1 : 1 + _NONCE], raw[1 + _NONCE :], _AAD + SEAL_VERSION)
        except InvalidTag:
            raise ValueError("the blob was altered, or sealed under another key") from None
        return plain.decode()


def key_file(db: str) -> Path:
    """Where a generated key is kept: beside a SQLite store's file, else in the default data folder."""
    if db.startswith(("postgres://", "postgresql://")):
        return Path(_DEFAULT_DIR).expanduser() / KEY_FILE
    return Path(db).expanduser().parent / KEY_FILE


def reasoning_seal(key: str | None, db: str) -> ReasoningSeal:
    """The server's seal: from `key` (`--reasoning-key`, any text: replicas that open each other's blobs share
    it), else from a random key generated once and kept in a private file of the data folder (a restart still
    opens older blobs), else, with an in-memory store (`:memory:`), from a key of this process only."""
    if key:
        return ReasoningSeal(_derived(key))
    if db == ":memory:":
        return ReasoningSeal(secrets.token_bytes(32))
    return ReasoningSeal(lambda: _kept_key(key_file(db)))


def _kept_key(path: Path) -> bytes:
    """The key kept in `path` (0600; its folder made 0700 when missing), generated on first use. A new key is
    written beside it and linked into place, so that servers starting together on one folder agree on one."""
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        path.parent.chmod(0o700)
    if not path.is_file() or not path.read_text().strip():
        fresh = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        try:
            if path.is_file():  # left empty (by an interrupted start): replaced
                os.replace(fresh, path)
            else:
                os.link(fresh, path)  # fails when another server linked its key first: that one is kept
        except FileExistsError:
            pass
        finally:
            fresh.unlink(missing_ok=True)
    try:
        return bytes.fromhex(path.read_text().strip())
    except ValueError:
        raise ValueError(f"{path} does not hold a reasoning key (64 hex digits)") from None


def _derived(key: str) -> bytes:
    """32 key bytes from an operator's text key (a passphrase or 64 hex digits alike)."""
    return hashlib.sha256(b"vllm-responses reasoning key\x00" + key.encode()).digest()
