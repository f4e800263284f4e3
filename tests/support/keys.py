"""Keys files for tests: written as the server accepts them (owned by this user, mode 0600)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["write_keys_file"]


def write_keys_file(path: Path, entries: list[dict[str, Any]]) -> str:
    """`{"keys": entries}` written to `path`, readable by this user only; the path as a string."""
    path.write_text(json.dumps({"keys": entries}))
    os.chmod(path, 0o600)
    return str(path)
