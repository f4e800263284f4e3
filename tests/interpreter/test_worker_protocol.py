"""The worker protocol's two descriptions agree: worker_protocol.py's TypedDicts and runtime/protocol.d.ts
name the same fields for each message kind (pure: the .d.ts read as text)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from interpreter_service.process import worker_protocol as wp

PROTOCOL_TS = Path(wp.__file__).resolve().parents[1] / "runtime" / "protocol.d.ts"


def ts_fields() -> dict[str, set[str]]:
    """Each interface of protocol.d.ts and its fields (an `extends` adds the base's)."""
    text = PROTOCOL_TS.read_text()
    found: dict[str, set[str]] = {}
    bases: dict[str, str] = {}
    for name, base, body in re.findall(
        r"export interface (\w+)(?: extends (\w+))? \{\n(.*?)\n\}", text, re.S
    ):
        found[name] = set(re.findall(r"^  (\w+)\??:", body, re.M))
        if base:
            bases[name] = base
    for name, base in bases.items():
        found[name] |= found[base]
    return found


REPLY = {"id", "ok"}  # a reply's fields besides its result's
PAIRS = [  # (the Python TypedDict, the .d.ts interface, fields the .d.ts has outside that interface)
    (wp.PingRequest, "PingRequest", set()),
    (wp.ExecRequest, "ExecRequest", set()),
    (wp.WriteFileRequest, "WriteFileRequest", set()),
    (wp.ReadFileRequest, "ReadFileRequest", set()),
    (wp.DeleteFileRequest, "DeleteFileRequest", set()),
    (wp.ListFilesRequest, "ListFilesRequest", set()),
    (wp.ExecReply, "ExecResult", REPLY),
    (wp.WriteFileReply, "WriteFileResult", REPLY),
    (wp.ReadFileReply, "ReadFileResult", REPLY),
    (wp.DeleteFileReply, "DeleteFileResult", REPLY),
    (wp.ListFilesReply, "ListFilesResult", REPLY),
    (wp.FileEntry, "FileEntry", set()),
    (wp.ReadyEvent, "ReadyEvent", set()),
    (wp.FatalEvent, "FatalEvent", set()),
]


@pytest.mark.parametrize(("typed", "interface", "outside"), PAIRS, ids=[p[1] for p in PAIRS])
def test_each_message_kind_has_the_same_fields_on_both_sides(
    typed: type, interface: str, outside: set[str]
) -> None:
    assert set(typed.__annotations__) == ts_fields()[interface] | outside


def test_the_any_reply_has_every_reply_field() -> None:
    replies = (wp.ExecReply, wp.WriteFileReply, wp.ReadFileReply, wp.DeleteFileReply, wp.ListFilesReply)
    fields = set().union(*(r.__annotations__ for r in (*replies, wp.ErrorReply)))
    assert set(wp.AnyReply.__annotations__) == fields


def test_the_ops_are_the_requests_ops() -> None:
    ts = PROTOCOL_TS.read_text()
    ops = set(re.findall(r'op: "(\w+)";', ts)) - {"interrupt"}
    assert ops == set(get_args(wp.Op))
