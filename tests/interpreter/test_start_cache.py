"""The distribution's start cache: made at setup, read-only; workers boot from its compiled stdlib and import
the preloaded packages from its read-only tree (which code cannot change), load other packages as before, and
a distribution without one, or with only the font cache, still boots."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest

from interpreter_service.dist.start_cache import ARTIST_DOCS, START_DIR, cached_packages, prepare_start_cache
from interpreter_service.process.launch import WorkerConfig, find_deno
from interpreter_service.process.worker import WorkerProcess

pytestmark = pytest.mark.sandbox

FONTLIST_CELL = "import matplotlib, os\nprint(len(open(os.path.join(os.path.dirname(matplotlib.__file__), 'fontlist.json')).read()))"
START_SITE = "/opt/start/site"


async def started(dist: Path, preload: tuple[str, ...] = ()) -> WorkerProcess:
    w = WorkerProcess(WorkerConfig(dist_dir=dist, preload=preload))
    async with asyncio.timeout(120):
        await w.start()
    return w


def test_setup_made_a_read_only_start_cache(dist_dir: Path) -> None:
    start = dist_dir / START_DIR
    names = {f.name for f in start.iterdir()}
    assert {
        "mpl-fontlist.json",
        ARTIST_DOCS,
        "made-from.sha256",
        "site",
        "site.json",
        "python_stdlib.zip",
        "pyodide.asm.js",
        "pyodide.asm.js.v8cache",
        "asm.json",
    } <= names
    every = [start, *start.rglob("*")]
    assert len(every) > 1000  # the packages' files and their bytecode
    writable = [p for p in every if p.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)]
    assert not writable, writable[:5]
    assert {"numpy", "matplotlib", "pyparsing"} <= {n.lower() for n in cached_packages(dist_dir)}
    assert next((start / "site" / "numpy").rglob("*.pyc"), None) is not None
    with zipfile.ZipFile(start / "python_stdlib.zip") as z:  # bytecode stored as is, sources beside it
        kinds = {(i.filename.rsplit(".", 1)[-1], i.compress_type) for i in z.infolist() if "." in i.filename}
    assert ("pyc", zipfile.ZIP_STORED) in kinds and ("pyc", zipfile.ZIP_DEFLATED) not in kinds, kinds
    assert ("py", zipfile.ZIP_DEFLATED) in kinds, kinds
    assert json.loads((start / "asm.json").read_text()) == {"linker_patched": True}
    messages: list[str] = []
    prepare_start_cache(dist_dir, log=messages.append)  # unchanged inputs: kept, not remade
    assert any("start cache present" in m for m in messages), messages


async def test_a_worker_with_matplotlib_uses_the_font_cache_and_plots(dist_dir: Path) -> None:
    w = await started(dist_dir, ("numpy", "matplotlib"))
    try:
        plot = await w.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2])", timeout_s=60)
        same = await w.execute(FONTLIST_CELL, timeout_s=30)
    finally:
        await w.kill()
    assert plot.ok and len(plot.images) == 1, plot.error
    expected = (dist_dir / START_DIR / "mpl-fontlist.json").read_text()
    assert same.logs == f"{len(expected)}\n", (same.error, same.logs)
    assert {"load_pyodide", "load_packages", "import_matplotlib"} <= set(w.phases)
    assert w.start_notes.get("wasm_compiled_ahead") is True, (
        w.start_notes
    )  # pyodide.asm.wasm, off the main thread
    # Pyodide's JS from the start cache, with V8's code cache of it (made with a default worker's flags)
    assert w.start_notes.get("asm") == "start cache", w.start_notes
    assert w.start_notes.get("asm_code_cache") == "used", w.start_notes


async def test_a_worker_with_other_v8_flags_compiles_pyodides_js_itself(dist_dir: Path) -> None:
    """V8 refuses the code cache of a worker whose WebAssembly heap cap (a V8 flag) is not the default's;
    the worker then compiles the script as without a cache and works the same."""
    w = WorkerProcess(WorkerConfig(dist_dir=dist_dir, preload=("numpy",), memory_limit=512 << 20))
    try:
        async with asyncio.timeout(120):
            await w.start()
        r = await w.execute("import numpy\nprint(int(numpy.arange(5).sum()))", timeout_s=60)
    finally:
        await w.kill()
    assert w.start_notes.get("asm") == "start cache", w.start_notes
    assert w.start_notes.get("asm_code_cache") == "refused", w.start_notes
    assert r.logs == "10\n", (r.error, r.logs)


async def test_the_preloaded_imports_are_frozen_and_the_collector_is_on_for_code(dist_dir: Path) -> None:
    """The preloaded packages are imported with Python's cyclic collector off; what they made is then
    frozen (out of later passes) and the collector is back on: code's cycles are collected."""
    cell = (
        "import gc\nprint(gc.isenabled(), gc.get_freeze_count() > 50000)\n"
        "class C: pass\na = C(); a.me = a; del a\nprint(gc.collect() >= 1)"
    )
    logs = []
    for preload in (("numpy", "matplotlib"), ()):
        w = await started(dist_dir, preload)
        try:
            r = await w.execute(cell, timeout_s=30)
        finally:
            await w.kill()
        logs.append(r.logs)
    assert logs == ["True True\nTrue\n", "True False\nTrue\n"], logs


# Loads Pyodide from the given copy of pyodide.asm.js (the distribution's, or the start cache's, whose dynamic
# linker checks only the symbols still unresolved), loads packages with many shared libraries and writes
# each GOT entry: whether it is resolved and whether a library required it.
GOT_SCRIPT = """
import { createRequire } from "node:module";
const [distDir, asmFile, outFile] = Deno.args;
globalThis.require = createRequire(import.meta.url);
globalThis.__dirname = distDir.replace(/\\/+$/, "");
const src = Deno.readTextFileSync(asmFile).replace("var GOTHandler={", "globalThis.vrGot=()=>GOT;var GOTHandler={");
(0, eval)(src);
const { loadPyodide } = await import(new URL("file://" + distDir + "/pyodide.mjs").href);
const py = await loadPyodide({ indexURL: distDir + "/", lockFileURL: distDir + "/pyodide-lock.json" });
await py.loadPackage(["numpy", "matplotlib", "scipy"], { messageCallback: () => {} });
py.runPython("import numpy, matplotlib.pyplot, scipy.linalg, scipy.optimize, scipy.sparse.linalg");
const got = globalThis.vrGot();
const out = Object.fromEntries(Object.keys(got).map((k) => [k, [got[k].value !== 0, Boolean(got[k].required)]]));
Deno.writeTextFileSync(outFile, JSON.stringify(out));
"""


def test_the_patched_linker_resolves_the_same_symbols(dist_dir: Path, tmp_path: Path) -> None:
    """Pyodide's JS with the start cache's linker patches ends with the same GOT entries, resolved and
    required alike, as the distribution's own, after loading numpy, matplotlib and scipy's libraries."""
    script = tmp_path / "got.mjs"
    script.write_text(GOT_SCRIPT)
    tables = []
    for asm in (dist_dir / "pyodide.asm.js", dist_dir / START_DIR / "pyodide.asm.js"):
        out = tmp_path / f"{asm.parent.name}.json"
        cmd = [find_deno(), "run", f"--allow-read={dist_dir}", f"--allow-write={out}", str(script)]
        proc = subprocess.run(
            [*cmd, str(dist_dir), str(asm), str(out)], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        tables.append(json.loads(out.read_text()))
    original, patched = tables
    assert "vrUnset" in (dist_dir / START_DIR / "pyodide.asm.js").read_text()
    assert len(original) > 10000 and patched == original


async def test_preloaded_packages_come_from_the_read_only_tree_and_code_cannot_change_it(
    dist_dir: Path,
) -> None:
    w = await started(dist_dir, ("numpy", "matplotlib"))
    try:
        where = await w.execute(
            "import numpy, matplotlib\nprint(numpy.__file__)\nprint(matplotlib.__file__)", timeout_s=30
        )
        cells = [
            f"open('{START_SITE}/numpy/__init__.py', 'w')",
            f"open('{START_SITE}/new.py', 'w')",
            f"import os\nos.remove('{START_SITE}/six.py')",
            f"import os\nos.rename('{START_SITE}/six.py', '/tmp/six.py')",
            f"import os\nos.mkdir('{START_SITE}/d')",
            f"import os\nos.chmod('{START_SITE}/six.py', 0o777)",
        ]
        refused = [await w.execute(code, timeout_s=30) for code in cells]
        after = await w.execute("import numpy\nprint(numpy.arange(4).sum())", timeout_s=30)
    finally:
        await w.kill()
    assert where.logs.splitlines() == [
        f"{START_SITE}/numpy/__init__.py",
        f"{START_SITE}/matplotlib/__init__.py",
    ]
    for code, r in zip(cells, refused, strict=True):
        assert r.error_kind == "exception" and r.error.startswith(("PermissionError", "OSError")), (
            code,
            r.error,
        )
    assert after.logs == "6\n", after.error


async def test_other_packages_load_as_before_and_share_the_cached_numpy(dist_dir: Path) -> None:
    w = await started(dist_dir)  # nothing preloaded: the cache's packages are importable all the same
    try:
        r = await w.execute(
            "import pandas, numpy\nprint(pandas.DataFrame({'a': [1, 2]}).a.sum())\nprint(numpy.__file__)",
            timeout_s=120,
        )
        tb = await w.execute("import json\njson.loads('{')", timeout_s=30)
    finally:
        await w.kill()
    assert r.ok and r.logs.splitlines() == ["3", f"{START_SITE}/numpy/__init__.py"], (r.error, r.logs)
    assert "[package loading]" not in r.logs, r.logs
    # the stdlib's bytecode comes with its source: tracebacks through it still show the lines
    assert "json/decoder.py" in tb.logs and "self.raw_decode(s" in tb.logs, tb.logs


async def test_the_standard_library_is_read_in_place_from_the_read_only_start_cache(dist_dir: Path) -> None:
    """A worker holds no copy of the standard library zip: the path Python imports it from links to the start
    cache's file through the read-only mount; imports and their tracebacks work, and code cannot write it."""
    w = await started(dist_dir)
    try:
        r = await w.execute(
            "import os, sys\nzip = next(p for p in sys.path if p.endswith('.zip'))\nprint(zip, os.readlink(zip))\n"
            "import statistics, email.message\nprint(statistics.mean([1, 2, 3]))",
            timeout_s=30,
        )
        write = await w.execute("open('/opt/start/python_stdlib.zip', 'r+b').write(b'x')", timeout_s=30)
        tb = await w.execute("import json\njson.loads('{')", timeout_s=30)
    finally:
        await w.kill()
    assert r.logs.splitlines() == ["/lib/python312.zip /opt/start/python_stdlib.zip", "2"], (r.error, r.logs)
    assert write.error_kind == "exception" and write.error.startswith(("PermissionError", "OSError")), (
        write.error
    )
    assert "json/decoder.py" in tb.logs and "self.raw_decode(s" in tb.logs, tb.logs


async def test_a_distribution_without_a_start_cache_still_boots(dist_dir: Path, tmp_path: Path) -> None:
    dist = tmp_path / "pyodide"
    shutil.copytree(dist_dir, dist, ignore=shutil.ignore_patterns(START_DIR))
    w = await started(dist)
    try:
        r = await w.execute("print(1 + 1)", timeout_s=30)
    finally:
        await w.kill()
    assert r.logs == "2\n", (r.error, r.logs)


async def test_with_only_the_font_cache_a_worker_unpacks_its_wheels_and_uses_it(
    dist_dir: Path, tmp_path: Path
) -> None:
    dist = tmp_path / "pyodide"
    shutil.copytree(dist_dir, dist, ignore=shutil.ignore_patterns(START_DIR))
    (dist / START_DIR).mkdir()
    shutil.copyfile(dist_dir / START_DIR / "mpl-fontlist.json", dist / START_DIR / "mpl-fontlist.json")
    w = await started(dist, ("numpy", "matplotlib"))
    try:
        r = await w.execute("import matplotlib\nprint(matplotlib.__file__)\n" + FONTLIST_CELL, timeout_s=60)
    finally:
        await w.kill()
    expected = (dist_dir / START_DIR / "mpl-fontlist.json").read_text()
    assert r.logs.splitlines() == [
        "/lib/python3.12/site-packages/matplotlib/__init__.py",
        str(len(expected)),
    ], (
        r.error,
        r.logs,
    )


# What matplotlib's import computes for its Artist classes (the generated set()'s docstring and signature,
# kwdoc as substituted into docstrings), and the docstrings of pyplot's and Axes' functions built from it.
MPL_DOCS_CELL = """
import hashlib, inspect, matplotlib.pyplot as plt
from matplotlib import artist, _docstring
from matplotlib.axes import Axes
seen, todo = [], [artist.Artist]
while todo:
    c = todo.pop()
    seen.append(c)
    todo.extend(c.__subclasses__())
parts = sorted(f"{c.__module__}.{c.__qualname__}|{c.set.__doc__}|{inspect.signature(c.set)}" for c in seen)
parts += sorted(f"{k}={v}" for k, v in dict(_docstring.interpd.params).items())
parts += sorted(f"{n}|{getattr(plt, n).__doc__}" for n in dir(plt) if callable(getattr(plt, n, None)))
parts += sorted(f"{n}|{getattr(Axes, n).__doc__}" for n in dir(Axes))
own = [artist.kwdoc, artist.Artist._update_set_signature_and_docstring.__func__]
print(len(seen), all(f.__qualname__ in ("kwdoc", "Artist._update_set_signature_and_docstring") for f in own), hashlib.sha256("\\n".join(parts).encode()).hexdigest())
"""


async def test_matplotlib_artist_docs_are_replayed_exactly_as_computed(
    dist_dir: Path, tmp_path: Path
) -> None:
    """A worker hands back the recorded Artist docstrings and signatures (all of them, in step) and ends
    with exactly what a worker that computes them has; matplotlib's own functions are back in place."""
    computes = tmp_path / "pyodide"  # the same distribution (hard links) without the recorded docs
    shutil.copytree(dist_dir, computes, copy_function=os.link, ignore=shutil.ignore_patterns(ARTIST_DOCS))
    fingerprints, notes = [], []
    for dist in (dist_dir, computes):
        w = await started(dist, ("numpy", "matplotlib"))
        try:
            r = await w.execute(MPL_DOCS_CELL, timeout_s=60)
        finally:
            await w.kill()
        assert r.ok, r.error
        fingerprints.append(r.logs)
        notes.append(w.start_notes)
    replayed, computed = notes
    assert replayed["mpl_docs_replayed"] == replayed["mpl_docs_recorded"] > 100, replayed
    assert computed["mpl_docs_replayed"] == computed["mpl_docs_recorded"] == 0, computed
    assert fingerprints[0] == fingerprints[1], fingerprints
    count, restored, _ = fingerprints[0].split()
    assert int(count) > 100 and restored == "True", fingerprints[0]
