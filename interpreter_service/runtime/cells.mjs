// Running a cell: its packages loaded from its imports, its output captured up to a cap, an interrupt
// while it awaits turned into a cancellation of what it awaits.
/** @import { PyodideInterface } from "./pyodide.d.ts" */
/** @import { ExecRequest, ExecResult } from "./protocol.d.ts" */
import { interruptBuf, onInterrupt } from "./requests.mjs";

/** @type {string[]} */
const outChunks = [];
let outBytes = 0, outCap = 100000, outDropped = 0;
const outDec = new TextDecoder();

/**
 * Pyodide's stdout and stderr (set by the boot): keeps up to the call's cap, counts the rest.
 * @param {Uint8Array} bytes
 */
export function capture(bytes) {
  const room = outCap - outBytes;
  if (room <= 0) {
    outDropped += bytes.length;
    return bytes.length;
  }
  const take = bytes.length <= room ? bytes : bytes.subarray(0, room);
  outDropped += bytes.length - take.length;
  outBytes += take.length;
  outChunks.push(outDec.decode(take, { stream: true }));
  return bytes.length;
}

/**
 * Runs one cell (worker_helpers.py's `_vr_exec`).
 * @param {PyodideInterface} pyodide
 * @param {ExecRequest} req
 * @returns {Promise<ExecResult>}
 */
export async function runCell(pyodide, req) {
  outChunks.length = 0;
  outBytes = 0;
  outDropped = 0;
  outCap = req.max_output ?? 100000;
  Atomics.store(interruptBuf, 0, 0); // a late re-sent interrupt for the previous call must not hit this one
  /** @type {string[]} */
  const loadMsgs = [];
  try {
    await pyodide.loadPackagesFromImports(req.code, {
      messageCallback: () => {},
      errorCallback: (m) => loadMsgs.push(m),
    });
  } catch (e) {
    loadMsgs.push(String(e));
  }
  Atomics.store(interruptBuf, 0, 0);
  const fn = pyodide.globals.get("_vr_exec");
  let res;
  const cancel = pyodide.globals.get("_vr_cancel");
  // Runs only while the cell awaits (this thread is busy while Python runs): clear the flag first (a late
  // one may be set), or the KeyboardInterrupt would hit the cancel itself instead of the cell.
  onInterrupt(() => {
    Atomics.store(interruptBuf, 0, 0);
    cancel();
  });
  try {
    const proxy = await fn(req.code, outCap);
    res = proxy.toJs({ dict_converter: Object.fromEntries });
    proxy.destroy();
  } finally {
    onInterrupt(null);
    cancel.destroy();
    fn.destroy();
    Atomics.store(interruptBuf, 0, 0);
  }
  outChunks.push(outDec.decode());
  return { ...res, logs: outChunks.join(""), dropped: outDropped, load_errors: loadMsgs };
}
