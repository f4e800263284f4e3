// The worker's own Python (the .py files beside this one), run in Pyodide.
/** @import { PyodideInterface, PyProxy } from "./pyodide.d.ts" */
import helpersSource from "./worker_helpers.py" with { type: "text" };

/**
 * Runs Python source with the builtins' compile and exec. pyodide.runPython first parses it into Python's
 * ast objects (to hand back the last expression's value): for the helpers that was ~10 ms more, in wasm.
 * @param {PyodideInterface} pyodide
 * @param {string} source
 * @param {string} filename
 * @param {PyProxy} globals
 */
export function runSource(pyodide, source, filename, globals) {
  const compile = pyodide.globals.get("compile");
  const exec = pyodide.globals.get("exec");
  /** @type {PyProxy | undefined} */
  let code;
  try {
    code = compile(source, filename, "exec");
    exec(code, globals);
  } finally {
    code?.destroy();
    compile.destroy();
    exec.destroy();
  }
}

/**
 * Defines the helpers cells run with (worker_helpers.py) in Pyodide's globals; they make `dataDir` and
 * make it the working directory.
 * @param {PyodideInterface} pyodide
 * @param {string} dataDir
 */
export function installHelpers(pyodide, dataDir) {
  pyodide.globals.set("_VR_DATA_DIR", dataDir);
  runSource(pyodide, helpersSource, "<vr-helpers>", pyodide.globals);
}
