"""Fixtures for the sandbox tests: a tiny environment built on each backend."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from posttrain_arena.sandbox import ImageRef, Limits, get_backend
from posttrain_arena.sandbox.base import Backend, Session

BASE = "posttrain-arena/python:bookworm"

BACKENDS = [
    pytest.param("docker", marks=pytest.mark.docker, id="docker"),
    pytest.param("local", marks=pytest.mark.bwrap, id="local"),
]


def write_context(root: Path, dockerfile: str, files: dict[str, str] | None = None) -> Path:
    """A build context with `dockerfile` and `files` (relative path -> text)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "Dockerfile").write_text(dockerfile)
    for rel, text in (files or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="session")
def _cache_dir(arena_cache_dir: Path) -> Path:
    """The session's private cache (see tests/conftest.py)."""
    return arena_cache_dir


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, _cache_dir: Path) -> Backend:
    """Each backend in turn (skipped by the shared gates where missing)."""
    be = get_backend(request.param)
    if request.param == "docker":
        import docker.errors

        try:
            be.client.images.get(BASE)  # type: ignore[attr-defined]
        except docker.errors.ImageNotFound:
            msg = f"base image {BASE} missing: run `arena images bootstrap`"
            if os.environ.get("ARENA_REQUIRE_ALL_BACKENDS") == "1":
                pytest.fail(msg)
            pytest.skip(msg)
    return be


@pytest.fixture(scope="session")
def context_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An environment both backends can build: WORKDIR, ENV, COPY, RUN."""
    root = tmp_path_factory.mktemp("env")
    return write_context(
        root,
        f"FROM {BASE}\nWORKDIR /root\nENV GREETING=hello TARGET=world\n"
        "COPY seed.txt /root/seed.txt\nRUN echo built > /root/built.txt\n",
        {"seed.txt": "seed\n"},
    )


@pytest.fixture
def image(backend: Backend, context_dir: Path) -> ImageRef:
    """The environment built on the backend under test."""
    return backend.build(context_dir, timeout=300, task_name="sandbox-tests")


@pytest.fixture
def session(backend: Backend, image: ImageRef) -> Iterator[Session]:
    """A started session with default limits, stopped afterwards."""
    s = backend.start(
        image,
        limits=Limits(cpus=1, memory_mb=512, pids_limit=128),
        labels={"posttrain-arena.test": "1"},
    )
    try:
        yield s
    finally:
        s.stop()
