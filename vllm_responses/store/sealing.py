"""Sealed reasoning: a reasoning item's `encrypted_content`, AES-GCM under the server's key, opened only here."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from vllm_responses.store.files import not_private

__all__ = ["SEAL_VERSION", "ReasoningKeyError", "ReasoningSeal", "key_file", "key_id", "reasoning_seal"]

SEAL_VERSION = b"\x02"  # the first byte of every blob, authenticated with it (a later format gets another)
_AAD = b"vllm-responses reasoning"  # binds a blob to its use: one sealed for something else does not open
_KEY_ID = 8  # bytes of `key_id` after the version byte: a blob names the key that sealed it
_HEADER = 1 + _KEY_ID
_NONCE = 12
KEY_FILE = "reasoning.key"
_DEFAULT_DIR = "~/.cache/vllm-responses"


class ReasoningKeyError(RuntimeError):
    """The reasoning key file is not one the server may trust (another user's, readable by others, a link,
    damaged): the operator's to fix, never a client's error."""


class ReasoningSeal:
    """Seals reasoning text for a client that stores nothing (`include: ["reasoning.encrypted_content"]`)
    and opens what such a client sends back: version byte, key id, random nonce, AES-256-GCM ciphertext and
    tag, in URL-safe base64. The version, the key id and the project the blob was sealed for are its
    associated data: a blob sealed for another project, under another key, altered, or not one of ours does
    not open. `key` is the 32-byte key, or what gives it on first use (a key file is only made once reasoning
    is sealed)."""

    def __init__(self, key: bytes | Callable[[], bytes]) -> None:
        self._key = key
        self._cipher: tuple[AESGCM, bytes] | None = None

    @property
    def _aead(self) -> tuple[AESGCM, bytes]:
        """The cipher and its key id, the key read on first use."""
        if self._cipher is None:
            key = self._key if isinstance(self._key, bytes) else self._key()
            if len(key) != 32:
                raise ValueError("a reasoning key is 32 bytes")
            self._cipher = AESGCM(key), key_id(key)
        return self._cipher

    def seal(self, text: str, project: str) -> str:
        """`text` sealed for `project` (only a request of that project opens it)."""
        aead, kid = self._aead
        header, nonce = SEAL_VERSION + kid, os.urandom(_NONCE)
        sealed = aead.encrypt(nonce, text.encode(), _associated(header, project))
        return base64.urlsafe_b64encode(header + nonce + sealed).decode()

    def open(self, blob: str, project: str) -> str:
        """The reasoning text of `blob`; `ValueError` when it is not a blob this server's key sealed for
        `project`."""
        try:
            raw = base64.urlsafe_b64decode(blob.encode())
        except (ValueError, UnicodeError):
            raise ValueError("not a sealed reasoning blob") from None
        if raw[:1] != SEAL_VERSION or len(raw) < _HEADER + _NONCE + 16:
            raise ValueError("not a sealed reasoning blob of this server")
        aead, kid = self._aead
        if raw[1:_HEADER] != kid:
            raise ValueError(
                f"it was sealed under another key (key id {raw[1:_HEADER].hex()}, not {kid.hex()})"
            )
        nonce, sealed = raw[_HEADER : _HEADER + _NONCE], raw[_HEADER + _NONCE :]
        try:
            plain = aead.decrypt(nonce, sealed, _associated(raw[:_HEADER], project))
        except InvalidTag:
            raise ValueError("the blob was altered, or sealed for another project") from None
        return plain.decode()


def key_id(key: bytes) -> bytes:
    """The id a blob carries of the key that sealed it (a one-way digest: it tells keys apart, reveals none)."""
    return hashlib.sha256(b"vllm-responses reasoning key id\x00" + key).digest()[:_KEY_ID]


def _associated(header: bytes, project: str) -> bytes:
    """A blob's associated data: its use, its header (version and key id), then the project it is for."""
    return _AAD + header + project.encode()


def key_file(db: str) -> Path:
    """Where a generated key is kept: beside a SQLite store's file, else in the default data folder."""
    if db.startswith(("postgres://", "postgresql://")):
        return Path(_DEFAULT_DIR).expanduser() / KEY_FILE
    return Path(db).expanduser().parent / KEY_FILE


def reasoning_seal(key: str | None, db: str) -> ReasoningSeal:
    """The server's seal: from `key` (`--reasoning-key`, any text: replicas that open each other's blobs share
    it), else from a random key generated once and kept in a private file of the data folder (a restart still
    opens older blobs; a file already there is checked now, so a server does not start on one it may not
    trust), else, with an in-memory store (`:memory:`), from a key of this process only."""
    if key:
        return ReasoningSeal(_derived(key))
    if db == ":memory:":
        return ReasoningSeal(secrets.token_bytes(32))
    path = key_file(db)
    if os.path.lexists(path):
        return ReasoningSeal(_kept_key(path))
    return ReasoningSeal(lambda: _kept_key(path))


def _kept_key(path: Path) -> bytes:
    """The key kept in `path` (its folder made 0700 when missing), generated on first use. A new key is
    written to a fresh private file beside it and linked into place, so that servers starting together on
    one folder agree on one; an empty file (an interrupted start) is replaced by a rename."""
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        path.parent.chmod(0o700)
    text = _read_private(path)
    if text is None or not text.strip():
        _write_key(path, replace=text is not None)
        text = _read_private(path) or ""
    try:
        return bytes.fromhex(text.strip())
    except ValueError:
        raise ReasoningKeyError(f"{path} does not hold a reasoning key (64 hex digits)") from None


def _read_private(path: Path) -> str | None:
    """The key file's text (None: there is none), read only when it is a regular file (not a link) of this
    server's user that no other user may read or write (mode & 0o077 == 0): `ReasoningKeyError` otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symbolic link
        raise ReasoningKeyError(
            f"{path} could not be opened as a plain file ({exc.strerror}): refused"
        ) from None
    with os.fdopen(fd) as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ReasoningKeyError(f"{path} is not a regular file: refused")
        problem = not_private(st)
        if problem is not None:
            raise ReasoningKeyError(f"{path}: {problem}; refused")
        return f.read()


def _write_key(path: Path, *, replace: bool) -> None:
    """A new key into `path`: written to a new file of an unguessable name (created exclusively, 0600, never
    through a link), then linked into place (`replace`: renamed over the empty file, atomically)."""
    fresh = _fresh_name(path)
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(fresh, path)
        else:
            os.link(fresh, path)  # fails when another server linked its key first: that one is kept
    except FileExistsError:
        pass
    finally:
        fresh.unlink(missing_ok=True)


def _fresh_name(path: Path) -> Path:
    """The name of a key file being written beside `path`."""
    return path.with_name(f".{path.name}.{secrets.token_hex(8)}")


def _derived(key: str) -> bytes:
    """32 key bytes from an operator's text key (a passphrase or 64 hex digits alike)."""
    return hashlib.sha256(b"vllm-responses reasoning key\x00" + key.encode()).digest()
