// Deno worker: runs Pyodide from a local distribution and serves a line-delimited JSON protocol on stdin/stdout.
//
// Usage: deno run --no-prompt --allow-read=<dist> worker.mjs <dist_dir> <preload,packages|-> <data_dir>
// (<data_dir>: interpreter_service.api.DATA_DIR, the folder code writes its outputs to and runs in.)
// Requests (one JSON object per line): {id, op: "ping"|"exec"|"write_file"|"read_file"|"delete_file"|"list_files", ...}
// (files travel in chunks: write_file {path, data_b64, append, max_bytes}, read_file {path, offset, length})
// and {op: "interrupt"} (no reply; handled on a helper thread so it reaches a busy interpreter).
// Replies: {id, ok: true, ...} or {id, ok: false, error}. Startup: {event: "ready"} or {event: "fatal"}.
const distDir = Deno.args[0].replace(/\/+$/, "") + "/";
// pyodide.asm.wasm, compiled on V8's background threads from the first moment, while this thread sets up
// Deno's Node compatibility (~30 ms), evaluates Pyodide's JS and reads its files: loadPyodide instantiates
// this module instead of compiling the same bytes itself (`loadingPyodide`).
const pyodideWasm = (() => {
  const bytes = Deno.readFileSync(distDir + "pyodide.asm.wasm"); // V8 copies them: not kept here
  return { size: bytes.length, module: WebAssembly.compile(bytes).catch(() => null) };
})();
const { createRequire } = await import("node:module");
const { default: vm } = await import("node:vm");
const preload = (Deno.args[1] ?? "numpy,matplotlib").split(",").filter((p) => p && p !== "-");
const dataDir = Deno.args[2];
if (!dataDir?.startsWith("/")) throw new Error("usage: worker.mjs <dist_dir> <preload|-> <absolute data_dir>");
// V8's full collection (the command line's --expose-gc), kept here and taken off the global object: code
// reaching JS through Pyodide's bridge does not see it (the property cannot be deleted, only emptied).
const fullGc = typeof globalThis.gc === "function" ? globalThis.gc : null;
globalThis.gc = undefined;
const protoOut = Deno.stdout; // private handle for the protocol
const enc = new TextEncoder();
const errWrite = (s) => {
  try { Deno.stderr.writeSync(enc.encode(String(s) + "\n")); } catch { /* ignore */ }
};
// Keep stdout for the protocol only: anything logged (Pyodide messages, user js.console) goes to stderr.
// While booting, an Emscripten/Pyodide failure is only logged (the load promise never settles): fail fast.
let failBoot = null;
const bootFailed = new Promise((_, reject) => (failBoot = reject));
bootFailed.catch(() => {});
for (const k of ["log", "info", "warn", "error", "debug", "trace"]) {
  console[k] = (...a) => {
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

let sendChain = Promise.resolve();
function send(obj) {
  const bytes = enc.encode(JSON.stringify(obj) + "\n");
  sendChain = sendChain.then(async () => {
    let off = 0;
    while (off < bytes.length) off += await protoOut.write(bytes.subarray(off));
  });
  return sendChain;
}

// stdin reader thread: forwards requests to this thread and handles interrupts. An interrupt is first
// posted here: if this thread is free (the cell awaits something), it acknowledges and cancels what the cell
// awaits. If it does not acknowledge within INTERRUPT_FLAG_MS (Python is running), the reader sets
// Pyodide's interrupt flag, which raises KeyboardInterrupt in the running code. Setting the flag at once
// would let the KeyboardInterrupt land in an event-loop callback of awaiting code, losing its wake-up.
const INTERRUPT_FLAG_MS = 100;
const interruptSab = new SharedArrayBuffer(4);
const interruptBuf = new Uint8Array(interruptSab);
const ackSab = new SharedArrayBuffer(8); // Int32 [interrupts requested, interrupts acknowledged]
const ack = new Int32Array(ackSab);
const readerSrc = `
let flag = null, ack = null;
self.onmessage = (e) => { flag = new Uint8Array(e.data[0]); ack = new Int32Array(e.data[1]); run(); };
async function run() {
  const dec = new TextDecoder();
  let parts = []; // the pieces of the line being read (a file chunk's line spans many reads)
  for await (const chunk of Deno.stdin.readable) {
    let text = dec.decode(chunk, { stream: true });
    let i;
    while ((i = text.indexOf("\\n")) >= 0) {
      parts.push(text.slice(0, i)); text = text.slice(i + 1);
      const line = parts.join(""); parts = [];
      if (!line.trim()) continue;
      if (line.startsWith('{"op":"interrupt"')) {
        const seq = Atomics.add(ack, 0, 1) + 1;
        self.postMessage({ interrupt: true });
        setTimeout(() => { if (Atomics.load(ack, 1) < seq) Atomics.store(flag, 0, 2); }, ${INTERRUPT_FLAG_MS});
        continue;
      }
      self.postMessage(line);
    }
    if (text) parts.push(text);
  }
  self.postMessage(null);
}`;
const reader = new Worker(URL.createObjectURL(new Blob([readerSrc], { type: "text/javascript" })), {
  type: "module",
});

const nodeRequire = createRequire(import.meta.url);
// Modules that start threads or processes: sandboxed code reaches `require` through `import js`.
const DENIED_MODULES = /^(node:)?(worker_threads|child_process|cluster)$/;
globalThis.require = Object.assign((name) => {
  if (DENIED_MODULES.test(String(name))) throw new Error(`${name} is not available in the sandbox`);
  return nodeRequire(name);
}, nodeRequire);
globalThis.__dirname = distDir.slice(0, -1);

// Sandboxed code sees this global scope (`import js`): take away what starts threads (`Worker`) and shared
// memory (`SharedArrayBuffer`; Atomics stays for our own interrupt buffer, made above). The OS limits
// (a cgroup or the watchdog) hold whatever gets around this, e.g. a dynamic import of node:worker_threads.
function closeThreadDoors() {
  for (const name of ["Worker", "SharedArrayBuffer"]) {
    Object.defineProperty(globalThis, name, { value: undefined, writable: false, configurable: false });
  }
}

const PY_HELPERS = `
import asyncio, base64, io, os, sys, traceback
from pyodide.code import eval_code_async

os.makedirs(_VR_DATA_DIR, exist_ok=True)
os.chdir(_VR_DATA_DIR)
_vr_ns = {"__name__": "__main__", "__builtins__": __builtins__}

def _vr_snapshot(root=_VR_DATA_DIR):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            try:
                st = os.stat(p)
                out[p] = (st.st_size, st.st_mtime_ns)
            except OSError:
                pass
    return out

def _vr_figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    images = []
    try:
        for num in plt.get_fignums():
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png")
            images.append(base64.b64encode(buf.getvalue()).decode())
    finally:
        plt.close("all")
    return images

def _vr_format_exc(e):
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<cell>":
        tb = tb.tb_next
    if isinstance(e, SyntaxError) or tb is None:
        return "".join(traceback.format_exception_only(type(e), e))
    return "".join(traceback.format_exception(type(e), e, tb))

def _vr_clip(text, cap, result):
    if len(text) > cap:
        result["clipped"] = result.get("clipped", 0) + len(text) - cap
        return text[:cap]
    return text

_vr_outer = None  # the task of the current _vr_exec (the cell runs in a task of its own)

def _vr_cancel():
    """On interrupt while the cell awaits (Python checks the interrupt flag only while it runs): cancel the
    cell's task and every task it started. A task awaiting a future gets CancelledError there; one
    scheduled to resume gets it on its next step; one suspended in run_until_complete gets it when the
    tasks it waits for are cancelled."""
    if _vr_outer is None:
        return
    for t in asyncio.all_tasks():
        if t is not _vr_outer and not t.done():
            t.cancel()

async def _vr_exec(code, cap):
    global _vr_outer
    before = _vr_snapshot()
    result = {"error": None, "error_type": None, "value": None}
    _vr_outer = asyncio.current_task()
    try:
        value = await asyncio.ensure_future(eval_code_async(code, _vr_ns, filename="<cell>"))
        if value is not None:
            result["value"] = _vr_clip(repr(value), cap, result)
    except BaseException as e:  # KeyboardInterrupt (interrupt), CancelledError, MemoryError, SystemExit
        result["error"] = "".join(traceback.format_exception_only(type(e), e)).strip() or type(e).__name__
        result["error_type"] = type(e).__name__
        result["traceback"] = _vr_clip(_vr_format_exc(e), cap, result)
    finally:
        _vr_outer = None
    try:
        result["images"] = _vr_figures()
    except BaseException:
        result["images"] = []
    after = _vr_snapshot()
    result["files_changed"] = sorted(p for p, v in after.items() if before.get(p) != v)
    return result
`;

let pyodide;
const outChunks = [];
let outBytes = 0, outCap = 100000, outDropped = 0;
const outDec = new TextDecoder();
function capture(bytes) {
  const room = outCap - outBytes;
  if (room <= 0) { outDropped += bytes.length; return bytes.length; }
  const take = bytes.length <= room ? bytes : bytes.subarray(0, room);
  outDropped += bytes.length - take.length;
  outBytes += take.length;
  outChunks.push(outDec.decode(take, { stream: true }));
  return bytes.length;
}

// When each start phase ended (ms since the process started), sent with the ready event.
const phases = { script: Math.round(performance.now()) };
const mark = (name) => (phases[name] = Math.round(performance.now()));
const notes = {}; // what the start did, for the ready event (e.g. how much of the start cache was used)

// The distribution's start cache (start/, made by prepare.mjs at setup; read-only here like the rest of it):
// a file's bytes, or null when it is not there.
function readStartCache(name) {
  try {
    return Deno.readFileSync(distDir + "start/" + name);
  } catch {
    return null;
  }
}
function startCacheHas(name) {
  try {
    return Deno.statSync(distDir + "start/" + name).isFile;
  } catch {
    return false;
  }
}
const MPL_FONTLIST = "/lib/python3.12/site-packages/matplotlib/fontlist.json";
const START_DIR = "/opt/start"; // the distribution's start/, read-only
const START_SITE = START_DIR + "/site"; // start/site: the preloaded packages installed, with bytecode

// The packages start/site holds (names as Pyodide's loadedPackages has them); none without it.
function startSitePackages() {
  const bytes = readStartCache("site.json");
  try {
    return bytes ? Object.keys(JSON.parse(new TextDecoder().decode(bytes)).packages) : [];
  } catch {
    return [];
  }
}

// The start cache's folders are mounted with Emscripten's NODEFS, made read-only: a change fails with EROFS
// (Deno would refuse the write anyway, but with an error NODEFS does not translate, which Pyodide treats as
// fatal); any other host error becomes EIO. Only these mounts use NODEFS.
function readOnlyNodeFs(FS, codes) {
  const NODEFS = FS.filesystems.NODEFS;
  const refuse = () => { throw new FS.ErrnoError(codes.EROFS); };
  for (const op of ["mknod", "rename", "unlink", "rmdir", "symlink", "setattr"]) NODEFS.node_ops[op] = refuse;
  NODEFS.stream_ops.write = refuse;
  const open = NODEFS.stream_ops.open;
  const O_ACCMODE = 3, O_CREAT = 64, O_TRUNC = 512;
  NODEFS.stream_ops.open = (stream) => {
    if (stream.flags & (O_ACCMODE | O_CREAT | O_TRUNC)) refuse();
    return open(stream);
  };
  for (const ops of [NODEFS.node_ops, NODEFS.stream_ops]) {
    for (const [name, fn] of Object.entries(ops)) {
      ops[name] = function (...args) {
        try {
          return fn.apply(this, args);
        } catch (e) {
          throw e instanceof FS.ErrnoError ? e : new FS.ErrnoError(codes.EIO);
        }
      };
    }
  }
  return NODEFS;
}

// Runs Python source with the builtins' compile and exec. pyodide.runPython first parses it into Python's
// ast objects (to hand back the last expression's value): for the helpers that was ~10 ms more, in wasm.
function runSource(source, filename, globals) {
  const compile = pyodide.globals.get("compile");
  const exec = pyodide.globals.get("exec");
  let code;
  try {
    code = compile(source, filename, "exec");
    exec(code, globals);
  } finally {
    code?.destroy();
    compile.destroy();
    exec.destroy();
  }
}

// Mounts start/site (read-only) after site-packages on sys.path (packages loaded later go to site-packages)
// and marks its packages loaded. Returns their names, lower case; none without a start cache.
function mountStartSite() {
  const names = startSitePackages();
  if (!names.length) return new Set();
  const path = pyodide.pyimport("sys.path");
  path.append(START_SITE);
  path.destroy();
  for (const name of names) pyodide.loadedPackages[name] = "default channel";
  return new Set(names.map((n) => n.toLowerCase()));
}

// Mounts start/ (read-only) at START_DIR. Pyodide copied the standard library zip it booted from into its
// in-memory file system (6.4 MB held by every worker); when that zip is start/python_stdlib.zip, the copy is
// replaced by a link to the same file through the mount (zipimport reopens the archive for each module, and
// the bytes are the same, so what it read of the zip's directory stays true).
function mountStartDir(stdlibFromStart) {
  const FS = pyodide.FS;
  FS.mkdirTree(START_DIR);
  FS.mount(readOnlyNodeFs(FS, pyodide.ERRNO_CODES), { root: distDir + "start" }, START_DIR);
  if (!stdlibFromStart) return;
  const path = pyodide.pyimport("sys.path");
  const zip = path.toJs().find((p) => p.endsWith(".zip"));
  path.destroy();
  FS.unlink(zip);
  FS.symlink(START_DIR + "/python_stdlib.zip", zip);
}

// Imports matplotlib.pyplot (Agg). With the start cache's mpl-artist-docs.json (prepare.mjs records it), the
// Artist classes' generated set() signatures and docstrings and kwdoc(class) are handed back from it in call
// order instead of computed (about half of the import's time): each call is checked against the recorded
// one (kind, class); from the first that differs on, everything is computed as without it. The originals
// are back in place once pyplot is imported: nothing of this stays for code to see.
const MPL_DOCS_REPLAY = `
def _vr_import_pyplot(recorded):
    import json
    from inspect import Parameter, Signature

    import matplotlib.artist as martist

    Artist = martist.Artist
    calls = json.loads(recorded)["calls"] if recorded else []
    kwdoc0, update0 = martist.kwdoc, Artist.__dict__["_update_set_signature_and_docstring"]
    state = {"replayed": 0, "in_step": bool(calls)}

    def take(kind, cls):
        i = state["replayed"]
        if state["in_step"] and i < len(calls) and calls[i][:2] == [kind, f"{cls.__module__}.{cls.__qualname__}"]:
            state["replayed"] = i + 1
            return calls[i]
        state["in_step"] = False  # computed from here on
        return None

    def kwdoc(artist):
        call = take("kwdoc", artist) if isinstance(artist, type) else None
        return call[2] if call else kwdoc0(artist)

    def update(cls):
        call = take("set", cls)
        if call is None:
            return update0.__func__(cls)
        self = Parameter("self", Parameter.POSITIONAL_OR_KEYWORD)
        names = (Parameter(n, Parameter.KEYWORD_ONLY, default=martist._UNSET) for n in call[2])
        cls.set.__signature__ = Signature([self, *names])
        cls.set._autogenerated_signature = True
        cls.set.__doc__ = call[3]

    martist.kwdoc = kwdoc
    Artist._update_set_signature_and_docstring = classmethod(update)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot
    finally:
        martist.kwdoc = kwdoc0
        Artist._update_set_signature_and_docstring = update0
    return [state["replayed"], len(calls)]
`;
function importMatplotlib() {
  const bytes = readStartCache("mpl-artist-docs.json");
  const ns = pyodide.toPy({});
  try {
    runSource(MPL_DOCS_REPLAY, "<vr-mpl-docs>", ns);
    const fn = ns.get("_vr_import_pyplot");
    const out = fn(bytes ? new TextDecoder().decode(bytes) : "");
    [notes.mpl_docs_replayed, notes.mpl_docs_recorded] = out.toJs();
    out.destroy(); fn.destroy();
  } finally {
    ns.destroy();
  }
}

// Evaluates pyodide.asm.js (1.2 MB, which defines globalThis._createPyodideModule) as a plain script, so that
// loadPyodide finds the function and does not import the file: Deno's module loader parses what it imports
// with its own parser to list its imports (and to find CommonJS exports) unless its cache (DENO_DIR) already
// holds the answer, which a worker, writing nowhere, never does. That parse took ~0.1 s of each start and
// left 20-30 MiB of the worker's malloc arenas behind. The start cache's copy (prepare.mjs: its dynamic
// linker checks only the symbols still unresolved) comes with V8's code cache of it: V8 then takes the
// bytecode of the functions Pyodide's start runs from the cache instead of compiling them (refused, e.g.
// made with other V8 flags, it compiles the file as without one). A node:vm script, which takes the cache,
// imports the node: modules the file needs through the main context's loader.
function evaluatePyodideAsmJs() {
  const copy = startCacheHas("pyodide.asm.js");
  const file = distDir + (copy ? "start/" : "") + "pyodide.asm.js";
  const url = new URL("file://" + file).href;
  const source = Deno.readTextFileSync(file);
  if (!copy) {
    (0, eval)(`${source}\n//# sourceURL=${url}`);
    notes.asm = "distribution";
    return;
  }
  const cachedData = readStartCache("pyodide.asm.js.v8cache") ?? undefined;
  const script = new vm.Script(source, {
    filename: url,
    cachedData,
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  script.runInThisContext();
  notes.asm = "start cache";
  notes.asm_code_cache = cachedData ? (script.cachedDataRejected ? "refused" : "used") : "none";
}

// Runs `load()` (loadPyodide) with its instantiation of pyodide.asm.wasm taking the module compiled ahead
// (`pyodideWasm`; if that failed, the bytes are compiled as before), and the bytes Pyodide read emptied once
// instantiated: its settings keep a promise of them (10 MB) for the life of the process, and V8 keeps its own
// copy of what it compiled. Only a buffer the view spans whole is emptied (ArrayBuffer.prototype.transfer).
async function loadingPyodide(load) {
  const instantiate = WebAssembly.instantiate;
  WebAssembly.instantiate = async function (source, ...rest) {
    const whole = ArrayBuffer.isView(source) && source.byteOffset === 0 && source.byteLength === source.buffer.byteLength;
    const module = whole && source.byteLength === pyodideWasm.size ? await pyodideWasm.module : null;
    notes.wasm_compiled_ahead = Boolean(module);
    const out = module
      ? { module, instance: await instantiate.call(this, module, ...rest) }
      : await instantiate.call(this, source, ...rest);
    if (whole && source.byteLength > 1 << 20) source.buffer.transfer(0);
    return out;
  };
  try {
    return await load();
  } finally {
    WebAssembly.instantiate = instantiate;
  }
}

async function boot() {
  const { loadPyodide } = await import(new URL("file://" + distDir + "pyodide.mjs").href);
  mark("import_pyodide_mjs");
  evaluatePyodideAsmJs();
  const stdlibFromStart = startCacheHas("python_stdlib.zip");
  pyodide = await loadingPyodide(() => loadPyodide({
    indexURL: distDir,
    lockFileURL: distDir + "pyodide-lock.json",
    stdout: (s) => errWrite(s),
    stderr: (s) => errWrite(s),
    env: { HOME: "/home/pyodide", MPLBACKEND: "Agg" },
    // start/python_stdlib.zip carries bytecode: Pyodide's own start imports it instead of compiling.
    ...(stdlibFromStart ? { stdLibURL: distDir + "start/python_stdlib.zip" } : {}),
  }));
  pyodide.setStdout({ write: capture });
  pyodide.setStderr({ write: capture });
  pyodide.setInterruptBuffer(interruptBuf);
  mark("load_pyodide");
  if (startCacheHas("site.json") || stdlibFromStart) mountStartDir(stdlibFromStart);
  const mounted = mountStartSite();
  const unpack = preload.filter((name) => !mounted.has(name.toLowerCase()));
  if (unpack.length) {
    await pyodide.loadPackage(unpack, { messageCallback: () => {}, errorCallback: errWrite });
    const fontlist = unpack.includes("matplotlib") && readStartCache("mpl-fontlist.json");
    if (fontlist) pyodide.FS.writeFile(MPL_FONTLIST, fontlist); // else matplotlib builds it on import
  }
  mark("load_packages");
  pyodide.globals.set("_VR_DATA_DIR", dataDir);
  runSource(PY_HELPERS, "<vr-helpers>", pyodide.globals);
  mark("helpers");
  importPreloaded();
}

// Imports the preloaded packages with Python's cyclic garbage collector off: its passes over the objects
// the imports make (~135 young, ~12 middle and 2 full for numpy and matplotlib) were 10-15 % of the imports.
// Then everything alive is frozen (gc.freeze: left out of later passes, as it lives as long as the worker)
// and the collector is back on for code. The ~1 800 objects the imports left in unreachable cycles stay
// with the frozen ones (~0.1 MB, shallow).
function importPreloaded() {
  const gc = pyodide.pyimport("gc");
  gc.disable();
  try {
    for (const name of preload) {
      if (name === "matplotlib") importMatplotlib();
      else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) pyodide.pyimport(name).destroy();
      mark(`import_${name}`);
    }
  } finally {
    if (preload.length) gc.freeze();
    gc.enable();
    gc.destroy();
  }
}

async function doExec(req) {
  outChunks.length = 0; outBytes = 0; outDropped = 0;
  outCap = req.max_output ?? 100000;
  Atomics.store(interruptBuf, 0, 0); // a late re-sent interrupt for the previous call must not hit this one
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
  cancelCell = () => { Atomics.store(interruptBuf, 0, 0); cancel(); };
  try {
    const proxy = await fn(req.code, outCap);
    res = proxy.toJs({ dict_converter: Object.fromEntries });
    proxy.destroy();
  } finally {
    cancelCell = null;
    cancel.destroy();
    fn.destroy();
    Atomics.store(interruptBuf, 0, 0);
  }
  outChunks.push(outDec.decode());
  return { ...res, logs: outChunks.join(""), dropped: outDropped, load_errors: loadMsgs };
}

// File paths arrive absolute (the pool resolves relative ones against DATA_DIR).
function fsPath(p) {
  if (typeof p !== "string" || !p.startsWith("/")) throw new Error(`not an absolute path: ${p}`);
  return p;
}

const fromBase64 = Uint8Array.fromBase64 ?? ((s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0)));
function toBase64(data) {
  if (data.toBase64) return data.toBase64();
  let s = "";
  for (let i = 0; i < data.length; i += 0x8000) s += String.fromCharCode(...data.subarray(i, i + 0x8000));
  return btoa(s);
}

// The files under `dir`, each {path, bytes} (the Python helper's walk, which the cells' file changes use too).
function filesUnder(dir) {
  const snap = pyodide.globals.get("_vr_snapshot");
  const m = snap(dir);
  const files = [];
  for (const [path, v] of m.toJs()) files.push({ path, bytes: v[0] });
  m.destroy(); snap.destroy();
  return files;
}

// Bytes of the files under `dir`, leaving out `skip`.
function filesBytes(dir, skip) {
  return filesUnder(dir).reduce((n, f) => n + (f.path === skip ? 0 : f.bytes), 0);
}

// One chunk of a file upload: the first ({append: false}) creates or truncates the file, the next ones append.
// The files under dataDir may take at most `max_bytes`: a chunk past it, or one the in-memory filesystem has
// no room for, deletes the file (no partial file is left) and fails saying it did not fit.
function writeChunk(req) {
  const FS = pyodide.FS, path = fsPath(req.path);
  const data = fromBase64(req.data_b64);
  if (!req.append) FS.mkdirTree(path.slice(0, path.lastIndexOf("/")) || "/");
  try {
    const size = (req.append ? FS.stat(path).size : 0) + data.length;
    if (req.max_bytes != null && size + filesBytes(dataDir, path) > req.max_bytes) {
      throw new RangeError(`the container's files may take at most ${req.max_bytes} bytes (its memory_limit)`);
    }
    const stream = FS.open(path, req.append ? "a" : "w");
    try { FS.write(stream, data, 0, data.length); } finally { FS.close(stream); }
    return { path, bytes: FS.stat(path).size };
  } catch (e) {
    const msg = errorText(e), codes = pyodide.ERRNO_CODES ?? {};
    const fit = e instanceof RangeError || e?.errno === codes.ENOSPC || e?.errno === codes.ENOMEM;
    if (!fit && !req.append) throw e; // e.g. a folder at that path: nothing was written
    try { FS.unlink(path); } catch { /* not there */ }
    throw new Error(`${fit ? "the file did not fit in the container's memory: " : ""}${msg}; the partial file was deleted`);
  }
}

// An error in words: Pyodide's file system throws ErrnoError objects with an errno and no message.
function errorText(e) {
  if (e?.message) return String(e.message);
  if (typeof e?.errno === "number") {
    const name = Object.entries(pyodide?.ERRNO_CODES ?? {}).find(([, n]) => n === e.errno)?.[0];
    return `${name ?? "errno " + e.errno}: ${{ ENOENT: "no such file", EISDIR: "is a folder", ENOTDIR: "not a folder", EEXIST: "already exists" }[name] ?? "file system error"}`;
  }
  return String(e);
}

// A slice of a file ({offset, length}; the whole file without them) and the file's size.
function readSlice(req) {
  const FS = pyodide.FS, path = fsPath(req.path);
  const size = FS.stat(path).size, offset = Math.min(req.offset ?? 0, size);
  const data = new Uint8Array(Math.min(req.length ?? size, size - offset));
  const stream = FS.open(path, "r");
  let n;
  try { n = FS.read(stream, data, 0, data.length, offset); } finally { FS.close(stream); }
  return { data_b64: toBase64(data.subarray(0, n)), size };
}

async function handle(req) {
  switch (req.op) {
    case "ping":
      return {};
    case "exec":
      return await doExec(req);
    case "write_file":
      return writeChunk(req);
    case "read_file":
      return readSlice(req);
    case "delete_file": {
      const path = fsPath(req.path);
      pyodide.FS.unlink(path);
      return { path };
    }
    case "list_files":
      return { files: filesUnder(fsPath(req.dir ?? dataDir)) };
    default:
      throw new Error(`unknown op ${req.op}`);
  }
}

// A full collection once the worker has sat idle for IDLE_GC_MS after its start or after a call that ran
// something: V8 leaves the garbage of the start and of each cell (buffers, proxies) for later, and held it
// while the worker idled (a cell's 48 MiB of JS buffers: test_worker_memory.py). A call that arrives first
// cancels it; one takes ~16 ms.
const IDLE_GC_MS = 300;
let idleGc = null;
function collectWhenIdle() {
  if (fullGc) idleGc = setTimeout(() => { idleGc = null; fullGc(); }, IDLE_GC_MS);
}

const queue = [];
let waiting = null;
let cancelCell = null; // set while a cell runs
reader.onmessage = (e) => {
  if (e.data?.interrupt) {
    Atomics.store(ack, 1, Atomics.load(ack, 0)); // this thread is free: no need for the flag
    try { cancelCell?.(); } catch (err) { errWrite(`cancel failed: ${err}`); }
    return;
  }
  if (waiting) { const w = waiting; waiting = null; w(e.data); } else queue.push(e.data);
};
const nextLine = () => queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => (waiting = r));

try {
  reader.postMessage([interruptSab, ackSab]);
  await Promise.race([boot(), bootFailed]);
  failBoot = null;
  closeThreadDoors();
  await send({ event: "ready", phases, notes });
  collectWhenIdle();
} catch (e) {
  await send({ event: "fatal", error: String(e?.stack ?? e) });
  Deno.exit(3);
}
for (;;) {
  const line = await nextLine();
  if (line === null) break; // stdin closed: parent went away
  clearTimeout(idleGc);
  idleGc = null;
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    await send({ id: null, ok: false, error: `bad request: ${e}` });
    continue;
  }
  try {
    await send({ id: req.id, ok: true, ...(await handle(req)) });
  } catch (e) {
    await send({ id: req.id, ok: false, error: errorText(e) });
  }
  if (req.op !== "ping") collectWhenIdle();
}
Deno.exit(0);
