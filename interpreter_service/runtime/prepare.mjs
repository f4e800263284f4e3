// Prepares a distribution's start cache (<dist>/start/), run once at setup with write access to that folder only.
//
// Usage: deno run --no-prompt --allow-read=<dist> --allow-write=<dist>/start prepare.mjs <dist_dir> <packages>
// Writes, for the comma-separated <packages> (what workers preload) and their dependencies:
//   site/       their installed files, as loadPackage unpacks them, with bytecode compiled by this Pyodide
//               (unchecked-hash .pyc: the tree is read-only, so sources and bytecode never drift apart) and
//               matplotlib's font cache (which matplotlib otherwise rebuilds on every worker's first import);
//   python_stdlib.zip  the distribution's, with each module's bytecode beside it (x.pyc by x.py, which
//               zipimport uses; without it every process compiles every module it imports, Pyodide's own
//               start included);
//   site.json   {"packages": {name: wheel file name}}: what site/ holds (a worker marks them loaded);
//   mpl-fontlist.json  the font cache alone, for a worker that unpacks matplotlib itself;
//   mpl-artist-docs.json  what importing matplotlib.pyplot computes for its Artist classes' generated `set`
//               signatures and docstrings (`kwdoc`), in call order: about half of that import's time,
//               the same in every process; a worker replays it (worker.mjs, MPL_DOCS_REPLAY).
// Workers boot from this python_stdlib.zip and mount site/ read-only (worker.mjs) instead of unpacking wheels
// and compiling sources in every process. No user code ever runs here.
import { createRequire } from "node:module";

const distDir = Deno.args[0].replace(/\/+$/, "") + "/";
const packages = (Deno.args[1] ?? "").split(",").filter(Boolean);
const outDir = distDir + "start/";
globalThis.require = createRequire(import.meta.url);
globalThis.__dirname = distDir.slice(0, -1);
const BOOT_ENV = { HOME: "/home/pyodide", MPLBACKEND: "Agg" }; // the worker's

function writeAtomic(name, data) {
  const tmp = outDir + name + ".part";
  if (typeof data === "string") Deno.writeTextFileSync(tmp, data);
  else Deno.writeFileSync(tmp, data);
  Deno.renameSync(tmp, outDir + name);
}

const { loadPyodide } = await import(new URL("file://" + distDir + "pyodide.mjs").href);
const pyodide = await loadPyodide({
  indexURL: distDir,
  lockFileURL: distDir + "pyodide-lock.json",
  env: BOOT_ENV,
});
await pyodide.loadPackage(packages, { messageCallback: () => {} });
const lock = JSON.parse(Deno.readTextFileSync(distDir + "pyodide-lock.json"));
const installed = Object.fromEntries(
  Object.keys(pyodide.loadedPackages).sort().map((name) => [name, (lock.packages[name] ?? lock.packages[name.toLowerCase()])?.file_name ?? null]),
);

const FS = pyodide.FS;
FS.mkdirTree("/vr-start");
FS.mount(FS.filesystems.NODEFS, { root: outDir }, "/vr-start");
pyodide.globals.set("_VR_WITH_MPL", "matplotlib" in installed);
// Records, in call order, what matplotlib.artist computes for each Artist class while matplotlib.pyplot is
// imported the way a worker imports it: the generated set()'s keyword names and docstring, and kwdoc(class)
// (outside set()). worker.mjs's MPL_DOCS_REPLAY hands the same values back in the same order.
const MPL_DOCS_RECORD = `
import json
import matplotlib.artist as martist

Artist = martist.Artist
kwdoc0, update0 = martist.kwdoc, Artist.__dict__["_update_set_signature_and_docstring"]
calls, inside = [], []

def key(cls):
    return f"{cls.__module__}.{cls.__qualname__}"

def kwdoc(artist):
    doc = kwdoc0(artist)
    if isinstance(artist, type) and not inside:
        calls.append(["kwdoc", key(artist), doc])
    return doc

def update(cls):
    inside.append(cls)
    try:
        update0.__func__(cls)
    finally:
        inside.pop()
    self, *params = cls.set.__signature__.parameters.values()
    if any(p.kind is not p.KEYWORD_ONLY or p.default is not martist._UNSET for p in params):
        raise ValueError(f"{key(cls)}.set: a signature this cache cannot replay")
    calls.append(["set", key(cls), [p.name for p in params], cls.set.__doc__])

martist.kwdoc = kwdoc
Artist._update_set_signature_and_docstring = classmethod(update)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot
finally:
    martist.kwdoc = kwdoc0
    Artist._update_set_signature_and_docstring = update0
json.dumps({"matplotlib": matplotlib.__version__, "calls": calls})
`;
const mplDocs = "matplotlib" in installed ? pyodide.runPython(MPL_DOCS_RECORD) : null;

const fontlist = pyodide.runPython(`
import compileall, importlib.util, os, py_compile, shutil, zipfile
from importlib import _bootstrap_external

mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
site = "/lib/python3.12/site-packages"
fontlist = None
if _VR_WITH_MPL:
    # Pyodide's matplotlib keeps its font cache beside its code (site-packages/matplotlib/fontlist.json).
    import matplotlib.font_manager as fm
    fontlist = open(os.path.join(os.path.dirname(fm.__file__), "fontlist.json")).read()
compileall.compile_dir(site, quiet=1, force=True, invalidation_mode=mode)
shutil.copytree(site, "/vr-start/site.part")
stdlib = "/lib/python312.zip"
with zipfile.ZipFile(stdlib) as src, zipfile.ZipFile("/vr-start/python_stdlib.zip.part", "w", zipfile.ZIP_DEFLATED) as out:
    for info in src.infolist():
        data = src.read(info)
        out.writestr(info, data)
        if not info.filename.endswith(".py"):
            continue
        try:
            code = compile(data, f"{stdlib}/{info.filename}", "exec", dont_inherit=True)
        except SyntaxError:
            continue  # test data; zipimport compiles (and fails on) it as before
        pyc = _bootstrap_external._code_to_hash_pyc(code, importlib.util.source_hash(data), False)
        out.writestr(info.filename + "c", pyc, zipfile.ZIP_DEFLATED)
fontlist
`);
Deno.renameSync(outDir + "site.part", outDir + "site");
Deno.renameSync(outDir + "python_stdlib.zip.part", outDir + "python_stdlib.zip");
writeAtomic("site.json", JSON.stringify({ packages: installed }, null, 1) + "\n");
if (fontlist) writeAtomic("mpl-fontlist.json", fontlist);
if (mplDocs) writeAtomic("mpl-artist-docs.json", mplDocs);
