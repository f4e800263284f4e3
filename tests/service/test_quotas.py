"""`ProjectLimits`: each project's bounds from its keys (the largest when its keys differ, 0 being none) or the
server's flags; the keys file's `max_*` fields read and checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interpreter_service import OwnerQuota
from vllm_responses.api.auth import KeyRing, KeysFileError
from vllm_responses.config import Config
from vllm_responses.service.quotas import Bounds, ProjectLimits


def test_a_projects_bounds_are_its_keys_else_the_servers() -> None:
    config = Config(project_max_containers=2, project_max_stored_bytes=1000)
    limits = ProjectLimits(
        config,
        [("a", 1, None, None), ("a", 3, 512, None), ("b", 0, None, 5), ("b", 4, None, None)],
    )
    assert limits.of("a") == Bounds(containers=3, sandbox_memory_mb=512, stored_bytes=1000)
    assert limits.of("b") == Bounds(containers=0, sandbox_memory_mb=0, stored_bytes=5)  # 0: none, the largest
    assert limits.of("c") == Bounds(containers=2, sandbox_memory_mb=0, stored_bytes=1000)
    assert limits.sandbox("a") == OwnerQuota(max_containers=3, max_memory_bytes=512 << 20)
    assert limits.sandbox("b") is None


def test_the_keys_file_gives_a_projects_bounds(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    entry = {
        "key": "sk-a-0123456789abcdef0123456789abcdef",
        "project": "a",
        "max_containers": 2,
        "max_stored_bytes": 10,
    }
    path.write_text(json.dumps({"keys": [entry]}))
    path.chmod(0o600)  # the server user's alone
    (principal,) = KeyRing.from_config(Config(api_keys_file=str(path))).keys.values()
    assert (principal.max_containers, principal.max_sandbox_memory_mb, principal.max_stored_bytes) == (
        2,
        None,
        10,
    )
    for bad in (-1, "2", True, 1.5):
        path.write_text(json.dumps({"keys": [{**entry, "max_sandbox_memory_mb": bad}]}))
        with pytest.raises(KeysFileError, match="'max_sandbox_memory_mb' must be an integer of at least 0"):
            KeyRing.from_config(Config(api_keys_file=str(path)))
