"""The distribution's start cache (`start/`): what workers mount or restore instead of redoing, made at setup."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from interpreter_service.process.launch import DEFAULT_MEMORY_LIMIT, DEFAULT_PRELOAD, codegen_flags, find_deno

__all__ = [
    "ARTIST_DOCS",
    "PREPARE_SCRIPT",
    "PREPARE_SOURCES",
    "START_DIR",
    "cached_packages",
    "lock_closure",
    "prepare_start_cache",
    "start_cache_key",
]

PREPARE_SCRIPT = Path(__file__).resolve().parents[1] / "runtime" / "prepare.mjs"
# What the preparing script runs: itself and the Python it imports (runtime/mpl_docs.py, start_files.py).
PREPARE_SOURCES = (PREPARE_SCRIPT, *(PREPARE_SCRIPT.with_name(n) for n in ("mpl_docs.py", "start_files.py")))
# Under the distribution: site/, site.json, python_stdlib.zip, pyodide.asm.js (+ .v8cache), asm.json,
# mpl-fontlist.json, mpl-artist-docs.json (what each holds: runtime/prepare.mjs).
START_DIR = "start"
ARTIST_DOCS = "mpl-artist-docs.json"  # matplotlib's Artist docs as its import computes them, recorded


def lock_closure(packages: dict[str, Any], roots: Iterable[str]) -> tuple[list[str], list[str]]:
    """`roots` and every package they depend on among a lock's `packages`, sorted; and the names met that
    the lock does not have, in the order met."""
    seen: set[str] = set()
    missing: list[str] = []
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in seen or name in missing:
            continue
        if name not in packages:
            missing.append(name)
            continue
        seen.add(name)
        stack.extend(packages[name].get("depends", []))
    return sorted(seen), missing


def start_cache_key(dist: Path, packages: Iterable[str] = DEFAULT_PRELOAD, runtime: str = "") -> str:
    """What the cache was made from: the preparing script and its Python, the lock's core build, the lock's
    entries of the packages it holds (those preloaded and their dependencies) and `runtime` (the Deno that
    made it and the V8 flags its code cache was made with, `_runtime`)."""
    lock = json.loads((Path(dist) / "pyodide-lock.json").read_text())
    names, _ = lock_closure(lock.get("packages", {}), packages)
    entries = {name: lock["packages"][name] for name in names}
    script = "".join(path.read_text() for path in PREPARE_SOURCES)
    made_from = [script, lock.get("info"), entries, runtime]
    return hashlib.sha256(json.dumps(made_from, sort_keys=True).encode()).hexdigest()


def _runtime(deno: str) -> str:
    """The Deno version and the V8 flags of a default worker: V8 refuses a code cache made by another
    version or with other flags, so either changing remakes the cache."""
    version = subprocess.run([deno, "--version"], env={}, capture_output=True, text=True, timeout=60).stdout
    return f"{version.strip()} {','.join(codegen_flags(DEFAULT_MEMORY_LIMIT))}"


def cached_packages(dist: Path) -> dict[str, str]:
    """The packages the start cache's `site/` holds (name -> wheel file name); empty without one."""
    try:
        return dict(json.loads((Path(dist) / START_DIR / "site.json").read_text())["packages"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _read_only(root: Path) -> None:
    """Files 0444 and folders 0555 under `root` (and `root` itself)."""
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o444)
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o555)
    root.chmod(0o555)


def _remove(out: Path) -> None:
    for folder, dirs, _ in os.walk(out):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o755)
    if out.exists():
        out.chmod(0o755)
    shutil.rmtree(out, ignore_errors=True)


def prepare_start_cache(
    dist: Path,
    deno_bin: str | None = None,
    *,
    packages: Iterable[str] = DEFAULT_PRELOAD,
    log: Callable[[str], None] = print,
    timeout_s: float = 900,
) -> Path:
    """(Re)make `dist/start/` for workers that preload `packages` by running runtime/prepare.mjs (Deno, no
    environment, read access to the distribution, write access to `start/` only; no user code runs there),
    unless what it was made from is unchanged. Raises `RuntimeError` saying why when it fails; the old cache
    is removed first, so a failed run leaves none (workers then boot without it)."""
    packages = tuple(packages)
    out = Path(dist).resolve() / START_DIR
    deno = deno_bin or find_deno()
    key = start_cache_key(out.parent, packages, _runtime(deno))
    stamp = out / "made-from.sha256"
    if stamp.is_file() and stamp.read_text().strip() == key:
        log(f"start cache present in {out}")
        return out
    _remove(out)
    out.mkdir()
    cmd = [
        deno,
        "run",
        "--no-prompt",
        "--no-config",
        "--no-lock",
        "--no-remote",
        "--no-npm",
        "--v8-flags=" + ",".join(codegen_flags(DEFAULT_MEMORY_LIMIT)),
        f"--allow-read={out.parent}",
        f"--allow-write={out}",
        str(PREPARE_SCRIPT),
        str(out.parent),
        ",".join(packages),
    ]
    log(f"preparing the start cache in {out} (packages installed, bytecode, matplotlib's font cache) ...")
    proc = subprocess.run(cmd, env={}, capture_output=True, text=True, timeout=timeout_s, cwd="/")
    if proc.returncode != 0:
        _remove(out)
        raise RuntimeError(f"start cache preparation failed: {proc.stderr.strip()[-2000:]}")
    stamp.write_text(key + "\n")
    _read_only(out)
    log(
        f"start cache: {', '.join(sorted(f.name for f in out.iterdir()))} ({len(cached_packages(out.parent))} packages)"
    )
    return out
