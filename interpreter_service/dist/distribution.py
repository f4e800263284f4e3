"""Assembles the offline Pyodide 0.27.7 distribution (npm core + PyPI/vendored wheels), each file sha256-checked."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from interpreter_service.api import InterpreterError
from interpreter_service.dist.start_cache import lock_closure, prepare_start_cache

__all__ = [
    "checked_dist_dir",
    "BASE_PACKAGES",
    "PYODIDE_VERSION",
    "SetupError",
    "default_dist_dir",
    "default_vendor_dir",
    "pip_download_pure",
    "setup_distribution",
    "sha256_file",
]

PYODIDE_VERSION = "0.27.7"
NPM_SPEC = f"pyodide@{PYODIDE_VERSION}"
# dist.integrity of pyodide@0.27.7 as the npm registry publishes it (checked against the packed tarball).
NPM_INTEGRITY = (
    "sha512-RUSVJlhQdfWfgO9hVHCiXoG+nVZQRS5D9FzgpLJ/VcgGBLSAKoPL8kTiOikxbHQm1kRISeWUBdulEgO26qpSRA=="
)
# sha256 of the core files inside that tarball, so a re-run can verify a cache without re-packing.
CORE_FILES = {
    "pyodide.asm.js": "6b4c90de5b7172873f04f21884d0e9d2274e305fe32116558fe3e4fbe3618d51",
    "pyodide.asm.wasm": "a50dd1843f805a0b7c45b61037ee0d7b26dfe85efe0e18ef95a34ad24e401f5f",
    "pyodide.mjs": "04c052c815abb0bf2981fa38c2dfa58e3120ee5288c956df2b2a15e301782c5f",
    "pyodide.js": "b4cb23a53aba19c221659b9fb40a2f18281d685691dc06647fb0afd0681baf98",
    "python_stdlib.zip": "16611534726e5d8ac2bd8f926410b2dcb8d6f49aa24913463533b457a2115c16",
    "package.json": "bf221f60c881626236d3501375a97753672a7fa6fed70e469e083f157c8a30d4",
}
OFFICIAL_LOCK = "pyodide-lock.official.json"
OFFICIAL_LOCK_SHA256 = "9c45b916001a750f4102fc287494f3eab215909c7535c626a20db80fd6333e2c"
LockEntry = dict[str, Any]  # one package of pyodide-lock.json: file_name, sha256, depends, imports, ...
# Packages the sandbox promises (their dependency closure in the official lock is installed too).
BASE_PACKAGES = ("numpy", "pandas", "matplotlib", "pillow", "scipy", "scikit-learn", "micropip")
PIP_TARGET = ["--python-version", "3.12", "--platform", "any", "--implementation", "py", "--abi", "none"]

Log = Callable[[str], None]


class SetupError(RuntimeError):
    """The distribution could not be assembled or a file failed its checksum."""


def default_dist_dir() -> Path:
    env = os.environ.get("VR_PYODIDE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "vllm-responses" / f"pyodide-{PYODIDE_VERSION}"


def checked_dist_dir(dist_dir: Path | str | None) -> Path:
    """The Pyodide distribution folder, resolved (default: the one `setup` assembles); `InterpreterError`
    when it holds no distribution."""
    dist = Path(dist_dir).expanduser() if dist_dir else default_dist_dir()
    if not (dist / "pyodide.mjs").is_file() or not (dist / "pyodide-lock.json").is_file():
        raise InterpreterError(
            f"no Pyodide distribution in {dist}: run `python -m interpreter_service setup` first"
        )
    return dist.resolve()


def default_vendor_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "vendor" / "pyodide"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check(path: Path, expected: str, what: str) -> None:
    got = sha256_file(path)
    if got != expected:
        raise SetupError(f"sha256 mismatch for {what} ({path}): expected {expected}, got {got}")


def _install(src: Path, dest: Path) -> None:
    tmp = dest.with_name(dest.name + ".part")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)


def _fetch_core(dist: Path, log: Log) -> None:
    missing = [n for n in CORE_FILES if not (dist / n).is_file()]
    if not (dist / OFFICIAL_LOCK).is_file():
        missing.append(OFFICIAL_LOCK)
    if not missing:
        for name, digest in CORE_FILES.items():
            _check(dist / name, digest, name)
        _check(dist / OFFICIAL_LOCK, OFFICIAL_LOCK_SHA256, OFFICIAL_LOCK)
        log(f"core files present and verified in {dist}")
        return
    npm = shutil.which("npm")
    if npm is None:
        raise SetupError("npm is needed once to fetch the pyodide npm package (core files + official lock)")
    with tempfile.TemporaryDirectory(prefix="vr-pyodide-npm-") as tmp:
        log(f"npm pack {NPM_SPEC} ...")
        proc = subprocess.run([npm, "pack", NPM_SPEC, "--silent"], cwd=tmp, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SetupError(f"npm pack failed: {proc.stderr.strip()[-2000:]}")
        tgz = Path(tmp) / f"pyodide-{PYODIDE_VERSION}.tgz"
        digest = "sha512-" + base64.b64encode(hashlib.sha512(tgz.read_bytes()).digest()).decode()
        if digest != NPM_INTEGRITY:
            raise SetupError(f"npm tarball integrity mismatch: expected {NPM_INTEGRITY}, got {digest}")
        with tarfile.open(tgz) as tar:
            tar.extractall(tmp, filter="data")
        pkg = Path(tmp) / "package"
        _check(pkg / "pyodide-lock.json", OFFICIAL_LOCK_SHA256, "official pyodide-lock.json")
        _install(pkg / "pyodide-lock.json", dist / OFFICIAL_LOCK)
        for name, expected in CORE_FILES.items():
            _check(pkg / name, expected, name)
            _install(pkg / name, dist / name)
    log(f"core files installed from npm {NPM_SPEC} (integrity verified)")


def _closure(packages: dict[str, LockEntry], roots: Iterable[str]) -> list[str]:
    names, missing = lock_closure(packages, roots)
    if missing:
        raise SetupError(f"package {missing[0]!r} is not in the official Pyodide {PYODIDE_VERSION} lock")
    return names


def pip_download_pure(requirements: list[str], dest: Path, *, no_deps: bool = True) -> list[Path]:
    """`pip download` pure-Python wheels (py3-none-any) for CPython 3.12 into `dest`; returns new files."""
    before = set(dest.iterdir()) if dest.exists() else set()
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--only-binary=:all:"]
    cmd += PIP_TARGET + (["--no-deps"] if no_deps else []) + ["-d", str(dest), *requirements]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SetupError(f"pip download {' '.join(requirements)} failed: {proc.stderr.strip()[-2000:]}")
    return sorted(set(dest.iterdir()) - before)


def _fetch_package(entry: LockEntry, dist: Path, vendor: Path, log: Log) -> None:
    fname, expected = entry["file_name"], entry["sha256"]
    dest = dist / fname
    if dest.is_file() and sha256_file(dest) == expected:
        log(f"  {fname}: present")
        return
    vendored = vendor / fname
    if vendored.is_file():
        _check(vendored, expected, f"vendored {fname}")
        _install(vendored, dest)
        log(f"  {fname}: from vendor/pyodide (verified)")
        return
    if not fname.endswith("-none-any.whl"):
        raise SetupError(f"{fname} is a compiled package and is not vendored in {vendor}")
    with tempfile.TemporaryDirectory(prefix="vr-pip-") as tmp:
        files = pip_download_pure([f"{entry['name']}=={entry['version']}"], Path(tmp))
        match = [f for f in files if f.name == fname]
        if not match:
            raise SetupError(f"pip did not produce {fname} (got {[f.name for f in files]})")
        _check(match[0], expected, f"PyPI {fname} (vendor it if Pyodide rebuilt it)")
        _install(match[0], dest)
    log(f"  {fname}: from PyPI (verified)")


def setup_distribution(
    dist_dir: Path | None = None, vendor_dir: Path | None = None, *, log: Log = print
) -> Path:
    """Idempotently assemble the distribution in `dist_dir`; returns it. Raises `SetupError`."""
    dist = (dist_dir or default_dist_dir()).expanduser().resolve()
    vendor = (vendor_dir or default_vendor_dir()).resolve()
    dist.mkdir(parents=True, exist_ok=True)
    log(f"Pyodide {PYODIDE_VERSION} distribution -> {dist}")
    _fetch_core(dist, log)
    official = json.loads((dist / OFFICIAL_LOCK).read_text())
    packages = official["packages"]
    names = _closure(packages, BASE_PACKAGES)
    log(f"packages ({len(names)}): {', '.join(names)}")
    for name in names:
        _fetch_package(packages[name], dist, vendor, log)
    lock_path = dist / "pyodide-lock.json"
    trimmed = {"info": official["info"], "packages": {n: packages[n] for n in names}}
    if lock_path.is_file():  # keep packages added later with `add-package` whose files still verify
        for name, entry in json.loads(lock_path.read_text()).get("packages", {}).items():
            if name in trimmed["packages"]:
                continue
            f = dist / entry.get("file_name", "")
            if f.is_file() and sha256_file(f) == entry.get("sha256"):
                trimmed["packages"][name] = entry
                log(f"  keeping added package {name} {entry.get('version')}")
    tmp = lock_path.with_name(lock_path.name + ".part")
    tmp.write_text(json.dumps(trimmed, indent=1, sort_keys=True))
    os.replace(tmp, lock_path)
    log(f"wrote {lock_path} ({len(trimmed['packages'])} packages)")
    try:
        prepare_start_cache(dist, log=log)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        raise SetupError(str(e)) from e
    log("done")
    return dist
