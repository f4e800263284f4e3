"""Assemble the offline Pyodide distribution for the code interpreter (same as `python -m interpreter_service setup`)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from interpreter_service.__main__ import main  # noqa: E402

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main(["setup", *sys.argv[1:]]))
