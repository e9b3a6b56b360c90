"""The Sandbox protocol: where a trial's commands run.

Backends (`docker`, `local`) implement it; `sandbox.get_backend(name)` picks one. A
backend builds an image from a task's `environment/` (an `ImageRef`), then starts
`Session`s from it: each session is one isolated container or bubblewrap instance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable


class SandboxError(Exception):
    """The sandbox itself failed (infrastructure), not the task or the agent."""


class BuildError(SandboxError):
    """The task's environment could not be built (the task's fault, usually)."""


class PrerequisiteError(SandboxError):
    """Something the user can fix is missing (no Docker engine, no bubblewrap).

    The message says how to fix it.
    """


@dataclass(frozen=True)
class Limits:
    """Resource limits for a session, from task.md's `environment` section."""

    cpus: float = 1.0
    memory_mb: int = 2048
    storage_mb: int = 10_240
    pids_limit: int = 512
    allow_internet: bool = False


@dataclass(frozen=True)
class ImageRef:
    """A built environment: what sessions start from."""

    backend: str
    tag: str  # content-addressed name
    context_hash: str
    workdir: str = "/root"
    env: Mapping[str, str] = field(default_factory=dict)
    image_id: str = ""


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_sec: float = 0.0


@dataclass(frozen=True)
class Mount:
    """A host path visible inside a session."""

    source: Path
    target: str
    read_only: bool = True


@runtime_checkable
class Session(Protocol):
    """One running sandbox instance."""

    id: str

    def exec(
        self,
        command: str | list[str],
        *,
        timeout: float | None = None,
        user: str | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        on_output: Callable[[str], None] | None = None,
    ) -> ExecResult:
        """Run a command (a string runs under `bash -lc`). Timeout kills it, and every
        process it started, and returns timed_out=True."""
        ...

    def copy_in(self, src: Path, dest: str) -> None:
        """Copy a host file or directory into the session at `dest`.

        `dest` is the path the copy gets (not its parent): copy_in(dir, "/x") makes /x
        hold dir's contents (merged into /x if it exists); parents are created.
        """
        ...

    def copy_out(self, src: str, dest: Path) -> None:
        """Copy a path of the session to the host (directories recursively).
        Symlinks are copied as links, never followed. `dest` is the path the copy gets
        (not its parent), as for copy_in."""
        ...

    def kill_all(self) -> None:
        """End every process in the session except its anchor; used between phases."""
        ...

    def stop(self) -> None:
        """Stop and remove the session. Idempotent; never waits on a grace period."""
        ...


class Backend(Protocol):
    name: str

    def available(self) -> tuple[bool, str]:
        """(works, explanation or how to fix it)."""
        ...

    def build(self, context: Path, *, timeout: float, task_name: str = "") -> ImageRef:
        """Build (or reuse, by content hash) the image for an environment directory."""
        ...

    def start(
        self,
        image: ImageRef,
        *,
        limits: Limits,
        mounts: list[Mount] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Session:
        """Start a session from an image."""
        ...
