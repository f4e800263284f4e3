// The worker's output: stdout carries the protocol only; everything logged (Pyodide's messages, code's
// js.console) goes to stderr.
/** @import { Reply, StartEvent } from "./protocol.d.ts" */

const protoOut = Deno.stdout; // private handle for the protocol
const enc = new TextEncoder();

/** Writes one line to stderr (never throws). @param {unknown} s */
export function errWrite(s) {
  try {
    Deno.stderr.writeSync(enc.encode(String(s) + "\n"));
  } catch { /* ignore */ }
}

let sendChain = Promise.resolve();
/**
 * Sends one message (a line of JSON) on stdout, after those sent before it.
 * @param {Reply | StartEvent} obj
 */
export function send(obj) {
  const bytes = enc.encode(JSON.stringify(obj) + "\n");
  sendChain = sendChain.then(async () => {
    let off = 0;
    while (off < bytes.length) off += await protoOut.write(bytes.subarray(off));
  });
  return sendChain;
}

// While booting, an Emscripten/Pyodide failure is only logged (the load promise never settles): fail fast.
/** @type {((e: Error) => void) | null} */
let failBoot = null;
/** Rejects when Pyodide logs a failure while the worker boots (`bootDone` ends that). */
export const bootFailed = new Promise((_, reject) => (failBoot = reject));
bootFailed.catch(() => {});
/** The worker has booted: a logged failure no longer fails it. */
export function bootDone() {
  failBoot = null;
}
for (const k of /** @type {const} */ (["log", "info", "warn", "error", "debug", "trace"])) {
  console[k] = (/** @type {unknown[]} */ ...a) => {
    const msg = a.join(" ");
    errWrite(msg);
    if (failBoot && /failed|abort/i.test(msg)) failBoot(new Error(`Pyodide failed to load: ${msg}`));
  };
}

// A KeyboardInterrupt that lands in an asyncio callback of Pyodide's event loop rejects a promise nobody
// awaits; Deno would exit on it. Log it instead: the call it belonged to ends as interrupted.
globalThis.addEventListener("unhandledrejection", (e) => {
  e.preventDefault();
  errWrite(`unhandled rejection: ${String(e.reason?.message ?? e.reason).slice(0, 500)}`);
});
