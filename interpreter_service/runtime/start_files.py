"""The start cache's Python-made files: site/ and python_stdlib.zip with bytecode (run by prepare.mjs).

prepare.mjs runs this file in Pyodide, with start/ mounted at /vr-start, once the preloaded packages are
installed in site-packages, and calls `write_start_files`.
"""

import compileall
import importlib.util
import os
import py_compile
import shutil
import zipfile
from importlib import _bootstrap_external

SITE = "/lib/python3.12/site-packages"
STDLIB = "/lib/python312.zip"
OUT = "/vr-start"


def write_start_files(with_mpl: bool) -> str | None:
    """Writes site.part/ (site-packages with unchecked-hash bytecode: the tree is read-only, so sources and
    bytecode never drift apart) and python_stdlib.zip.part (each module's bytecode stored beside it,
    uncompressed) under /vr-start; returns matplotlib's font cache (None without matplotlib)."""
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    fontlist = None
    if with_mpl:
        # Pyodide's matplotlib keeps its font cache beside its code (site-packages/matplotlib/fontlist.json).
        import matplotlib.font_manager as fm

        with open(os.path.join(os.path.dirname(fm.__file__), "fontlist.json")) as f:
            fontlist = f.read()
    compileall.compile_dir(SITE, quiet=1, force=True, invalidation_mode=mode)
    shutil.copytree(SITE, f"{OUT}/site.part")
    with (
        zipfile.ZipFile(STDLIB) as src,
        zipfile.ZipFile(f"{OUT}/python_stdlib.zip.part", "w", zipfile.ZIP_DEFLATED) as out,
    ):
        for info in src.infolist():
            data = src.read(info)
            out.writestr(info, data)
            if not info.filename.endswith(".py"):
                continue
            try:
                code = compile(data, f"{STDLIB}/{info.filename}", "exec", dont_inherit=True)
            except SyntaxError:
                continue  # test data; zipimport compiles (and fails on) it as before
            source_hash = importlib.util.source_hash(data)
            pyc = _bootstrap_external._code_to_hash_pyc(code, source_hash, False)  # type: ignore[attr-defined]
            out.writestr(info.filename + "c", pyc, zipfile.ZIP_STORED)  # read at every start: not inflated
    return fontlist
