"""Fixtures for the train tests: a tiny model built here, a private sandbox cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from .tinymodel import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer Qwen2-style model with a tool-aware chat template."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def train_cache(arena_cache_dir: Path) -> Path:
    """The session's private cache (see tests/conftest.py)."""
    return arena_cache_dir
