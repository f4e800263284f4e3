"""Pick a tool-call parser name from a model's chat template (and, as a hint, its name)."""

from __future__ import annotations

__all__ = ["pick_parser"]

# (marker in the chat template, parser name), first match wins
_TEMPLATE_RULES: tuple[tuple[str, str], ...] = (
    ("<|channel|>", "harmony"),
    ("<tool_call>", "hermes"),
    ("<function=", "function_tag"),
    ("<|python_tag|>", "llama3_json"),
    ("ipython", "llama3_json"),
    ("[TOOL_CALLS]", "mistral"),
)
_TOOL_WORDS = ("tools", "tool_calls", "tool_call", "function")


def pick_parser(chat_template: str | None, model_name: str = "") -> str:
    """A registered parser name: by template markers, then model name; templates without a tools
    section get `markdown_code` (code blocks), and anything unknown gets the `auto` fallback."""
    t = chat_template or ""
    for marker, name in _TEMPLATE_RULES:
        if marker in t:
            return name
    m = model_name.lower()
    if "gpt-oss" in m:
        return "harmony"
    if any(k in m for k in ("qwen", "hermes")):
        return "hermes"
    if t and not any(w in t for w in _TOOL_WORDS):
        return "markdown_code"
    if not t and any(k in m for k in ("smollm", "gpt2", "tinyllama")):
        return "markdown_code"
    return "auto"
