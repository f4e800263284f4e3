// Prepares a distribution's start cache (<dist>/start/), run once at setup with write access to that folder only.
//
// Usage: deno run --no-prompt --allow-read=<dist> --allow-write=<dist>/start prepare.mjs <dist_dir>
// Writes start/mpl-fontlist.json (matplotlib's font cache, which matplotlib otherwise rebuilds on every
// worker's first import). No user code ever runs here.
import { createRequire } from "node:module";

const distDir = Deno.args[0].replace(/\/+$/, "") + "/";
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
await pyodide.loadPackage(["matplotlib"], { messageCallback: () => {} });
// Pyodide's matplotlib keeps its font cache beside its code (site-packages/matplotlib/fontlist.json).
const fontlist = pyodide.runPython(`
import os
import matplotlib.font_manager as fm
open(os.path.join(os.path.dirname(fm.__file__), "fontlist.json")).read()
`);
writeAtomic("mpl-fontlist.json", fontlist);
