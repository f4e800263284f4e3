"""The SQLite store's file and folder, created private: the folder 0700 and the file 0600 (SQLite gives its
-wal and -shm files the database file's mode), since stored responses hold whatever clients sent."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["private_file"]


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
