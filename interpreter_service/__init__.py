"""A sandboxed, pre-warmed pool of Pyodide (WebAssembly) Python workers running under Deno."""

from interpreter_service.api import (
    DATA_DIR,
    ContainerInfo,
    ContainerNotFound,
    ExecutionResult,
    FileInfo,
    Interpreter,
    InterpreterError,
    MemoryLimitRefused,
    OwnerQuota,
    PoolExhausted,
    PoolStats,
    QuotaExceeded,
    data_path,
)

__all__ = [
    "DATA_DIR",
    "ContainerInfo",
    "ContainerNotFound",
    "ExecutionResult",
    "FileInfo",
    "Interpreter",
    "InterpreterError",
    "MemoryLimitRefused",
    "OwnerQuota",
    "PoolExhausted",
    "PoolStats",
    "QuotaExceeded",
    "data_path",
]
