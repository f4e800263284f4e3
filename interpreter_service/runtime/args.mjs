// The worker's command line: worker.mjs <dist_dir> <preload,packages|-> <data_dir>.

/** The Pyodide distribution, with a trailing slash (the one host folder the worker may read). */
export const distDir = Deno.args[0].replace(/\/+$/, "") + "/";
/** The packages imported before the worker is ready. */
export const preload = (Deno.args[1] ?? "numpy,matplotlib").split(",").filter((p) => p && p !== "-");
/** interpreter_service.api.DATA_DIR: the folder code writes its outputs to and runs in. */
export const dataDir = Deno.args[2];
if (!dataDir?.startsWith("/")) throw new Error("usage: worker.mjs <dist_dir> <preload|-> <absolute data_dir>");
