# The worker's Python: runs a cell and collects what it made (figures, changed files). worker.mjs runs this
# file in Pyodide's global namespace (`__main__`) once Pyodide is loaded, after setting `_VR_DATA_DIR`;
# cells run in a namespace of their own (`_vr_ns`). No docstring and no annotated globals: nothing but the
# names below is added to that namespace.
import asyncio
import base64
import io
import os
import sys
import traceback
from typing import Any

from pyodide.code import eval_code_async

_VR_DATA_DIR = globals()["_VR_DATA_DIR"]  # interpreter_service.api.DATA_DIR, set by worker.mjs

os.makedirs(_VR_DATA_DIR, exist_ok=True)
os.chdir(_VR_DATA_DIR)
_vr_ns = {"__name__": "__main__", "__builtins__": __builtins__}


def _vr_snapshot(root: str = _VR_DATA_DIR) -> dict[str, tuple[int, int]]:
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


def _vr_figures() -> list[str]:
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


def _vr_format_exc(e: BaseException) -> str:
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<cell>":
        tb = tb.tb_next
    if isinstance(e, SyntaxError) or tb is None:
        return "".join(traceback.format_exception_only(type(e), e))
    return "".join(traceback.format_exception(type(e), e, tb))


def _vr_clip(text: str, cap: int, result: dict[str, Any]) -> str:
    if len(text) > cap:
        result["clipped"] = result.get("clipped", 0) + len(text) - cap
        return text[:cap]
    return text


_vr_outer = None  # type: asyncio.Task[Any] | None  # the task of the current _vr_exec (the cell runs in a task of its own)


def _vr_cancel() -> None:
    """On interrupt while the cell awaits (Python checks the interrupt flag only while it runs): cancel the
    cell's task and every task it started. A task awaiting a future gets CancelledError there; one
    scheduled to resume gets it on its next step; one suspended in run_until_complete gets it when the
    tasks it waits for are cancelled."""
    if _vr_outer is None:
        return
    for t in asyncio.all_tasks():
        if t is not _vr_outer and not t.done():
            t.cancel()


async def _vr_exec(code: str, cap: int) -> dict[str, Any]:
    global _vr_outer
    before = _vr_snapshot()
    result: dict[str, Any] = {"error": None, "error_type": None, "value": None}
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
