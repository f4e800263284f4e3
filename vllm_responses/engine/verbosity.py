"""`text.verbosity` in a prompt: the chat template's own `verbosity` variable where it reads one, else a note."""

from __future__ import annotations

from typing import Any

__all__ = ["VERBOSITY_NOTES", "VERBOSITY_VARIABLE", "verbosity_kwargs", "verbosity_note"]

# The template variable a chat template may read (found by `prompt.probe_template`, as the effort variables are).
VERBOSITY_VARIABLE = "verbosity"
# The note added to the system turn of a template without that variable. "medium" is the default: no note.
VERBOSITY_NOTES = {
    "low": "Answer concisely: keep your reply short, with only what is needed.",
    "high": "Answer in detail: give a thorough, complete reply.",
}


def verbosity_kwargs(template_reads_it: bool, verbosity: str | None) -> dict[str, Any]:
    """The template variable, when the template reads one and the request sets a verbosity."""
    return {VERBOSITY_VARIABLE: verbosity} if template_reads_it and verbosity is not None else {}


def verbosity_note(template_reads_it: bool, verbosity: str | None) -> str | None:
    """The system note for a template without the variable (`low` or `high`); None otherwise."""
    return None if template_reads_it or verbosity is None else VERBOSITY_NOTES.get(verbosity)
