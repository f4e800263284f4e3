"""Custom tools' grammars checked off the event loop: each definition bounded in size, at most two converted at
once in worker threads, all of a request's under one timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.inputs import CustomTool
from vllm_responses.tools.functions import check_grammar

__all__ = ["COMPILERS", "GrammarChecker"]

# Grammars converted at once (worker threads). A thread cannot be stopped: one past its timeout runs on and
# keeps its worker, so that at most this many run whatever the clients send.
COMPILERS = 2


class GrammarChecker:
    """Checks the grammars of a request's custom tools (xgrammar parses them, `tools/functions.check_grammar`)
    in `COMPILERS` worker threads, so that the event loop keeps serving meanwhile; the conversions are cached
    (`engine/call_tags.grammar_format`), so offering the tools and each model call do not convert them again.

    Parameters
    ----------
    max_bytes: the largest definition (UTF-8 bytes, `--max-grammar-bytes`); past it a 400 before any work.
    timeout_s: seconds a request's grammars may take, waiting for a worker included
        (`--grammar-compile-timeout`); past it a 400.
    """

    def __init__(self, max_bytes: int, timeout_s: float) -> None:
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self._workers = ThreadPoolExecutor(max_workers=COMPILERS, thread_name_prefix="grammar")
        self._imported = False

    async def check(self, tools: Sequence[tuple[str, CustomTool]]) -> None:
        """Each of `tools` (parameter, tool) with a grammar checked: a 400 naming `{param}.format.definition`
        for one too large, one that does not parse, or when checking them all takes past the timeout."""
        grammars = [(param, tool) for param, tool in tools if tool.grammar is not None]
        for param, tool in grammars:
            self._check_size(param, tool)
        if not grammars:
            return
        loop = asyncio.get_running_loop()
        if not self._imported:  # once, outside the timeout: importing xgrammar takes seconds
            await loop.run_in_executor(self._workers, _import_backend)
            self._imported = True
        param = ""
        try:
            async with asyncio.timeout(self.timeout_s):
                for param, tool in grammars:  # a queued one not started yet is dropped on timeout
                    await loop.run_in_executor(self._workers, check_grammar, tool, param)
        except TimeoutError:
            raise InvalidRequest(
                f"The grammars of the custom tools took longer than {self.timeout_s:g} s to check "
                "(--grammar-compile-timeout; the server checks a few at a time): simplify or shorten them.",
                param=f"{param}.format.definition",
                code="grammar_too_complex",
            ) from None

    def _check_size(self, param: str, tool: CustomTool) -> None:
        assert tool.grammar is not None
        size = len(tool.grammar.definition.encode("utf-8", "surrogatepass"))
        if size > self.max_bytes:
            raise InvalidRequest(
                f"The {tool.grammar.syntax} definition of custom tool {tool.name!r} is {size} bytes, past this "
                f"server's limit of {self.max_bytes} (--max-grammar-bytes).",
                param=f"{param}.format.definition",
                code="grammar_too_large",
            )

    def close(self) -> None:
        """Drop the checks not started; those running end on their own (a thread cannot be stopped)."""
        self._workers.shutdown(wait=False, cancel_futures=True)


def _import_backend() -> None:
    """Import xgrammar (vLLM's structured-output backend, which parses the grammars)."""
    import xgrammar  # noqa: F401
