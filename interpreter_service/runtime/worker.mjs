// Deno worker: runs Pyodide from a local distribution and serves the worker protocol (protocol.d.ts,
// docs/sandbox.md "The worker protocol") on stdin and stdout.
//
// Usage: deno run --no-prompt --allow-read=<dist> worker.mjs <dist_dir> <preload,packages|-> <data_dir>
// (<data_dir>: interpreter_service.api.DATA_DIR, the folder code writes its outputs to and runs in.)
//
// The modules beside this one are imported statically (Deno reads them without a read permission); the
// order of the first imports is the order they run in: the wasm compile starts before anything else.
/** @import { PyodideInterface } from "./pyodide.d.ts" */
/** @import { Request, Result, Results } from "./protocol.d.ts" */
import "./wasm.mjs";
import { bootDone, bootFailed, send } from "./io.mjs";
import { cancelIdleCollection, collectWhenIdle } from "./idle_gc.mjs";
import { listen, nextLine, startReader } from "./requests.mjs";
import { closeThreadDoors, setPyodideGlobals } from "./globals.mjs";
import { boot, mark, notes, phases } from "./boot.mjs";
import { runCell } from "./cells.mjs";
import { deleteFile, errorText, filesUnder, fsPath, readSlice, writeChunk } from "./files.mjs";
import { dataDir, distDir } from "./args.mjs";

// Deno's Node compatibility is set up by the first node: import, after the wasm compile has started.
const { createRequire } = await import("node:module");
const { default: vm } = await import("node:vm");
startReader();
setPyodideGlobals(createRequire(import.meta.url), distDir);
mark("script");

/**
 * One handler per request kind: the reply's fields besides `id` and `ok`.
 * @type {{ [Op in keyof Results]: (pyodide: PyodideInterface, req: Extract<Request, { op: Op }>) =>
 *   Results[Op] | Promise<Results[Op]> }}
 */
const handlers = {
  ping: () => ({}),
  exec: (pyodide, req) => runCell(pyodide, req),
  write_file: (pyodide, req) => writeChunk(pyodide, dataDir, req),
  read_file: (pyodide, req) => readSlice(pyodide, req),
  delete_file: (pyodide, req) => deleteFile(pyodide, req.path),
  list_files: (pyodide, req) => ({ files: filesUnder(pyodide, fsPath(req.dir ?? dataDir)) }),
};

/**
 * Answers one request: the reply's fields besides `id` and `ok`.
 * @param {PyodideInterface} pyodide
 * @param {Request} req
 * @returns {Promise<Result>}
 */
async function handle(pyodide, req) {
  if (!Object.hasOwn(handlers, req.op)) throw new Error(`unknown op ${req.op}`);
  const handler = /** @type {(pyodide: PyodideInterface, req: Request) => Result | Promise<Result>} */ (
    handlers[req.op]
  );
  return await handler(pyodide, req);
}

/** @type {PyodideInterface} */
let pyodide;
try {
  listen();
  pyodide = await Promise.race([boot(vm), bootFailed]);
  bootDone();
  closeThreadDoors();
  await send({ event: "ready", phases, notes });
  collectWhenIdle();
} catch (e) {
  await send({ event: "fatal", error: String(/** @type {Error} */ (e)?.stack ?? e) });
  Deno.exit(3);
}
for (;;) {
  const line = await nextLine();
  if (line === null) break; // stdin closed: parent went away
  cancelIdleCollection();
  /** @type {Request} */
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    await send({ id: null, ok: false, error: `bad request: ${e}` });
    continue;
  }
  try {
    await send({ id: req.id, ok: true, ...(await handle(pyodide, req)) });
  } catch (e) {
    await send({ id: req.id, ok: false, error: errorText(pyodide, e) });
  }
  if (req.op !== "ping") collectWhenIdle();
}
Deno.exit(0);
