"""The connection to a Docker Engine (docker-py), shared by the docker backend, the
image bootstrap and the reaper."""

from __future__ import annotations

import os
from typing import Any

from posttrain_arena.sandbox.base import PrerequisiteError

LABEL = "posttrain-arena"
"""The label on every container and image this project makes (`LABEL=1`, `LABEL.owner`)."""


def docker_client(timeout: int = 600) -> Any:
    """A docker-py client for $DOCKER_HOST (default socket), or PrerequisiteError."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a core dependency
        raise PrerequisiteError("the docker Python package is missing: pip install docker") from exc
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise PrerequisiteError(
            f"no Docker engine answers at {where} ({type(exc).__name__}); fix: install "
            "docker.io and start dockerd (e.g. `apt-get install docker.io && dockerd &`), "
            "or use --backend local"
        ) from exc
    return client
