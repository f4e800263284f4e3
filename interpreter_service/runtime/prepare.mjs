// Prepares a distribution's start cache (<dist>/start/), run once at setup with write access to that folder only.
//
// Usage: deno run --no-prompt --allow-read=<dist> --allow-write=<dist>/start prepare.mjs <dist_dir> <packages>
// Writes, for the comma-separated <packages> (what workers preload) and their dependencies:
//   site/       their installed files, as loadPackage unpacks them, with bytecode compiled by this Pyodide
//               (unchecked-hash .pyc: the tree is read-only, so sources and bytecode never drift apart) and
//               matplotlib's font cache (which matplotlib otherwise rebuilds on every worker's first import);
//   python_stdlib.zip  the distribution's, with each module's bytecode beside it (x.pyc by x.py, which
//               zipimport uses; without it every process compiles every module it imports, Pyodide's own
//               start included), the bytecode stored uncompressed (inflating it was ~4 % of a start);
//   pyodide.asm.js  Pyodide's JS with Emscripten's dynamic linker made to check only the symbols it has not
//               resolved yet after each library it loads (LINKER_PATCHES), or the file as it is when the
//               patches do not match it;
//   pyodide.asm.js.v8cache  V8's code cache of that file, made after Pyodide booted and imported the
//               packages here, with the V8 flags a default worker runs with (`launch.codegen_flags`; V8
//               refuses a cache made with other flags, and a worker then compiles the file as before);
//   site.json   {"packages": {name: wheel file name}}: what site/ holds (a worker marks them loaded);
//   mpl-fontlist.json  the font cache alone, for a worker that unpacks matplotlib itself;
//   mpl-artist-docs.json  what importing matplotlib.pyplot computes for its Artist classes' generated `set`
//               signatures and docstrings (`kwdoc`), in call order: about half of that import's time,
//               the same in every process; a worker replays it (worker.mjs, MPL_DOCS_REPLAY).
// Workers boot from this python_stdlib.zip and mount site/ read-only (worker.mjs) instead of unpacking wheels
// and compiling sources in every process. No user code ever runs here.
import { createRequire } from "node:module";
import vm from "node:vm";

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

// Emscripten's dynamic linker (Pyodide's build) checks every entry of its global offset table (GOT, ~10 600
// WebAssembly.Global objects once numpy is in, each read through V8's API) after each library it loads, ten
// times by the end of a worker's start: ~80 ms. These patches keep the names of the entries created unset
// and check only those that are still unset: the same entries end up resolved, in the same order. Each
// pattern must occur exactly once, or the file is used as it is.
const LINKER_PATCHES = [
  [
    'var GOTHandler={get(obj,symName){var rtn=GOT[symName];if(!rtn){rtn=GOT[symName]=new WebAssembly.Global({"value":"i32","mutable":true})}',
    'var vrUnset=new Set;var GOTHandler={get(obj,symName){var rtn=GOT[symName];if(!rtn){rtn=GOT[symName]=new WebAssembly.Global({"value":"i32","mutable":true});vrUnset.add(symName)}',
  ],
  [
    'GOT[symName]||=new WebAssembly.Global({"value":"i32","mutable":true});if(replace||GOT[symName].value==0){',
    'var vrNew=!GOT[symName];if(vrNew){GOT[symName]=new WebAssembly.Global({"value":"i32","mutable":true});vrUnset.add(symName)}if(replace||vrNew||GOT[symName].value==0){',
  ],
  [
    "var reportUndefinedSymbols=()=>{for(var[symName,entry]of Object.entries(GOT)){if(entry.value==0){",
    "var reportUndefinedSymbols=()=>{for(var symName of vrUnset){var entry=GOT[symName];if(entry.value!=0){vrUnset.delete(symName);continue}{",
  ],
];
function patchLinker(src) {
  let out = src;
  for (const [find, replace] of LINKER_PATCHES) {
    if (out.split(find).length !== 2) return { src, patched: false };
    out = out.replace(find, () => replace);
  }
  return { src: out, patched: true };
}

// Workers evaluate start/pyodide.asm.js the same way (worker.mjs, evaluatePyodideAsmJs), with this cache.
const asm = patchLinker(Deno.readTextFileSync(distDir + "pyodide.asm.js"));
const asmScript = new vm.Script(asm.src, {
  filename: new URL("file://" + outDir + "pyodide.asm.js").href,
  importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
asmScript.runInThisContext();

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
        out.writestr(info.filename + "c", pyc, zipfile.ZIP_STORED)  # read at every start: not inflated
fontlist
`);
// After the boot and the imports above, the cache holds the functions they compiled (V8 adds every function
// compiled so far); those a worker calls later are compiled as they would have been.
writeAtomic("pyodide.asm.js", asm.src);
writeAtomic("pyodide.asm.js.v8cache", asmScript.createCachedData());
Deno.renameSync(outDir + "site.part", outDir + "site");
Deno.renameSync(outDir + "python_stdlib.zip.part", outDir + "python_stdlib.zip");
writeAtomic("site.json", JSON.stringify({ packages: installed }, null, 1) + "\n");
if (fontlist) writeAtomic("mpl-fontlist.json", fontlist);
if (mplDocs) writeAtomic("mpl-artist-docs.json", mplDocs);
writeAtomic("asm.json", JSON.stringify({ linker_patched: asm.patched }) + "\n");
