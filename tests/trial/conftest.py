"""Fixtures for the trial tests: a purpose-made task package, runners per backend."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from posttrain_arena.trial.runner import TrialRunner

from .taskkit import BASE

BACKENDS = [
    pytest.param("docker", marks=pytest.mark.docker, id="docker"),
    pytest.param("local", marks=pytest.mark.bwrap, id="local"),
]


@pytest.fixture(scope="session")
def trial_cache(arena_cache_dir: Path) -> Path:
    """The session's private cache (see tests/conftest.py)."""
    return arena_cache_dir


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest, trial_cache: Path) -> str:
    """Each backend in turn (skipped by the shared gates where missing)."""
    name: str = request.param
    if name == "docker":
        _require_image(BASE)
    return name


def _require_image(tag: str) -> None:
    import docker

    try:
        docker.from_env(timeout=10).images.get(tag)
    except Exception:
        message = f"image {tag} is missing; run `arena images bootstrap`"
        if os.environ.get("ARENA_REQUIRE_ALL_BACKENDS") == "1":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def runner_factory(tmp_path: Path) -> Iterator[Callable[..., TrialRunner]]:
    """TrialRunners that keep records under the test's tmp_path (closed afterwards)."""
    made: list[TrialRunner] = []

    def make(backend: str, **kwargs: object) -> TrialRunner:
        runner = TrialRunner(backend, records_root=tmp_path / "records", **kwargs)  # type: ignore[arg-type]
        made.append(runner)
        return runner

    yield make
    for runner in made:
        runner.close()
