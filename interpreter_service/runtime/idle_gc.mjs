// V8's full collection (the command line's --expose-gc), kept here and taken off the global object: code
// reaching JS through Pyodide's bridge does not see it (the property cannot be deleted, only emptied).
//
// A full collection runs once the worker has sat idle for IDLE_GC_MS after its start or after a call that
// ran something: V8 leaves the garbage of the start and of each cell (buffers, proxies) for later, and held
// it while the worker idled (a cell's 48 MiB of JS buffers: test_worker_memory.py). A call that arrives
// first cancels it; one takes ~16 ms.

const global = /** @type {{gc?: () => void}} */ (globalThis);
const fullGc = typeof global.gc === "function" ? global.gc : null;
global.gc = undefined;

const IDLE_GC_MS = 300;
/** @type {ReturnType<typeof setTimeout> | null} */
let idleGc = null;

/** Schedules a full collection IDLE_GC_MS from now. */
export function collectWhenIdle() {
  if (fullGc) {
    idleGc = setTimeout(() => {
      idleGc = null;
      fullGc();
    }, IDLE_GC_MS);
  }
}

/** Cancels the scheduled collection (a call arrived). */
export function cancelIdleCollection() {
  if (idleGc !== null) clearTimeout(idleGc);
  idleGc = null;
}
