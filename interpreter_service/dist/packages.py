"""Add pure-Python wheels (from PyPI or local files) to the sandbox's Pyodide distribution and lock file.

Uses `pyodide-lock` directly (works on Python 3.11). On Python >= 3.12 the optional `pyodide-build` extra's
`pyodide lockfile add-wheels` command does the same job.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from interpreter_service.dist.distribution import SetupError, default_dist_dir, pip_download_pure, sha256_file

if TYPE_CHECKING:
    from pyodide_lock import PyodideLockSpec

__all__ = ["add_packages", "check_pure_wheel"]

Log = Callable[[str], None]

# Pyodide's CPython 3.12 on wasm32, for the markers of a wheel's `Requires-Dist`: `Marker.evaluate` lays these
# over this process's environment (and sets `extra` to "").
_PYODIDE_MARKERS: dict[str, str] = {
    "python_version": "3.12",
    "python_full_version": "3.12.7",
    "implementation_version": "3.12.7",
    "sys_platform": "emscripten",
    "platform_system": "Emscripten",
    "platform_machine": "wasm32",
    "platform_release": "3.1.58",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def check_pure_wheel(path: Path) -> None:
    """Raise `SetupError` unless `path` is a pure-Python (py3-none-any, purelib) wheel."""
    try:
        name, _ver, _build, tags = parse_wheel_filename(path.name)
    except Exception as e:  # packaging raises InvalidWheelFilename
        raise SetupError(f"{path.name} is not a wheel file name: {e}") from e
    if not all(t.abi == "none" and t.platform == "any" and t.interpreter.startswith("py") for t in tags):
        raise SetupError(
            f"{path.name} is not a pure-Python wheel (tags {sorted(map(str, tags))}); only pure wheels can be "
            "added. Compiled packages need a Pyodide (wasm32) build and must be vendored by hand."
        )
    try:
        with zipfile.ZipFile(path) as z:
            wheel_meta = next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))
            text = z.read(wheel_meta).decode()
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            z.read(meta)
    except (zipfile.BadZipFile, StopIteration, KeyError) as e:
        raise SetupError(f"{path.name} is not a valid wheel: {e!r}") from e
    if "root-is-purelib: true" not in text.lower():
        raise SetupError(f"{path.name}: WHEEL says Root-Is-Purelib is not true; refusing it")


def _requires(path: Path) -> list[Requirement]:
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode(errors="replace")
    out = []
    for line in text.splitlines():
        if not line.strip():
            break  # end of headers
        if line.lower().startswith("requires-dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate(_PYODIDE_MARKERS):
                out.append(req)
    return out


def add_packages(
    specs: Iterable[str], *, dist_dir: Path | None = None, resolve_deps: bool = True, log: Log = print
) -> list[str]:
    """Add the packages (PyPI requirement strings or wheel paths) and their missing pure deps.

    Returns the names added. Raises `SetupError` (non-pure wheel, download failure, bad distribution).
    """
    from pyodide_lock import PyodideLockSpec
    from pyodide_lock.utils import add_wheels_to_spec

    dist = (dist_dir or default_dist_dir()).expanduser().resolve()
    lock_path = dist / "pyodide-lock.json"
    if not lock_path.is_file():
        raise SetupError(f"no distribution in {dist}: run `python -m interpreter_service setup` first")
    spec = PyodideLockSpec.from_json(lock_path)
    present = {canonicalize_name(n) for n in spec.packages}
    with tempfile.TemporaryDirectory(prefix="vr-add-") as tmp:
        wheels = _gather_wheels(specs, present, Path(tmp), resolve_deps, log)
        if not wheels:
            log("nothing to add")
            return []
        targets = []
        for f in wheels.values():
            dest = dist / f.name
            shutil.copyfile(f, dest)
            targets.append(dest)
        try:
            new_spec = add_wheels_to_spec(spec, targets, base_path=dist)
        except RuntimeError as e:  # missing dependency
            for t in targets:
                t.unlink(missing_ok=True)
            raise SetupError(f"{e} (add it too, or drop --no-deps)") from e
    _write_lock(new_spec, lock_path, wheels)
    added = sorted(wheels)
    log(f"added {', '.join(added)} to {lock_path}")
    return added


def _gather_wheels(
    specs: Iterable[str], present: Collection[str], tmp: Path, resolve_deps: bool, log: Log
) -> dict[str, Path]:
    """The pure wheels to add, by canonical name, copied or downloaded into `tmp`: those of `specs` and, when
    `resolve_deps`, of their requirements, leaving out the packages `present` in the distribution."""
    wheels: dict[str, Path] = {}
    todo = list(specs)
    while todo:
        item = todo.pop(0)
        if item.endswith(".whl") and Path(item).is_file():
            src = Path(item)
            files = [tmp / src.name]
            shutil.copyfile(src, files[0])
        else:
            name = canonicalize_name(Requirement(item).name)
            if name in present or name in wheels:
                continue
            log(f"downloading {item} (pure-Python wheel for CPython 3.12) ...")
            files = pip_download_pure([item], tmp)
        for f in files:
            check_pure_wheel(f)
            name = canonicalize_name(parse_wheel_filename(f.name)[0])
            if name in present:
                log(f"  {name} is already in the distribution; keeping the existing one")
                continue
            wheels[name] = f
            if resolve_deps:
                todo.extend(str(r) for r in _requires(f) if canonicalize_name(r.name) not in present)
    return wheels


def _write_lock(spec: PyodideLockSpec, lock_path: Path, added: Collection[str]) -> None:
    """Replace the lock file by `spec` once the sha256 of every `added` package's wheel matches its entry."""
    tmp_lock = lock_path.with_name(lock_path.name + ".part")
    spec.to_json(tmp_lock, indent=1)
    data, dist = json.loads(tmp_lock.read_text()), lock_path.parent
    for name, entry in data["packages"].items():  # double-check what the lock now promises
        if canonicalize_name(name) in added and entry["sha256"] != sha256_file(dist / entry["file_name"]):
            raise SetupError(f"sha256 of {entry['file_name']} does not match the new lock entry")
    tmp_lock.replace(lock_path)
