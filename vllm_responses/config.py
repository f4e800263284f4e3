"""Server settings as one frozen dataclass; the CLI builds it, everything else only reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Config"]


@dataclass(frozen=True)
class Config:
    """Settings of one `vllm-responses serve`.

    Parameters
    ----------
    host, port: where to listen (127.0.0.1:8000).
    model: model path or name for vLLM; None serves the embedded default model.
    served_model_names: names clients may send as `model` (the first is echoed back).
    db: where responses are stored: a SQLite file, ":memory:" (in process only), or a Postgres URL
        (`postgresql://user:password@host:port/database`, `postgres://` too; replicas share it).
    api_key: when set, every /v1 request needs `Authorization: Bearer <api_key>`.
    code_interpreter: whether the sandbox pool is started at all.
    code_interpreter_workers: warm sandbox workers started with the server.
    code_interpreter_timeout: seconds one code cell may run.
    code_interpreter_allow_net: hosts sandboxed code may reach (empty: no network).
    code_interpreter_idle_expiry: seconds an idle container lives before its worker is recycled.
    code_interpreter_max_workers: most containers (each one worker) at once; None: memory budget / the
        memory one worker may use (its memory limit + JS heap).
    code_interpreter_memory_budget: memory the sandbox workers may use together ("8g"); None: half of RAM.
    code_interpreter_queue_timeout: seconds a code call or `POST /v1/containers` waits for a container.
    code_interpreter_user: user the sandbox workers run as; None: "nobody" when the server runs as root,
        else the server's own; "": the server's own.
    max_turns: model calls one response may make (a hard bound on the agent loop).
    tool_parser: tool-call format of the model; None chooses one from the chat template.
    log_level: the server's log level.
    engine_args: the vLLM engine arguments, as parsed by vLLM's own argument definitions.
    log_format: "text" or "json" (one JSON object per line, and one line per finished response).
    sse_keepalive: seconds of silence after which a stream gets an SSE comment line (0: never).
    shutdown_grace: seconds running responses may go on after SIGTERM before they are ended.
    max_request_bytes: the largest request body (a 413 past it, before the rest is read).
    max_upload_bytes: the largest container file upload (multipart), bounded the same way.
    max_concurrent_responses: responses running at once (None: the engine's `max_num_seqs`).
    max_queued_responses: requests waiting for one of those slots, FIFO (None: twice the former); 429 past it.
    mcp_timeout: seconds one remote MCP listing or call may take (connecting included).
    code_interpreter_url: a shared sandbox service (`python -m interpreter_service serve`) to use instead of
        starting a pool in this process; None: start one here. The local pool's settings do not apply then.
    code_interpreter_token: the bearer token sent to that service (its `--token`).
    mcp_allowed_urls: URL prefixes of the remote MCP servers requests may name ("*": any http(s) URL);
        empty (the default): remote MCP tools are refused, since the server would fetch any URL a client names.

    The defaults here are the CLI's defaults too (`cli.py` reads them).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    model: str | None = None
    served_model_names: tuple[str, ...] = ()
    db: str = "~/.cache/vllm-responses/responses.db"
    api_key: str | None = None
    code_interpreter: bool = True
    code_interpreter_workers: int = 2
    code_interpreter_timeout: float = 30.0
    code_interpreter_allow_net: tuple[str, ...] = ()
    code_interpreter_idle_expiry: float = 20 * 60.0
    # --- sandbox (issue 16) ---
    code_interpreter_max_workers: int | None = None
    code_interpreter_memory_budget: str | None = None
    code_interpreter_queue_timeout: float = 60.0
    code_interpreter_user: str | None = None
    # --- end sandbox ---
    max_turns: int = 8
    tool_parser: str | None = None
    log_level: str = "info"
    engine_args: dict[str, Any] = field(default_factory=dict)
    # --- observe (issue 16) ---
    log_format: str = "text"
    sse_keepalive: float = 15.0
    shutdown_grace: float = 30.0
    # --- limits (issue 16) ---
    max_request_bytes: int = 8 * 1024 * 1024
    max_upload_bytes: int = 64 * 1024 * 1024
    # --- admission (issue 16) ---
    max_concurrent_responses: int | None = None
    max_queued_responses: int | None = None
    # --- MCP tools (issue 17) ---
    mcp_timeout: float = 30.0
    mcp_allowed_urls: tuple[str, ...] = ()
    # --- shared sandbox service (issue 18) ---
    code_interpreter_url: str | None = None
    code_interpreter_token: str | None = None
    # --- end shared sandbox service ---
    # --- Postgres store (issue 18) ---
    db_pool_size: int = 10  # most connections to a Postgres `db` this process holds
    # --- replicas (issue 18) ---
    replica_id: str | None = None  # this process's name in leases (default: random at start)
    replica_heartbeat: float = 2.0  # seconds between lease renewals, cancel checks and sweeps
    replica_lease: float = 20.0  # a lease not renewed for this long is expired: its responses fail
    # --- persisted events (issue 18) ---
    restream_poll_interval: float = 0.2  # seconds between reads of a re-stream served from the store
