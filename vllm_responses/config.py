"""Server settings as one frozen dataclass, each field declared once with its flag, env variable and help."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

__all__ = ["SETTINGS", "Config", "Setting", "setting"]

_T = TypeVar("_T")
_KEY = "setting"  # where a field's `Setting` sits in its dataclass metadata


def _as_parsed(value: Any) -> Any:
    return value


def _empty_is_none(text: str | None) -> str | None:
    return text or None


def _comma_list(text: str) -> tuple[str, ...]:
    """`a, b,,c` -> ("a", "b", "c"): the items of a comma-separated flag, blanks dropped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _switched_off(given: bool) -> bool:
    return not given


def _at_least(least: int) -> Callable[[str], int]:
    """A flag's parser: an integer of at least `least`, else a usage error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    return parse


@dataclass(frozen=True)
class Setting:
    """How one `Config` field is given: a flag of `vllm-responses serve` or its environment variable.

    Parameters
    ----------
    flag: the command-line flag (`--max-turns`); the environment variable is derived from it.
    help: the flag's help text.
    default: the field's default, which is the flag's too (a tuple is written joined with commas).
    parse: turns the flag's text into its value (argparse's `type`); None: the text as given.
    choices: the only values the flag accepts; None: any.
    to_config: turns the parsed value into the field's (a comma-separated text into a tuple, ...).
    switch: an on/off flag that takes no value; its environment variable is read as a boolean.
    older_env: another environment variable read for this flag, which wins over `env`.
    """

    flag: str
    help: str
    default: Any
    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    to_config: Callable[[Any], Any] = _as_parsed
    switch: bool = False
    older_env: str | None = None

    @property
    def dest(self) -> str:
        """The attribute argparse stores the flag's value in: `--max-turns` -> `max_turns`."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def env(self) -> str:
        """The flag's environment variable: `--max-turns` -> `VLLM_RESPONSES_MAX_TURNS`."""
        return "VLLM_RESPONSES_" + self.dest.upper()

    @property
    def env_names(self) -> tuple[str, ...]:
        """The environment variables read for this flag, the one that wins first."""
        return (self.older_env, self.env) if self.older_env else (self.env,)


def setting(
    default: _T,
    flag: str,
    help: str,
    *,
    parse: Callable[[str], Any] | None = None,
    choices: tuple[str, ...] | None = None,
    to_config: Callable[[Any], Any] = _as_parsed,
    switch: bool = False,
    older_env: str | None = None,
) -> _T:
    """A `Config` field with its default and the `Setting` that declares its flag (see `Setting`)."""
    declared = Setting(flag, help, default, parse, choices, to_config, switch, older_env)
    return field(default=default, metadata={_KEY: declared})


@dataclass(frozen=True)
class Config:
    """Settings of one `vllm-responses serve`; the CLI builds it, everything else only reads it.

    Each field of ours is declared with `setting(default, flag, help, ...)`, from which the CLI makes its
    flag and environment variable (docs/settings.md explains every one). `model`, `served_model_names`
    and `engine_args` come from vLLM's own engine flags instead.
    """

    host: str = setting("127.0.0.1", "--host", "Address to listen on.")
    port: int = setting(8000, "--port", "Port to listen on.", parse=int)
    # model path or name for vLLM; None serves the embedded default model
    model: str | None = None
    # names clients may send as `model` (the first is echoed back)
    served_model_names: tuple[str, ...] = ()
    db: str = setting(
        "~/.cache/vllm-responses/responses.db",
        "--db",
        "SQLite file, Postgres URL or ':memory:' (in process) for stored responses.",
    )
    # "%(default).0s" keeps a key from the environment out of --help (it prints no character of it)
    api_key: str | None = setting(
        None,
        "--api-key",
        "Require 'Authorization: Bearer KEY' on /v1 routes; better given as VLLM_RESPONSES_API_KEY "
        "(empty: an error).%(default).0s",
    )
    reasoning_key: str | None = setting(
        None,
        "--reasoning-key",
        "Key sealing reasoning items' encrypted_content (replicas share it); better given as "
        "VLLM_RESPONSES_REASONING_KEY (unset: a random key kept in the data folder).%(default).0s",
        to_config=_empty_is_none,
    )
    # several keys, each of a project (api/auth.py reads the file; docs/settings.md shows its form)
    api_keys_file: str | None = setting(
        None,
        "--api-keys-file",
        "JSON file of API keys, each belonging to a project whose objects only its keys see (with "
        "--api-key too: that key is project 'default').",
        to_config=_empty_is_none,
    )
    rate_limit_rpm: int = setting(
        0,
        "--rate-limit-rpm",
        "Requests per minute allowed to each API key on /v1 routes (0: unlimited; a keys file may set "
        "one per key).",
        parse=_at_least(0),
    )
    rate_limit_tpm: int = setting(
        0,
        "--rate-limit-tpm",
        "Tokens per minute allowed to each API key: a response reserves its prompt and output budget "
        "when admitted, settled to its usage at its end (0: unlimited; a keys file may set one per key).",
        parse=_at_least(0),
    )
    auth_failures_per_minute: int = setting(
        20,
        "--auth-failures-per-minute",
        "Failed API-key checks (401) allowed to each client address: a burst of this many, then this many "
        "a minute; past it the address gets a 429 with Retry-After (0: unlimited).",
        parse=_at_least(0),
    )
    project_max_containers: int = setting(
        0,
        "--project-max-containers",
        "Live code-interpreter containers each project may hold at once (0: no bound of its own; a keys "
        "file may set max_containers per key).",
        parse=_at_least(0),
    )
    project_max_sandbox_memory_mb: int = setting(
        0,
        "--project-max-sandbox-memory-mb",
        "MiB of sandbox memory each project's live containers may hold together, the sum of their "
        "memory_limit (0: no bound of its own; a keys file may set max_sandbox_memory_mb per key).",
        parse=_at_least(0),
    )
    project_max_stored_bytes: int = setting(
        0,
        "--project-max-stored-bytes",
        "Bytes of stored responses, conversation items and files (with pending uploads' parts) each project "
        "may keep (0: no bound; a keys file may set max_stored_bytes per key).",
        parse=_at_least(0),
    )
    code_interpreter: bool = setting(
        True,
        "--no-code-interpreter",
        "Do not start the sandbox pool; requests with the code_interpreter tool get a 400.",
        switch=True,
        to_config=_switched_off,
    )
    # the sandbox pool started in this process
    code_interpreter_workers: int = setting(
        2,
        "--code-interpreter-workers",
        "Warm sandbox workers started with the server.",
        parse=int,
        older_env="VR_CODE_INTERPRETER_WORKERS",
    )
    code_interpreter_timeout: float = setting(
        30.0, "--code-interpreter-timeout", "Seconds one code cell may run.", parse=float
    )
    code_interpreter_allow_net: tuple[str, ...] = setting(
        (),
        "--code-interpreter-allow-net",
        "Comma-separated hosts sandboxed code may reach (default: none).",
        to_config=_comma_list,
    )
    code_interpreter_idle_expiry: float = setting(
        20 * 60.0,
        "--code-interpreter-idle-expiry",
        "Seconds an idle container lives before its worker is recycled.",
        parse=float,
    )
    code_interpreter_max_workers: int | None = setting(
        None,
        "--code-interpreter-max-workers",
        "Most sandbox containers at once (default: memory budget / one worker's reserve, or its caps).",
        parse=int,
    )
    code_interpreter_max_spares: int | None = setting(
        None,
        "--code-interpreter-max-spares",
        "Most warm sandbox spares kept while demand is high (default: 4 per core; 1 keeps one spare).",
        parse=int,
    )
    code_interpreter_memory_budget: str | None = setting(
        None,
        "--code-interpreter-memory-budget",
        "Memory all sandbox workers may use together, e.g. 8g (default: half of the machine's RAM).",
        to_config=_empty_is_none,
    )
    code_interpreter_budget_counts: str = setting(
        "use",
        "--code-interpreter-budget-counts",
        "What the sandbox memory budget counts of each worker: use (its measured RSS, at least the worker "
        "reserve) or caps (its WebAssembly + JS heap caps).",
        choices=("use", "caps"),
    )
    code_interpreter_worker_reserve: str | None = setting(
        None,
        "--code-interpreter-worker-reserve",
        "The least each sandbox worker is charged in the budget when it counts use, e.g. 320m (default: "
        "the largest RSS of recently started workers).",
        to_config=_empty_is_none,
    )
    code_interpreter_queue_timeout: float = setting(
        60.0,
        "--code-interpreter-queue-timeout",
        "Seconds a code call or POST /v1/containers waits for a free container.",
        parse=float,
    )
    code_interpreter_user: str | None = setting(
        None,
        "--code-interpreter-user",
        "User the sandbox workers run as (default: nobody when run as root; '' for the server's own).",
    )
    code_interpreter_isolation: str = setting(
        "auto",
        "--code-interpreter-isolation",
        "OS limits around each sandbox worker: auto (a cgroup per worker where the host allows one, else "
        "RLIMIT_DATA and the watchdog), cgroup (refuse to start without one), none (RLIMIT_DATA and the "
        "watchdog only).",
        choices=("auto", "cgroup", "none"),
    )
    # the agent loop and the model
    max_turns: int = setting(
        8, "--max-turns", "Model calls one response may make (agent-loop bound).", parse=int
    )
    concise_summary_over: int = setting(
        600,
        "--concise-summary-over",
        "reasoning.summary 'concise': reasoning longer than this many characters is summarised by the served "
        "model in a call of its own; shorter reasoning is its own summary.",
        parse=_at_least(0),
    )
    tool_parser: str | None = setting(
        None,
        "--tool-call-parser",
        "Tool-call format of the model (hermes, llama3_json, pythonic, harmony, markdown_code, auto, "
        "..., or any of vLLM's tool-call parser names, e.g. qwen3_xml, kimi_k2, glm45; see docs/parsers.md); "
        "default: chosen from the chat template.",
    )
    log_level: str = setting(
        "info", "--log-level", "Log level.", choices=("critical", "error", "warning", "info", "debug")
    )
    # the vLLM engine arguments, as parsed by vLLM's own argument definitions
    engine_args: dict[str, Any] = field(default_factory=dict)
    # logs, streams and shutdown
    log_format: str = setting(
        "text", "--log-format", "Log lines as text or as one JSON object each.", choices=("text", "json")
    )
    sse_keepalive: float = setting(
        15.0,
        "--sse-keepalive",
        "Seconds of silence after which a stream gets an SSE comment (0: never).",
        parse=float,
    )
    shutdown_grace: float = setting(
        30.0,
        "--shutdown-grace",
        "Seconds running responses may go on after SIGTERM before they are ended.",
        parse=float,
    )
    # request size limits
    max_request_bytes: int = setting(
        8 * 1024 * 1024,
        "--max-request-bytes",
        "Largest request body in bytes; past it a 413, before the rest is read.",
        parse=int,
    )
    max_upload_bytes: int = setting(
        64 * 1024 * 1024,
        "--max-upload-bytes",
        "Largest upload in one multipart request in bytes (a container file, a Files API file, one part of an "
        "upload); past it a 413.",
        parse=int,
    )
    max_file_bytes: int = setting(
        512 * 1024 * 1024,
        "--max-file-bytes",
        "Largest file the Uploads API assembles from its parts, in bytes (an upload declaring more: a 400).",
        parse=_at_least(1),
    )
    # admission
    max_concurrent_responses: int | None = setting(
        None,
        "--max-concurrent-responses",
        "Responses running at once (default: the engine's max_num_seqs).",
        parse=_at_least(1),
    )
    max_queued_responses: int | None = setting(
        None,
        "--max-queued-responses",
        "Requests waiting for a running slot, FIFO (default: twice the former); 429 past them.",
        parse=_at_least(0),
    )
    # work a request starts outside admission: custom tools' grammars, WebSocket connections
    max_grammar_bytes: int = setting(
        64 * 1024,
        "--max-grammar-bytes",
        "Largest custom tool grammar definition (Lark or regex) in bytes; past it a 400.",
        parse=_at_least(1),
    )
    grammar_compile_timeout: float = setting(
        10.0,
        "--grammar-compile-timeout",
        "Seconds a request's custom tool grammars may take to check (off the event loop); past it a 400.",
        parse=float,
    )
    max_image_bytes: int = setting(
        10 * 1024 * 1024,
        "--max-image-bytes",
        "Largest input_image in encoded bytes (after base64 decoding); past it a 400 naming the part.",
        parse=_at_least(1),
    )
    max_images: int = setting(
        16,
        "--max-images",
        "Images one request may give (input_image parts); past it a 400.",
        parse=_at_least(0),
    )
    max_image_pixels: int = setting(
        40_000_000,
        "--max-image-pixels",
        "Most pixels (width x height) an input_image may decode to (decompression bombs); past it a 400.",
        parse=_at_least(1),
    )
    max_deferred_tools: int = setting(
        5000,
        "--max-deferred-tools",
        "Tools one request may give with defer_loading (searched by its tool_search tool); past it a 400.",
        parse=_at_least(0),
    )
    max_images_total_bytes: int = setting(
        32 * 1024 * 1024,
        "--max-images-total-bytes",
        "Bytes one request's input_images may weigh in all (data URLs, fetched URLs and container files); "
        "past it a 400.",
        parse=_at_least(1),
    )
    max_websockets: int = setting(
        256, "--max-websockets", "WebSocket connections open at once; past it a 429.", parse=_at_least(1)
    )
    max_websockets_per_key: int = setting(
        32,
        "--max-websockets-per-key",
        "WebSocket connections open at once per API key (per client address without --api-key); past it a 429.",
        parse=_at_least(1),
    )
    # remote MCP tools
    mcp_timeout: float = setting(
        30.0,
        "--mcp-timeout",
        "Seconds one remote MCP tool listing or call may take (connecting included).",
        parse=float,
    )
    mcp_allowed_urls: tuple[str, ...] = setting(
        (),
        "--mcp-allowed-urls",
        "Comma-separated URL prefixes of the remote MCP servers requests may name ('*': any "
        "http(s) URL; default: none, remote MCP tools are refused).",
        to_config=_comma_list,
    )
    mcp_allow_private_networks: bool = setting(
        False,
        "--mcp-allow-private-networks",
        "Let MCP server URLs that '*' allows reach loopback, private and link-local addresses too "
        "(an explicit --mcp-allowed-urls prefix reaches its host whatever its address).",
        switch=True,
    )
    web_search_url: str | None = setting(
        None,
        "--web-search-url",
        "The search endpoint of a SearXNG-compatible JSON API (GET ?q=...&format=json) that serves the "
        "web_search tool (default: none, the tool is accepted and not offered to the model).",
    )
    web_search_timeout: float = setting(
        10.0,
        "--web-search-timeout",
        "Seconds one web search (or one result page fetched) may take; past it the call fails and the "
        "model is told so.",
        parse=float,
    )
    web_search_page_allow_private_networks: bool = setting(
        False,
        "--web-search-page-allow-private-networks",
        "Let the web search's open_page and find_in_page open result pages on loopback, private and "
        "link-local addresses (off: such a page is refused and the model is told so).",
        switch=True,
    )
    # the embedding model: POST /v1/embeddings (engine/embedder.py, docs/retrieval.md)
    embedding_model: str | None = setting(
        None,
        "--embedding-model",
        "The embedding model: a model folder, loaded into a pooling vLLM engine in this process on first "
        "use; with --embedding-url, the remote server's model name (default: its first listed); 'none': no "
        "embedding model (default: the embedded all-MiniLM-L6-v2 where scripts/setup.sh set it up).",
        to_config=_empty_is_none,
    )
    embedding_url: str | None = setting(
        None,
        "--embedding-url",
        "The base URL of an OpenAI-compatible embeddings server (as an OpenAI client's base_url, e.g. "
        "http://10.0.0.5:8001/v1) to embed with instead of a model in this process.",
        to_config=_empty_is_none,
    )
    embedding_api_key: str | None = setting(
        None,
        "--embedding-api-key",
        "The bearer key sent to --embedding-url; better given as VLLM_RESPONSES_EMBEDDING_API_KEY.%(default).0s",
        to_config=_empty_is_none,
    )
    embedding_timeout: float = setting(
        60.0,
        "--embedding-timeout",
        "Seconds one call to --embedding-url may take in all; past it the request gets a 503.",
        parse=float,
    )
    max_concurrent_embeddings: int = setting(
        4,
        "--max-concurrent-embeddings",
        "Embedding requests run at once; twice as many wait (FIFO), the rest get a 429 with Retry-After.",
        parse=_at_least(1),
    )
    # input_file parts, read as text (tools/file_inputs.py)
    input_file_max_bytes: int = setting(
        10 * 1024 * 1024,
        "--input-file-max-bytes",
        "Largest file an input_file part may carry or name, in bytes; past it a 400.",
        parse=_at_least(1),
    )
    max_input_files: int = setting(
        16,
        "--max-input-files",
        "input_file parts one request may give; past it a 400, before any is read.",
        parse=_at_least(0),
    )
    input_files_max_total_bytes: int = setting(
        32 * 1024 * 1024,
        "--input-files-max-total-bytes",
        "Bytes one request's input_files may weigh in all (file_data, file_id and file_url together); past "
        "it a 400, a download stopped as it goes past.",
        parse=_at_least(1),
    )
    input_file_max_pages: int = setting(
        100,
        "--input-file-max-pages",
        "Pages of a PDF read as text; the model is told the rest were not read.",
        parse=_at_least(1),
    )
    input_file_max_chars: int = setting(
        100_000,
        "--input-file-max-chars",
        "Characters of a file's text the model is given; the rest is cut, with a line telling it so.",
        parse=_at_least(1),
    )
    input_file_allowed_urls: tuple[str, ...] = setting(
        (),
        "--input-file-allowed-urls",
        "Comma-separated URL prefixes an input_file's file_url may name ('*': any http(s) URL; default: "
        "none, file_url is refused).",
        to_config=_comma_list,
    )
    input_file_allow_private_networks: bool = setting(
        False,
        "--input-file-allow-private-networks",
        "Let file_urls that '*' allows reach loopback, private and link-local addresses too (an explicit "
        "--input-file-allowed-urls prefix reaches its host whatever its address).",
        switch=True,
    )
    input_file_url_timeout: float = setting(
        10.0,
        "--input-file-url-timeout",
        "Seconds fetching one file_url may take; past it a 400.",
        parse=float,
    )
    input_file_max_request_pages: int = setting(
        500,
        "--input-file-max-request-pages",
        "PDF pages one request may have read, all its files together; past it a 400.",
        parse=_at_least(1),
    )
    input_file_max_content_bytes: int = setting(
        8 * 1024 * 1024,
        "--input-file-max-content-bytes",
        "Decoded page content (content streams and forms) one request's PDFs may hold, in bytes, a stream "
        "counted once for each page that names it; past it a 400, before any text is read.",
        parse=_at_least(1),
    )
    input_file_extract_workers: int = setting(
        2,
        "--input-file-extract-workers",
        "Worker processes that read PDFs, DOCX and PPTX, started when first needed; more documents wait for one.",
        parse=_at_least(1),
    )
    input_file_extract_cpu: float = setting(
        10.0,
        "--input-file-extract-cpu",
        "CPU seconds reading one PDF, DOCX or PPTX may take (its worker is ended past them); a 400.",
        parse=float,
    )
    input_file_extract_timeout: float = setting(
        20.0,
        "--input-file-extract-timeout",
        "Seconds reading one PDF, DOCX or PPTX may take, waiting for a worker not counted; past them its worker is killed "
        "and the request gets a 400.",
        parse=float,
    )
    input_file_extract_memory: int = setting(
        1024 * 1024 * 1024,
        "--input-file-extract-memory",
        "Address space of one document-reading worker process in bytes (0: no limit); a document that needs more "
        "is a 400.",
        parse=_at_least(0),
    )
    input_image_allowed_urls: tuple[str, ...] = setting(
        (),
        "--input-image-allowed-urls",
        "Comma-separated URL prefixes an input_image's http(s) image_url may name ('*': any http(s) URL; "
        "default: none, only data URLs and container file ids are read).",
        to_config=_comma_list,
    )
    input_image_allow_private_networks: bool = setting(
        False,
        "--input-image-allow-private-networks",
        "Let image_urls that '*' allows reach loopback, private and link-local addresses too (an explicit "
        "--input-image-allowed-urls prefix reaches its host whatever its address).",
        switch=True,
    )
    # a shared sandbox service instead of the pool in this process
    code_interpreter_url: str | None = setting(
        None,
        "--code-interpreter-url",
        "Use the shared sandbox service at this URL (python -m interpreter_service serve) instead "
        "of starting sandbox workers here (default: start them here).",
        to_config=_empty_is_none,
    )
    # "%(default).0s" keeps a token from the environment out of --help (it prints no character of it)
    code_interpreter_token: str | None = setting(
        None,
        "--code-interpreter-token",
        "Bearer token for the shared sandbox service (its --token); better given as "
        "VLLM_RESPONSES_CODE_INTERPRETER_TOKEN.%(default).0s",
        to_config=_empty_is_none,
    )
    # the front door: who may reach the server, from where
    allow_unauthenticated: bool = setting(
        False,
        "--allow-unauthenticated",
        "Serve on a non-loopback --host with no API key (auth is done in front of this server).",
        switch=True,
    )
    allowed_hosts: tuple[str, ...] = setting(
        (),
        "--allowed-hosts",
        "Comma-separated Host header values served, each with or without a port ('*': any; default: "
        "localhost, 127.0.0.1, ::1 and --host when it is one address); others get a 400.",
        to_config=_comma_list,
    )
    allowed_origins: tuple[str, ...] = setting(
        (),
        "--allowed-origins",
        "Comma-separated origins (https://app.example.com) whose web pages may call this server ('*': "
        "any; default: none, only the server's own origin).",
        to_config=_comma_list,
    )
    operator_key: str | None = setting(
        None,
        "--operator-key",
        "Bearer key for /metrics and the detail of /ready (default: the API key); better given as "
        "VLLM_RESPONSES_OPERATOR_KEY.%(default).0s",
    )
    # the Postgres store and replicas sharing it
    db_pool_size: int = setting(
        10,
        "--db-pool-size",
        "Most connections of the store's pool to a Postgres --db (this process; the vector stores' index "
        "holds a pool of its own of at most 4, or this many when fewer).",
        parse=_at_least(1),
    )
    replica_id: str | None = setting(
        None,
        "--replica-id",
        "This server's name in the leases of its responses (default: random).",
        to_config=_empty_is_none,
    )
    replica_heartbeat: float = setting(
        2.0,
        "--replica-heartbeat",
        "Seconds between lease renewals, cross-replica cancel checks and sweeps.",
        parse=float,
    )
    replica_lease: float = setting(
        20.0,
        "--replica-lease",
        "Seconds a lease lasts unrenewed; then its responses are marked failed.",
        parse=float,
    )
    restream_poll_interval: float = setting(
        0.2,
        "--restream-poll-interval",
        "Seconds between store reads of a background response re-streamed on a replica that does not run it.",
        parse=float,
    )

    @property
    def auth_configured(self) -> bool:
        """Whether clients must present a key on `/v1` routes: `--api-key` or `--api-keys-file` is set."""
        return bool(self.api_key or self.api_keys_file)

    @property
    def ops_key(self) -> str | None:
        """The key `/metrics` and the detail of `/ready` need: the operator key, else the single API key when
        there is no keys file (its keys are tenants'). None: open with no key configured, else closed."""
        if self.operator_key:
            return self.operator_key
        return None if self.api_keys_file else self.api_key


# every field of `Config` that has a flag of ours, by field name, in declaration order
SETTINGS: Mapping[str, Setting] = {f.name: f.metadata[_KEY] for f in fields(Config) if _KEY in f.metadata}
