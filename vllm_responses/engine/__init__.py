"""Engines: what turns a `GenerateRequest` into a stream of model output events."""

from vllm_responses.engine.base import Engine, EngineError, EngineRejected, EngineUnavailable

__all__ = ["Engine", "EngineError", "EngineRejected", "EngineUnavailable"]
