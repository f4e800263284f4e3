"""Private files: the SQLite store's file and folder created private (the folder 0700 and the file 0600; SQLite
gives its -wal and -shm files the database file's mode), since stored responses hold whatever clients sent;
and the check that a secret file read (the keys file, the reasoning key) is this server user's alone."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["not_private", "private_file"]


def not_private(info: os.stat_result) -> str | None:
    """What makes a file (its `fstat`) other than this server user's alone, and how to mend it; None when it is
    (owned by the server's user, `mode & 0o077 == 0`)."""
    if info.st_uid != os.geteuid():
        return (
            f"owned by user id {info.st_uid}, not by the user this server runs as ({os.geteuid()}): "
            "give it to that user (chown)"
        )
    if info.st_mode & 0o077:
        return (
            f"mode {stat.S_IMODE(info.st_mode):04o} lets other users read or change it: "
            "make it the owner's alone (chmod 600)"
        )
    return None


def private_file(path: str | Path) -> None:
    """Create the database file `path` (0600) and its folder (0700) when they do not exist; existing ones are
    left as the operator made them."""
    path = Path(path)
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        path.parent.chmod(0o700)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
