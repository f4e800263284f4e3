"""The worker protocol's messages, one TypedDict per kind (the JS side's types: runtime/protocol.d.ts).

One JSON object per line: requests on the worker's stdin, replies and start events on its stdout. A reply
carries its request's `id` and `ok`; `{"op": "interrupt"}` has no id and no reply. docs/sandbox.md, "The
worker protocol", describes them.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

__all__ = [
    "AnyReply",
    "DeleteFileReply",
    "DeleteFileRequest",
    "ErrorReply",
    "ExecReply",
    "ExecRequest",
    "FatalEvent",
    "FileEntry",
    "ListFilesReply",
    "ListFilesRequest",
    "Op",
    "PingReply",
    "PingRequest",
    "ReadFileReply",
    "ReadFileRequest",
    "ReadyEvent",
    "Reply",
    "Request",
    "WriteFileReply",
    "WriteFileRequest",
]

Op = Literal["ping", "exec", "write_file", "read_file", "delete_file", "list_files"]


# -- requests (stdin) ------------------------------------------------------------------------------------
class PingRequest(TypedDict):
    id: int
    op: Literal["ping"]


class ExecRequest(TypedDict):
    """Run a cell; its output (stdout and stderr together) is kept up to `max_output` bytes."""

    id: int
    op: Literal["exec"]
    code: str
    max_output: int


class WriteFileRequest(TypedDict):
    """One chunk of an upload: the first (`append` false) creates or truncates the file. The files under
    the data folder may take `max_bytes` in all (the container's memory_limit)."""

    id: int
    op: Literal["write_file"]
    path: str  # absolute
    data_b64: str
    append: bool
    max_bytes: NotRequired[int | None]


class ReadFileRequest(TypedDict):
    """A slice of a file (the whole file without `offset` and `length`)."""

    id: int
    op: Literal["read_file"]
    path: str
    offset: NotRequired[int]
    length: NotRequired[int]


class DeleteFileRequest(TypedDict):
    id: int
    op: Literal["delete_file"]
    path: str


class ListFilesRequest(TypedDict):
    """The files under `dir` (the data folder without it)."""

    id: int
    op: Literal["list_files"]
    dir: NotRequired[str]


Request = (
    PingRequest | ExecRequest | WriteFileRequest | ReadFileRequest | DeleteFileRequest | ListFilesRequest
)


# -- replies (stdout) ------------------------------------------------------------------------------------
class ErrorReply(TypedDict):
    """A request that failed (`id` None: a line that was not JSON)."""

    id: int | None
    ok: Literal[False]
    error: str


class PingReply(TypedDict):
    id: int
    ok: Literal[True]


class ExecReply(TypedDict):
    """What a cell produced. `error_type` is the exception's class name (KeyboardInterrupt for an
    interrupt); `value` the repr of its last expression; `clipped` and `dropped` count what was cut."""

    id: int
    ok: Literal[True]
    error: str | None
    error_type: str | None
    value: str | None
    traceback: NotRequired[str]
    clipped: NotRequired[int]  # characters cut from `value` and `traceback`
    images: list[str]  # PNGs (base64) of the figures left open
    files_changed: list[str]  # files under the data folder created or changed
    logs: str
    dropped: int  # bytes of output past `max_output`
    load_errors: list[str]  # what loading the cell's imported packages said when it failed


class WriteFileReply(TypedDict):
    id: int
    ok: Literal[True]
    path: str
    bytes: int  # the file's size after this chunk


class ReadFileReply(TypedDict):
    id: int
    ok: Literal[True]
    data_b64: str
    size: int  # the whole file's size


class DeleteFileReply(TypedDict):
    id: int
    ok: Literal[True]
    path: str


class FileEntry(TypedDict):
    path: str
    bytes: int


class ListFilesReply(TypedDict):
    id: int
    ok: Literal[True]
    files: list[FileEntry]


Reply = PingReply | ExecReply | WriteFileReply | ReadFileReply | DeleteFileReply | ListFilesReply | ErrorReply


class AnyReply(TypedDict, total=False):
    """The reply to a request whose op is chosen at run time: every kind's fields, each maybe absent (the
    op's own reply type above says which it has)."""

    id: int | None
    ok: bool
    error: str | None
    error_type: str | None
    value: str | None
    traceback: str
    clipped: int
    images: list[str]
    files_changed: list[str]
    logs: str
    dropped: int
    load_errors: list[str]
    path: str
    bytes: int
    data_b64: str
    size: int
    files: list[FileEntry]


# -- start events (stdout, before any reply) --------------------------------------------------------------
class ReadyEvent(TypedDict):
    """The worker is ready: when each start phase ended (ms since the process started) and what the start
    did (e.g. `mpl_docs_replayed`)."""

    event: Literal["ready"]
    phases: dict[str, int]
    notes: dict[str, str | int | bool]


class FatalEvent(TypedDict):
    event: Literal["fatal"]
    error: str
