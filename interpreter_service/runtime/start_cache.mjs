// The distribution's start cache (start/, made by prepare.mjs at setup; read-only here like the rest of
// it), mounted into Pyodide's file system.
/** @import { PyodideInterface, FileSystem } from "./pyodide.d.ts" */
import { distDir } from "./args.mjs";

export const START_DIR = "/opt/start"; // the distribution's start/, read-only
const START_SITE = START_DIR + "/site"; // start/site: the preloaded packages installed, with bytecode

/**
 * A file's bytes, or null when it is not there.
 * @param {string} name
 */
export function readStartCache(name) {
  try {
    return Deno.readFileSync(distDir + "start/" + name);
  } catch {
    return null;
  }
}

/** @param {string} name */
export function startCacheHas(name) {
  try {
    return Deno.statSync(distDir + "start/" + name).isFile;
  } catch {
    return false;
  }
}

/**
 * The packages start/site holds (names as Pyodide's loadedPackages has them); none without it.
 * @returns {string[]}
 */
function startSitePackages() {
  const bytes = readStartCache("site.json");
  try {
    return bytes ? Object.keys(JSON.parse(new TextDecoder().decode(bytes)).packages) : [];
  } catch {
    return [];
  }
}

/**
 * The start cache's folders are mounted with Emscripten's NODEFS, made read-only: a change fails with
 * EROFS (Deno would refuse the write anyway, but with an error NODEFS does not translate, which Pyodide
 * treats as fatal); any other host error becomes EIO. Only these mounts use NODEFS.
 * @param {FileSystem} FS
 * @param {Record<string, number>} codes
 */
function readOnlyNodeFs(FS, codes) {
  const NODEFS = FS.filesystems.NODEFS;
  const refuse = () => {
    throw new FS.ErrnoError(codes.EROFS);
  };
  for (const op of ["mknod", "rename", "unlink", "rmdir", "symlink", "setattr"]) NODEFS.node_ops[op] = refuse;
  NODEFS.stream_ops.write = refuse;
  const open = NODEFS.stream_ops.open;
  const O_ACCMODE = 3, O_CREAT = 64, O_TRUNC = 512;
  NODEFS.stream_ops.open = (/** @type {{flags: number}} */ stream) => {
    if (stream.flags & (O_ACCMODE | O_CREAT | O_TRUNC)) refuse();
    return open(stream);
  };
  for (const ops of [NODEFS.node_ops, NODEFS.stream_ops]) {
    for (const [name, fn] of Object.entries(ops)) {
      ops[name] = function (/** @type {unknown[]} */ ...args) {
        try {
          return /** @type {Function} */ (fn).apply(this, args);
        } catch (e) {
          throw e instanceof FS.ErrnoError ? e : new FS.ErrnoError(codes.EIO);
        }
      };
    }
  }
  return NODEFS;
}

/**
 * Mounts start/site (read-only) after site-packages on sys.path (packages loaded later go to
 * site-packages) and marks its packages loaded. Returns their names, lower case; none without a cache.
 * @param {PyodideInterface} pyodide
 */
export function mountStartSite(pyodide) {
  const names = startSitePackages();
  if (!names.length) return new Set();
  const path = pyodide.pyimport("sys.path");
  path.append(START_SITE);
  path.destroy();
  for (const name of names) pyodide.loadedPackages[name] = "default channel";
  return new Set(names.map((n) => n.toLowerCase()));
}

/**
 * Mounts start/ (read-only) at START_DIR. Pyodide copied the standard library zip it booted from into its
 * in-memory file system (6.4 MB held by every worker); when that zip is start/python_stdlib.zip, the copy is
 * replaced by a link to the same file through the mount (zipimport reopens the archive for each module, and
 * the bytes are the same, so what it read of the zip's directory stays true).
 * @param {PyodideInterface} pyodide
 * @param {boolean} stdlibFromStart
 */
export function mountStartDir(pyodide, stdlibFromStart) {
  const FS = pyodide.FS;
  FS.mkdirTree(START_DIR);
  FS.mount(readOnlyNodeFs(FS, pyodide.ERRNO_CODES), { root: distDir + "start" }, START_DIR);
  if (!stdlibFromStart) return;
  const path = pyodide.pyimport("sys.path");
  const zip = path.toJs().find((/** @type {string} */ p) => p.endsWith(".zip"));
  path.destroy();
  FS.unlink(zip);
  FS.symlink(START_DIR + "/python_stdlib.zip", zip);
}
