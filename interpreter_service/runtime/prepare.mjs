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
//               the same in every process; a worker replays it (mpl_docs.py).
// Workers boot from this python_stdlib.zip and mount site/ read-only (start_cache.mjs) instead of unpacking
// wheels and compiling sources in every process. No user code ever runs here. The Python run here is in the
// .py files beside this one (imported as text: Deno reads what a module imports without a read permission).
/** @import { PyodideInterface, PyodideModule, PyProxy } from "./pyodide.d.ts" */
import { createRequire } from "node:module";
import vm from "node:vm";
import mplDocsSource from "./mpl_docs.py" with { type: "text" };
import startFilesSource from "./start_files.py" with { type: "text" };

const distDir = Deno.args[0].replace(/\/+$/, "") + "/";
const packages = (Deno.args[1] ?? "").split(",").filter(Boolean);
const outDir = distDir + "start/";
globalThis.require = createRequire(import.meta.url);
globalThis.__dirname = distDir.slice(0, -1);
const BOOT_ENV = { HOME: "/home/pyodide", MPLBACKEND: "Agg" }; // the worker's

/**
 * @param {string} name
 * @param {string | Uint8Array} data
 */
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
/** @param {string} src */
function patchLinker(src) {
  let out = src;
  for (const [find, replace] of LINKER_PATCHES) {
    if (out.split(find).length !== 2) return { src, patched: false };
    out = out.replace(find, () => replace);
  }
  return { src: out, patched: true };
}

// Workers evaluate start/pyodide.asm.js the same way (boot.mjs, evaluatePyodideAsmJs), with this cache.
const asm = patchLinker(Deno.readTextFileSync(distDir + "pyodide.asm.js"));
const asmScript = new vm.Script(asm.src, {
  filename: new URL("file://" + outDir + "pyodide.asm.js").href,
  importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
asmScript.runInThisContext();

const pyodideMjs = new URL("file://" + distDir + "pyodide.mjs").href;
const { loadPyodide } = /** @type {PyodideModule} */ (await import(pyodideMjs));
/** @type {PyodideInterface} */
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
/**
 * Runs one of the .py files beside this one in a namespace of its own and calls its function `name`.
 * @param {string} source
 * @param {string} filename
 * @param {string} name
 * @param {unknown[]} args
 */
function callPython(source, filename, name, ...args) {
  const ns = pyodide.toPy({});
  /** @type {PyProxy | undefined} */
  let fn;
  try {
    pyodide.runPython(source, { globals: ns, filename });
    fn = ns.get(name);
    return fn(...args);
  } finally {
    fn?.destroy();
    ns.destroy();
  }
}

// What matplotlib.artist computes for each Artist class while matplotlib.pyplot is imported the way a worker
// imports it, in call order (mpl_docs.py, `record`; a worker's `replay` hands the same values back).
const withMpl = "matplotlib" in installed;
const mplDocs = withMpl ? callPython(mplDocsSource, "<vr-mpl-docs>", "record") : null;
// site/ and python_stdlib.zip with bytecode (start_files.py); the font cache.
const fontlist = callPython(startFilesSource, "<vr-start-files>", "write_start_files", withMpl);
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
