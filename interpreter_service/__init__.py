"""A sandboxed, pre-warmed pool of Pyodide (WebAssembly) Python workers running under Deno."""

from interpreter_service.api import (
    ContainerInfo,
    ContainerNotFound,
    ExecutionResult,
    FileInfo,
    Interpreter,
    InterpreterError,
    PoolExhausted,
)

__all__ = [
    "ContainerInfo",
    "ContainerNotFound",
    "ExecutionResult",
    "FileInfo",
    "Interpreter",
    "InterpreterError",
    "PoolExhausted",
]
