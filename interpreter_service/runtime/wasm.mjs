// pyodide.asm.wasm compiled ahead: on V8's background threads from the first moment, while the main thread
// sets up Deno's Node compatibility (~30 ms), evaluates Pyodide's JS and reads its files. loadPyodide then
// instantiates this module instead of compiling the same bytes itself (`loadingPyodide`). Imported first by
// worker.mjs, so that this runs before any other module.
import { distDir } from "./args.mjs";

const pyodideWasm = (() => {
  const bytes = Deno.readFileSync(distDir + "pyodide.asm.wasm"); // V8 copies them: not kept here
  return { size: bytes.length, module: WebAssembly.compile(bytes).catch(() => null) };
})();

/**
 * Runs `load()` (loadPyodide) with its instantiation of pyodide.asm.wasm taking the module compiled ahead
 * (if that failed, the bytes are compiled as before), and the bytes Pyodide read emptied once instantiated:
 * its settings keep a promise of them (10 MB) for the life of the process, and V8 keeps its own copy of
 * what it compiled. Only a buffer the view spans whole is emptied (ArrayBuffer.prototype.transfer).
 * @template T
 * @param {() => Promise<T>} load
 * @param {Record<string, unknown>} notes  gets `wasm_compiled_ahead`
 * @returns {Promise<T>}
 */
export async function loadingPyodide(load, notes) {
  const instantiate = WebAssembly.instantiate;
  /** @type {any} */ (WebAssembly).instantiate = async function (
    /** @type {any} */ source,
    /** @type {any[]} */ ...rest
  ) {
    const whole = ArrayBuffer.isView(source) && source.byteOffset === 0 &&
      source.byteLength === source.buffer.byteLength;
    const module = whole && source.byteLength === pyodideWasm.size ? await pyodideWasm.module : null;
    notes.wasm_compiled_ahead = Boolean(module);
    const out = module
      ? { module, instance: await instantiate.call(this, module, ...rest) }
      : await instantiate.call(this, source, ...rest);
    if (whole && source.byteLength > 1 << 20) /** @type {ArrayBuffer} */ (source.buffer).transfer(0);
    return out;
  };
  try {
    return await load();
  } finally {
    WebAssembly.instantiate = instantiate;
  }
}
