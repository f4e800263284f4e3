// The file operations on Pyodide's in-memory file system: chunked upload and download, delete, list.
/** @import { PyodideInterface } from "./pyodide.d.ts" */
/** @import { FileEntry, ReadFileRequest, ReadFileResult, WriteFileRequest, WriteFileResult } from "./protocol.d.ts" */

/**
 * File paths arrive absolute (the pool resolves relative ones against DATA_DIR).
 * @param {unknown} p
 * @returns {string}
 */
export function fsPath(p) {
  if (typeof p !== "string" || !p.startsWith("/")) throw new Error(`not an absolute path: ${p}`);
  return p;
}

/** @type {(s: string) => Uint8Array} */
const fromBase64 = /** @type {any} */ (Uint8Array).fromBase64 ??
  ((/** @type {string} */ s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0)));
/** @param {Uint8Array} data */
function toBase64(data) {
  const native = /** @type {any} */ (data).toBase64;
  if (native) return /** @type {string} */ (native.call(data));
  let s = "";
  for (let i = 0; i < data.length; i += 0x8000) s += String.fromCharCode(...data.subarray(i, i + 0x8000));
  return btoa(s);
}

/**
 * The files under `dir` (the Python helper's walk, which the cells' file changes use too).
 * @param {PyodideInterface} pyodide
 * @param {string} dir
 * @returns {FileEntry[]}
 */
export function filesUnder(pyodide, dir) {
  const snap = pyodide.globals.get("_vr_snapshot");
  const m = snap(dir);
  /** @type {FileEntry[]} */
  const files = [];
  for (const [path, v] of m.toJs()) files.push({ path, bytes: v[0] });
  m.destroy();
  snap.destroy();
  return files;
}

/**
 * Bytes of the files under `dir`, leaving out `skip`.
 * @param {PyodideInterface} pyodide
 * @param {string} dir
 * @param {string} skip
 */
function filesBytes(pyodide, dir, skip) {
  return filesUnder(pyodide, dir).reduce((n, f) => n + (f.path === skip ? 0 : f.bytes), 0);
}

/**
 * One chunk of a file upload: the first ({append: false}) creates or truncates the file, the next ones
 * append. The files under `dataDir` may take at most `max_bytes`: a chunk past it, or one the in-memory
 * filesystem has no room for, deletes the file (no partial file is left) and fails saying it did not fit.
 * @param {PyodideInterface} pyodide
 * @param {string} dataDir
 * @param {WriteFileRequest} req
 * @returns {WriteFileResult}
 */
export function writeChunk(pyodide, dataDir, req) {
  const FS = pyodide.FS, path = fsPath(req.path);
  const data = fromBase64(req.data_b64);
  if (!req.append) FS.mkdirTree(path.slice(0, path.lastIndexOf("/")) || "/");
  try {
    const size = (req.append ? FS.stat(path).size : 0) + data.length;
    if (req.max_bytes != null && size + filesBytes(pyodide, dataDir, path) > req.max_bytes) {
      throw new RangeError(`the container's files may take at most ${req.max_bytes} bytes (its memory_limit)`);
    }
    const stream = FS.open(path, req.append ? "a" : "w");
    try {
      FS.write(stream, data, 0, data.length);
    } finally {
      FS.close(stream);
    }
    return { path, bytes: FS.stat(path).size };
  } catch (e) {
    const msg = errorText(pyodide, e), codes = pyodide.ERRNO_CODES ?? {};
    const errno = /** @type {{errno?: number} | null} */ (e)?.errno;
    const fit = e instanceof RangeError || errno === codes.ENOSPC || errno === codes.ENOMEM;
    if (!fit && !req.append) throw e; // e.g. a folder at that path: nothing was written
    try {
      FS.unlink(path);
    } catch { /* not there */ }
    throw new Error(
      `${fit ? "the file did not fit in the container's memory: " : ""}${msg}; the partial file was deleted`,
    );
  }
}

const ERRNO_WORDS = /** @type {Record<string, string>} */ ({
  ENOENT: "no such file",
  EISDIR: "is a folder",
  ENOTDIR: "not a folder",
  EEXIST: "already exists",
});

/**
 * An error in words: Pyodide's file system throws ErrnoError objects with an errno and no message.
 * @param {PyodideInterface | undefined} pyodide
 * @param {unknown} e
 */
export function errorText(pyodide, e) {
  const err = /** @type {{message?: unknown, errno?: unknown} | null | undefined} */ (e);
  if (err?.message) return String(err.message);
  if (typeof err?.errno === "number") {
    const name = Object.entries(pyodide?.ERRNO_CODES ?? {}).find(([, n]) => n === err.errno)?.[0];
    return `${name ?? "errno " + err.errno}: ${(name && ERRNO_WORDS[name]) ?? "file system error"}`;
  }
  return String(e);
}

/**
 * A slice of a file ({offset, length}; the whole file without them) and the file's size.
 * @param {PyodideInterface} pyodide
 * @param {ReadFileRequest} req
 * @returns {ReadFileResult}
 */
export function readSlice(pyodide, req) {
  const FS = pyodide.FS, path = fsPath(req.path);
  const size = FS.stat(path).size, offset = Math.min(req.offset ?? 0, size);
  const data = new Uint8Array(Math.min(req.length ?? size, size - offset));
  const stream = FS.open(path, "r");
  let n;
  try {
    n = FS.read(stream, data, 0, data.length, offset);
  } finally {
    FS.close(stream);
  }
  return { data_b64: toBase64(data.subarray(0, n)), size };
}

/**
 * @param {PyodideInterface} pyodide
 * @param {string} path
 */
export function deleteFile(pyodide, path) {
  pyodide.FS.unlink(fsPath(path));
  return { path };
}
