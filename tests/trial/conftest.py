"""Fixtures for the trial tests: a purpose-made task package, runners per backend."""

from __future__ import annotations

import os
import tempfile
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
def trial_cache() -> Iterator[Path]:
    """Local images, the harness bundle and locks go to a private cache."""
    old = os.environ.get("ARENA_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="arena-trial-tests-") as tmp:
        os.environ["ARENA_CACHE_DIR"] = tmp
        yield Path(tmp)
    if old is None:
        os.environ.pop("ARENA_CACHE_DIR", None)
    else:
        os.environ["ARENA_CACHE_DIR"] = old


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
