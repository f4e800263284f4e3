// The stdin reader thread (started by requests.mjs from this file's text as a blob: module, which needs
// no read permission): forwards each request line to the main thread and handles interrupts. An interrupt
// is first posted to the main thread: if it is free (the cell awaits something), it acknowledges and
// cancels what the cell awaits. If it does not acknowledge within INTERRUPT_FLAG_MS (Python is running),
// this thread sets Pyodide's interrupt flag, which raises KeyboardInterrupt in the running code. Setting
// the flag at once would let the KeyboardInterrupt land in an event-loop callback of awaiting code, losing
// its wake-up. Self-contained: a blob: module cannot import the files beside it.
/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />

const INTERRUPT_FLAG_MS = 100;

/** @type {Uint8Array} */
let flag;
/** @type {Int32Array} */
let ack; // [interrupts requested, interrupts acknowledged]
self.onmessage = (e) => {
  flag = new Uint8Array(e.data[0]);
  ack = new Int32Array(e.data[1]);
  run();
};

async function run() {
  const dec = new TextDecoder();
  /** @type {string[]} */
  let parts = []; // the pieces of the line being read (a file chunk's line spans many reads)
  for await (const chunk of Deno.stdin.readable) {
    let text = dec.decode(chunk, { stream: true });
    let i;
    while ((i = text.indexOf("\n")) >= 0) {
      parts.push(text.slice(0, i));
      text = text.slice(i + 1);
      const line = parts.join("");
      parts = [];
      if (!line.trim()) continue;
      if (line.startsWith('{"op":"interrupt"')) {
        const seq = Atomics.add(ack, 0, 1) + 1;
        self.postMessage({ interrupt: true });
        setTimeout(() => {
          if (Atomics.load(ack, 1) < seq) Atomics.store(flag, 0, 2);
        }, INTERRUPT_FLAG_MS);
        continue;
      }
      self.postMessage(line);
    }
    if (text) parts.push(text);
  }
  self.postMessage(null);
}
