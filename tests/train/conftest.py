"""Fixtures for the train tests: a tiny model built here, a private sandbox cache."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .tinymodel import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer Qwen2-style model with a tool-aware chat template."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def train_cache() -> Iterator[Path]:
    """Local images and the harness bundle go to a private cache."""
    old = os.environ.get("ARENA_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="arena-train-tests-") as tmp:
        os.environ["ARENA_CACHE_DIR"] = tmp
        yield Path(tmp)
    if old is None:
        os.environ.pop("ARENA_CACHE_DIR", None)
    else:
        os.environ["ARENA_CACHE_DIR"] = old
