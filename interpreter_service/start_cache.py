"""The distribution's start cache (`start/`): what workers restore instead of redoing, made once at setup."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

__all__ = ["PREPARE_SCRIPT", "START_DIR", "prepare_start_cache", "start_cache_key"]

PREPARE_SCRIPT = Path(__file__).resolve().parent / "runtime" / "prepare.mjs"
START_DIR = "start"  # under the distribution: mpl-fontlist.json (see runtime/prepare.mjs)


def start_cache_key(dist: Path) -> str:
    """What the cache was made from: the preparing script, the lock's core build and its matplotlib entry
    (the font cache is matplotlib's)."""
    lock = json.loads((Path(dist) / "pyodide-lock.json").read_text())
    made_from = [PREPARE_SCRIPT.read_text(), lock.get("info"), lock.get("packages", {}).get("matplotlib")]
    return hashlib.sha256(json.dumps(made_from, sort_keys=True).encode()).hexdigest()


def prepare_start_cache(
    dist: Path, deno_bin: str | None = None, *, log: Callable[[str], None] = print, timeout_s: float = 600
) -> Path:
    """(Re)make `dist/start/` by running runtime/prepare.mjs (Deno, no environment, read access to the
    distribution, write access to `start/` only; no user code runs there), unless what it was made from is
    unchanged. Raises `RuntimeError` saying why when it fails; the old cache is removed first, so a failed
    run leaves none (workers then boot without it)."""
    from interpreter_service.launch import find_deno

    out = Path(dist).resolve() / START_DIR
    key = start_cache_key(out.parent)
    stamp = out / "made-from.sha256"
    if stamp.is_file() and stamp.read_text().strip() == key:
        log(f"start cache present in {out}")
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    cmd = [
        deno_bin or find_deno(),
        "run",
        "--no-prompt",
        "--no-config",
        "--no-lock",
        "--no-remote",
        "--no-npm",
        f"--allow-read={out.parent}",
        f"--allow-write={out}",
        str(PREPARE_SCRIPT),
        str(out.parent),
    ]
    log(f"preparing the start cache in {out} (matplotlib's font cache) ...")
    proc = subprocess.run(cmd, env={}, capture_output=True, text=True, timeout=timeout_s, cwd="/")
    if proc.returncode != 0:
        shutil.rmtree(out, ignore_errors=True)
        raise RuntimeError(f"start cache preparation failed: {proc.stderr.strip()[-2000:]}")
    stamp.write_text(key + "\n")
    for f in out.iterdir():
        f.chmod(0o444)
    log(f"start cache: {', '.join(sorted(f.name for f in out.iterdir()))}")
    return out
