// The part of Pyodide's JS API the worker uses (Pyodide 0.27; the distribution ships no type declarations).

/** A Python object seen from JS: callable, with attributes, to be destroyed when done with. */
export interface PyProxy {
  // deno-lint-ignore no-explicit-any
  (...args: any[]): any;
  // deno-lint-ignore no-explicit-any
  [name: string]: any;
  destroy(): void;
  // deno-lint-ignore no-explicit-any
  toJs(options?: { dict_converter?: (entries: Iterable<[string, unknown]>) => unknown }): any;
  get(key: string): PyProxy;
  set(key: string, value: unknown): void;
}

export interface LoadPackageOptions {
  messageCallback?: (message: string) => void;
  errorCallback?: (message: string) => void;
}

/** Emscripten's file system, as far as the worker uses it. */
export interface FileSystem {
  // deno-lint-ignore no-explicit-any
  filesystems: { NODEFS: any };
  // deno-lint-ignore no-explicit-any
  ErrnoError: new (errno: number) => any;
  // deno-lint-ignore no-explicit-any
  [name: string]: any;
}

export interface PyodideInterface {
  globals: PyProxy;
  loadedPackages: Record<string, string>;
  FS: FileSystem;
  ERRNO_CODES: Record<string, number>;
  pyimport(name: string): PyProxy;
  toPy(value: unknown): PyProxy;
  // deno-lint-ignore no-explicit-any
  runPython(code: string, options?: { globals?: PyProxy; filename?: string }): any;
  setStdout(options: { write: (bytes: Uint8Array) => number }): void;
  setStderr(options: { write: (bytes: Uint8Array) => number }): void;
  setInterruptBuffer(buffer: Uint8Array): void;
  loadPackage(names: string[], options?: LoadPackageOptions): Promise<unknown>;
  loadPackagesFromImports(code: string, options?: LoadPackageOptions): Promise<unknown>;
}

export interface LoadPyodideOptions {
  indexURL: string;
  lockFileURL: string;
  stdLibURL?: string;
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
  env?: Record<string, string>;
}

/** pyodide.mjs, the distribution's entry module. */
export interface PyodideModule {
  loadPyodide(options: LoadPyodideOptions): Promise<PyodideInterface>;
}
