// What sandboxed code sees of the JS global scope (`import js`) besides Deno's own: `require` (which Pyodide
// needs to load from a local folder, and which refuses the modules that start threads or processes) and
// `__dirname`; and, once the worker has started, no `Worker` or `SharedArrayBuffer`.

// Modules that start threads or processes: sandboxed code reaches `require` through `import js`.
const DENIED_MODULES = /^(node:)?(worker_threads|child_process|cluster)$/;

/**
 * Sets the globals Pyodide's JS needs to load from a local folder under Deno: `require` and `__dirname`.
 * @param {(name: string) => unknown} nodeRequire  node:module's createRequire(import.meta.url)
 * @param {string} distDir  the distribution, with a trailing slash
 */
export function setPyodideGlobals(nodeRequire, distDir) {
  const g = /** @type {any} */ (globalThis);
  g.require = Object.assign((/** @type {unknown} */ name) => {
    if (DENIED_MODULES.test(String(name))) throw new Error(`${name} is not available in the sandbox`);
    return nodeRequire(/** @type {string} */ (name));
  }, nodeRequire);
  g.__dirname = distDir.slice(0, -1);
}

/**
 * Takes away what starts threads (`Worker`) and shared memory (`SharedArrayBuffer`; Atomics stays for our
 * own interrupt buffer, made before). The OS limits (a cgroup or the watchdog) hold whatever gets around
 * this, e.g. a dynamic import of node:worker_threads.
 */
export function closeThreadDoors() {
  for (const name of ["Worker", "SharedArrayBuffer"]) {
    Object.defineProperty(globalThis, name, { value: undefined, writable: false, configurable: false });
  }
}
