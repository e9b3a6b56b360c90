"""Backends by name: `get_backend("docker" | "local" | "auto")`."""

from __future__ import annotations

import threading

from posttrain_arena.sandbox.base import Backend, PrerequisiteError

BACKEND_NAMES = ("docker", "local")
_instances: dict[str, Backend] = {}
_guard = threading.Lock()


def docker_answers() -> bool:
    """Whether a Docker engine answers a ping (quickly; no error raised)."""
    try:
        from posttrain_arena.sandbox.engine import docker_client

        docker_client(timeout=5)
    except PrerequisiteError:
        return False
    return True


def get_backend(name: str = "auto") -> Backend:
    """The backend called `name` (one shared instance per name in a process).

    "auto" is docker when an engine answers, else local. Raises PrerequisiteError (with
    the fix) when the named backend cannot work here, ValueError for an unknown name.
    """
    name = name.strip().lower()
    if name == "auto":
        name = "docker" if docker_answers() else "local"
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown sandbox backend {name!r}; choose one of auto, docker, local")
    with _guard:
        if name not in _instances:
            if name == "docker":
                from posttrain_arena.sandbox.docker import DockerBackend

                _instances[name] = DockerBackend()
            else:
                from posttrain_arena.sandbox.local_backend import LocalBackend, bwrap_path

                bwrap_path()  # PrerequisiteError with the fix when bwrap is missing
                _instances[name] = LocalBackend()
        return _instances[name]
