"""Fixtures for the gate tests: trial runners per backend that count what they start."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from posttrain_arena.sandbox import get_backend
from posttrain_arena.sandbox.base import Backend, ImageRef, Limits, Mount, Session
from posttrain_arena.trial.runner import TrialRunner

from .kit import BASE


class CountingBackend:
    """A real backend that counts the builds and sessions asked of it."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.builds = 0
        self.starts = 0
        self._lock = threading.Lock()

    def available(self) -> tuple[bool, str]:
        return self.inner.available()

    def disk_bound(self, storage_mb: int) -> str:
        return self.inner.disk_bound(storage_mb)

    def build(self, context: Path, *, timeout: float, task_name: str = "") -> ImageRef:
        with self._lock:
            self.builds += 1
        return self.inner.build(context, timeout=timeout, task_name=task_name)

    def start(self, image: ImageRef, *, limits: Limits, mounts: list[Mount] | None = None,
              labels: Mapping[str, str] | None = None, output_dir: str | None = None
              ) -> Session:
        with self._lock:
            self.starts += 1
        return self.inner.start(image, limits=limits, mounts=mounts, labels=labels,
                                output_dir=output_dir)


@pytest.fixture
def runners(tmp_path: Path, arena_cache_dir: Path
            ) -> Iterator[Callable[[str], tuple[TrialRunner, CountingBackend]]]:
    """TrialRunners (no warm pool, so every session started is a trial's) over counting
    backends, recording under tmp_path/records; closed afterwards."""
    made: list[TrialRunner] = []

    def make(name: str = "local") -> tuple[TrialRunner, CountingBackend]:
        if name == "docker":
            _require_image(BASE)
        backend = CountingBackend(get_backend(name))
        runner = TrialRunner(backend, records_root=tmp_path / "records", warm_pool=False)
        made.append(runner)
        return runner, backend

    yield make
    for runner in made:
        runner.close()


def _require_image(tag: str) -> None:
    import docker

    try:
        docker.from_env(timeout=10).images.get(tag)
    except Exception:
        message = f"image {tag} is missing; run `arena images bootstrap`"
        if os.environ.get("ARENA_REQUIRE_ALL_BACKENDS") == "1":
            pytest.fail(message)
        pytest.skip(message)
