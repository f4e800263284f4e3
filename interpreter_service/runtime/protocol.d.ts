// The worker's protocol: one JSON object per line on stdin (requests) and stdout (replies, start events).
// The same messages as interpreter_service/process/worker_protocol.py's TypedDicts; docs/sandbox.md describes them.

/** Checks that the server's health check sends; answered with an empty reply. */
export interface PingRequest {
  id: number;
  op: "ping";
}

/** Runs a cell: Python source, its output (stdout and stderr together) capped at `max_output` bytes. */
export interface ExecRequest {
  id: number;
  op: "exec";
  code: string;
  max_output?: number;
}

/** One chunk of a file upload: the first (`append: false`) creates or truncates, the next append. */
export interface WriteFileRequest {
  id: number;
  op: "write_file";
  path: string;
  data_b64: string;
  append?: boolean;
  /** What the files under the data folder may take in all (the container's memory_limit). */
  max_bytes?: number | null;
}

/** A slice of a file (the whole file without `offset` and `length`). */
export interface ReadFileRequest {
  id: number;
  op: "read_file";
  path: string;
  offset?: number;
  length?: number;
}

export interface DeleteFileRequest {
  id: number;
  op: "delete_file";
  path: string;
}

/** The files under `dir` (the data folder without it). */
export interface ListFilesRequest {
  id: number;
  op: "list_files";
  dir?: string;
}

/** Interrupts the running cell; never answered (the stdin reader thread handles it). */
export interface InterruptRequest {
  op: "interrupt";
}

export type Request =
  | PingRequest
  | ExecRequest
  | WriteFileRequest
  | ReadFileRequest
  | DeleteFileRequest
  | ListFilesRequest;

/** What a Python cell produced (`_vr_exec` in worker_helpers.py). */
export interface CellResult {
  error: string | null;
  /** The exception's class name (KeyboardInterrupt for an interrupt, MemoryError, ...). */
  error_type: string | null;
  /** The repr of the cell's last expression, when it is not None. */
  value: string | null;
  traceback?: string;
  /** Characters cut from `value` and `traceback` at the cap. */
  clipped?: number;
  /** PNG images (base64) of the figures the cell left open. */
  images: string[];
  /** Files under the data folder created or changed by the cell. */
  files_changed: string[];
}

export interface ExecResult extends CellResult {
  /** stdout and stderr, up to `max_output` bytes. */
  logs: string;
  /** Bytes of output past the cap. */
  dropped: number;
  /** What loading the packages the cell imports said when it failed. */
  load_errors: string[];
}

export interface FileEntry {
  path: string;
  bytes: number;
}

export interface WriteFileResult {
  path: string;
  /** The file's size after this chunk. */
  bytes: number;
}

export interface ReadFileResult {
  data_b64: string;
  /** The whole file's size. */
  size: number;
}

export interface DeleteFileResult {
  path: string;
}

export interface ListFilesResult {
  files: FileEntry[];
}

/** The reply's fields besides `id` and `ok`, per request. */
export interface Results {
  ping: Record<never, never>;
  exec: ExecResult;
  write_file: WriteFileResult;
  read_file: ReadFileResult;
  delete_file: DeleteFileResult;
  list_files: ListFilesResult;
}

export type Result = Results[keyof Results];

/** A reply: `{id, ok: true, ...result}`, or `{id, ok: false, error}` (`id` null for a line not JSON). */
export type Reply =
  | ({ id: number; ok: true } & Result)
  | { id: number | null; ok: false; error: string };

/** When each start phase ended (ms since the process started) and what the start did. */
export interface ReadyEvent {
  event: "ready";
  phases: Record<string, number>;
  notes: Record<string, string | number | boolean>;
}

export interface FatalEvent {
  event: "fatal";
  error: string;
}

export type StartEvent = ReadyEvent | FatalEvent;
