"""`InputFile`: the `input_file` content part of a message or a tool output, and the text the model reads of it."""

from __future__ import annotations

from typing import Literal

from vllm_responses.protocol.lenient import LenientModel

__all__ = ["FILE_SOURCES", "InputFile", "file_block"]

# The fields that name where a file's bytes come from; an `input_file` part gives exactly one.
FILE_SOURCES = ("file_data", "file_id", "file_url")


def file_block(filename: str, text: str) -> str:
    """A file's text as the model reads it: delimited, under its name (on a line of its own, around text)."""
    name = filename.replace('"', "'").replace("\n", " ")
    return f'\n<file name="{name}">\n{text}\n</file>\n'


class InputFile(LenientModel):
    """An `input_file` part, as the SDK's `ResponseInputFile` has it, plus `extracted_text`: the file's text,
    which the server sets when it reads the file (tools/file_inputs.py) and keeps in place of `file_data`, so
    that a stored item still shows the model the same file."""

    type: Literal["input_file"]
    file_data: str | None = None  # a data URL (`data:application/pdf;base64,...`) or base64 with `filename`
    file_id: str | None = None  # the caller's file: the Files API's (`file-...`) or a container's
    file_url: str | None = None  # fetched only where the operator allows it (--input-file-allowed-urls)
    filename: str | None = None
    detail: str | None = None  # accepted and kept; a file is read as text whatever it says
    extracted_text: str | None = None

    @property
    def text(self) -> str:
        """What the model reads of the file: its text in a block under its name."""
        if self.extracted_text is None:
            return file_block(self.filename or "file", "(this file was not read)")
        return file_block(self.filename or "file", self.extracted_text)
