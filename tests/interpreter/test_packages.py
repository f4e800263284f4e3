"""Distribution setup checks and `add-package` (on a private copy of the distribution)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from interpreter_service.dist.distribution import CORE_FILES, OFFICIAL_LOCK, SetupError, setup_distribution
from interpreter_service.dist.packages import add_packages
from interpreter_service.process.launch import WorkerConfig
from interpreter_service.process.worker import WorkerProcess

pytestmark = pytest.mark.sandbox
ROOT = Path(__file__).resolve().parents[2]


async def test_add_sympy_then_import_it(dist_copy: Path, dist_dir: Path) -> None:
    messages: list[str] = []
    added = await asyncio.to_thread(add_packages, ["sympy"], dist_dir=dist_copy, log=messages.append)
    assert added == ["mpmath", "sympy"], messages
    lock = json.loads((dist_copy / "pyodide-lock.json").read_text())["packages"]
    assert lock["sympy"]["depends"] == ["mpmath"] and len(lock["sympy"]["sha256"]) == 64
    assert "sympy" not in json.loads((dist_dir / "pyodide-lock.json").read_text())["packages"]
    # setup re-run on the copy keeps the added packages
    await asyncio.to_thread(setup_distribution, dist_copy, log=lambda _m: None)
    assert "sympy" in json.loads((dist_copy / "pyodide-lock.json").read_text())["packages"]
    w = WorkerProcess(WorkerConfig(dist_dir=dist_copy, preload=()))
    try:
        async with asyncio.timeout(120):
            await w.start()
            r = await w.execute("import sympy\nx = sympy.Symbol('x')\nsympy.integrate(x**2, x)", timeout_s=60)
        assert r.ok and r.logs == "x**3/3\n", (r.error, r.logs)
    finally:
        await w.kill()


def _fake_wheel(path: Path, tag: str) -> Path:
    whl = path / f"fakepkg-1.0-{tag}.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("fakepkg/__init__.py", "")
        z.writestr("fakepkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n")
        z.writestr(
            "fakepkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: " + tag + "\n"
        )
        z.writestr("fakepkg-1.0.dist-info/RECORD", "")
    return whl


def test_add_package_refuses_compiled_wheel(dist_copy: Path, tmp_path: Path) -> None:
    whl = _fake_wheel(tmp_path, "cp312-cp312-linux_x86_64")
    with pytest.raises(SetupError, match="not a pure-Python wheel"):
        add_packages([str(whl)], dist_dir=dist_copy, log=lambda _m: None)
    proc = subprocess.run(
        [sys.executable, "-m", "interpreter_service", "add-package", str(whl), "--dist-dir", str(dist_copy)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "not a pure-Python wheel" in proc.stderr
    assert "fakepkg" not in (dist_copy / "pyodide-lock.json").read_text()


def test_setup_is_idempotent(dist_dir: Path) -> None:
    messages: list[str] = []
    setup_distribution(dist_dir, log=messages.append)
    assert any("core files present and verified" in m for m in messages)
    assert not any("from vendor" in m or "from PyPI" in m for m in messages), messages


def _seed(dist_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    dist, vendor = tmp_path / "dist", tmp_path / "vendor"
    dist.mkdir()
    for name in [*CORE_FILES, OFFICIAL_LOCK]:
        shutil.copyfile(dist_dir / name, dist / name)
    shutil.copytree(ROOT / "vendor" / "pyodide", vendor)
    return dist, vendor


def test_setup_fails_on_tampered_vendored_file(dist_dir: Path, tmp_path: Path) -> None:
    dist, vendor = _seed(dist_dir, tmp_path)
    six = vendor / "six-1.16.0-py2.py3-none-any.whl"
    six.write_bytes(six.read_bytes() + b"\0")
    with pytest.raises(SetupError, match="sha256 mismatch for vendored six"):
        setup_distribution(dist, vendor, log=lambda _m: None)


def test_setup_fails_on_tampered_core_file(dist_dir: Path, tmp_path: Path) -> None:
    dist, vendor = _seed(dist_dir, tmp_path)
    (dist / "pyodide.mjs").write_text("// tampered\n")
    with pytest.raises(SetupError, match="sha256 mismatch for pyodide.mjs"):
        setup_distribution(dist, vendor, log=lambda _m: None)


def test_setup_from_scratch_with_npm(tmp_path: Path) -> None:
    """A cold setup into an empty cache dir: npm pack + vendored files, everything verified, lock trimmed."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    env = {**os.environ, "VR_PYODIDE_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "setup_pyodide.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "installed from npm pyodide@0.27.7 (integrity verified)" in proc.stdout
    lock = json.loads((tmp_path / "cache" / "pyodide-lock.json").read_text())
    assert len(lock["packages"]) == 20 and {"numpy", "scikit-learn", "micropip"} <= set(lock["packages"])
    assert all((tmp_path / "cache" / e["file_name"]).is_file() for e in lock["packages"].values())
