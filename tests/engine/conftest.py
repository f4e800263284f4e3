"""Fixtures for the engine tests: the tiny model, built on demand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    """Import a file by path (tests/ and scripts/ are not packages)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _load_builder():
    return _load("build_tiny_model", REPO / "scripts" / "build_tiny_model.py")


@pytest.fixture(scope="session")
def tiny_builder():
    return _load_builder()


@pytest.fixture(scope="session")
def tiny_model(tiny_builder) -> Path:
    """The tiny random-weight model folder (built in a few seconds if missing or stale)."""
    return tiny_builder.build()
