// The requests as they arrive: read from stdin on a second thread (reader.mjs), queued here for the
// protocol loop; an interrupt reaches this thread only when it is free (see reader.mjs).
import readerSource from "./reader.mjs" with { type: "text" };
import { errWrite } from "./io.mjs";

/** Pyodide's interrupt flag (2: SIGINT), set by the reader thread while Python runs. */
export const interruptBuf = new Uint8Array(new SharedArrayBuffer(4));
const ackSab = new SharedArrayBuffer(8); // Int32 [interrupts requested, interrupts acknowledged]
const ack = new Int32Array(ackSab);

/** @type {(string | null)[]} */
const queue = [];
/** @type {((line: string | null) => void) | null} */
let waiting = null;
/** @type {(() => void) | null} */
let cancelCell = null;

/**
 * What an interrupt does while this thread is free: cancel what the running cell awaits (null: no cell).
 * @param {(() => void) | null} fn
 */
export function onInterrupt(fn) {
  cancelCell = fn;
}

/** @type {Worker} */
let reader;

/** Starts the reader thread (before the sandbox's globals lose `Worker`); it reads once `listen` is called. */
export function startReader() {
  const url = URL.createObjectURL(new Blob([readerSource], { type: "text/javascript" }));
  reader = new Worker(url, { type: "module" });
  reader.onmessage = (e) => {
    if (e.data?.interrupt) {
      Atomics.store(ack, 1, Atomics.load(ack, 0)); // this thread is free: no need for the flag
      try {
        cancelCell?.();
      } catch (err) {
        errWrite(`cancel failed: ${err}`);
      }
      return;
    }
    if (waiting) {
      const w = waiting;
      waiting = null;
      w(e.data);
    } else queue.push(e.data);
  };
}

/** Hands the reader thread the interrupt flag and the acknowledgements: it starts reading stdin. */
export function listen() {
  reader.postMessage([interruptBuf.buffer, ackSab]);
}

/** The next request line; null once stdin is closed (the parent went away). */
export function nextLine() {
  return queue.length
    ? Promise.resolve(/** @type {string | null} */ (queue.shift()))
    : new Promise((r) => (waiting = r));
}
