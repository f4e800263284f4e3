// The worker's start: Pyodide loaded from the distribution (and its start cache), the helpers defined and
// the preloaded packages imported. docs/sandbox.md, "How a worker starts", says why each step is done so.
/** @import { PyodideInterface, PyodideModule } from "./pyodide.d.ts" */
import mplDocsSource from "./mpl_docs.py" with { type: "text" };
import { dataDir, distDir, preload } from "./args.mjs";
import { capture } from "./cells.mjs";
import { errWrite } from "./io.mjs";
import { installHelpers, runSource } from "./python.mjs";
import { interruptBuf } from "./requests.mjs";
import { mountStartDir, mountStartSite, readStartCache, startCacheHas } from "./start_cache.mjs";
import { loadingPyodide } from "./wasm.mjs";

/** When each start phase ended (ms since the process started), sent with the ready event. */
export const phases = /** @type {Record<string, number>} */ ({});
/** @param {string} name */
export const mark = (name) => (phases[name] = Math.round(performance.now()));
/** What the start did, for the ready event (e.g. how much of the start cache was used). */
export const notes = /** @type {Record<string, string | number | boolean>} */ ({});

const MPL_FONTLIST = "/lib/python3.12/site-packages/matplotlib/fontlist.json";

/**
 * Imports matplotlib.pyplot (Agg), replaying the Artist docs the start cache recorded (mpl_docs.py).
 * @param {PyodideInterface} pyodide
 */
function importMatplotlib(pyodide) {
  const bytes = readStartCache("mpl-artist-docs.json");
  const ns = pyodide.toPy({});
  try {
    runSource(pyodide, mplDocsSource, "<vr-mpl-docs>", ns);
    const fn = ns.get("replay");
    const out = fn(bytes ? new TextDecoder().decode(bytes) : "");
    [notes.mpl_docs_replayed, notes.mpl_docs_recorded] = out.toJs();
    out.destroy();
    fn.destroy();
  } finally {
    ns.destroy();
  }
}

/**
 * Evaluates pyodide.asm.js (1.2 MB, which defines globalThis._createPyodideModule) as a plain script, so
 * that loadPyodide finds the function and does not import the file: Deno's module loader parses what it
 * imports with its own parser to list its imports (and to find CommonJS exports) unless its cache
 * (DENO_DIR) already holds the answer, which a worker, writing nowhere, never does. That parse took ~0.1 s
 * of each start and left 20-30 MiB of the worker's malloc arenas behind. The start cache's copy
 * (prepare.mjs: its dynamic linker checks only the symbols still unresolved) comes with V8's code cache of
 * it: V8 then takes the bytecode of the functions Pyodide's start runs from the cache instead of compiling
 * them (refused, e.g. made with other V8 flags, it compiles the file as without one). A node:vm script,
 * which takes the cache, imports the node: modules the file needs through the main context's loader.
 * @param {typeof import("node:vm")} vm
 */
function evaluatePyodideAsmJs(vm) {
  const copy = startCacheHas("pyodide.asm.js");
  const file = distDir + (copy ? "start/" : "") + "pyodide.asm.js";
  const url = new URL("file://" + file).href;
  const source = Deno.readTextFileSync(file);
  if (!copy) {
    (0, eval)(`${source}\n//# sourceURL=${url}`);
    notes.asm = "distribution";
    return;
  }
  const cachedData = readStartCache("pyodide.asm.js.v8cache") ?? undefined;
  const script = new vm.Script(source, {
    filename: url,
    cachedData,
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  script.runInThisContext();
  notes.asm = "start cache";
  notes.asm_code_cache = cachedData ? (script.cachedDataRejected ? "refused" : "used") : "none";
}

/**
 * Imports the preloaded packages with Python's cyclic garbage collector off: its passes over the objects
 * the imports make (~135 young, ~12 middle and 2 full for numpy and matplotlib) were 10-15 % of the
 * imports. Then everything alive is frozen (gc.freeze: left out of later passes, as it lives as long as the
 * worker) and the collector is back on for code. The ~1 800 objects the imports left in unreachable cycles
 * stay with the frozen ones (~0.1 MB, shallow).
 * @param {PyodideInterface} pyodide
 */
function importPreloaded(pyodide) {
  const gc = pyodide.pyimport("gc");
  gc.disable();
  try {
    for (const name of preload) {
      if (name === "matplotlib") importMatplotlib(pyodide);
      else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) pyodide.pyimport(name).destroy();
      mark(`import_${name}`);
    }
  } finally {
    if (preload.length) gc.freeze();
    gc.enable();
    gc.destroy();
  }
}

/**
 * Loads Pyodide, mounts the start cache, defines the helpers and imports the preloaded packages.
 * @param {typeof import("node:vm")} vm
 * @returns {Promise<PyodideInterface>}
 */
export async function boot(vm) {
  const pyodideMjs = new URL("file://" + distDir + "pyodide.mjs").href;
  const { loadPyodide } = /** @type {PyodideModule} */ (await import(pyodideMjs));
  mark("import_pyodide_mjs");
  evaluatePyodideAsmJs(vm);
  const stdlibFromStart = startCacheHas("python_stdlib.zip");
  const pyodide = await loadingPyodide(() =>
    loadPyodide({
      indexURL: distDir,
      lockFileURL: distDir + "pyodide-lock.json",
      stdout: (s) => errWrite(s),
      stderr: (s) => errWrite(s),
      env: { HOME: "/home/pyodide", MPLBACKEND: "Agg" },
      // start/python_stdlib.zip carries bytecode: Pyodide's own start imports it instead of compiling.
      ...(stdlibFromStart ? { stdLibURL: distDir + "start/python_stdlib.zip" } : {}),
    }), notes);
  pyodide.setStdout({ write: capture });
  pyodide.setStderr({ write: capture });
  pyodide.setInterruptBuffer(interruptBuf);
  mark("load_pyodide");
  if (startCacheHas("site.json") || stdlibFromStart) mountStartDir(pyodide, stdlibFromStart);
  const mounted = mountStartSite(pyodide);
  const unpack = preload.filter((name) => !mounted.has(name.toLowerCase()));
  if (unpack.length) {
    await pyodide.loadPackage(unpack, { messageCallback: () => {}, errorCallback: errWrite });
    const fontlist = unpack.includes("matplotlib") && readStartCache("mpl-fontlist.json");
    if (fontlist) pyodide.FS.writeFile(MPL_FONTLIST, fontlist); // else matplotlib builds it on import
  }
  mark("load_packages");
  installHelpers(pyodide, dataDir);
  mark("helpers");
  importPreloaded(pyodide);
  return pyodide;
}
