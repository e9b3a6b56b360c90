"""Where a trial's commands run: the Sandbox protocol and its backends.

`get_backend("docker" | "local" | "auto")` returns a `Backend`; `backend.build(context)`
gives an `ImageRef`, `backend.start(image, limits=...)` a `Session` with exec, copy_in,
copy_out, kill_all and stop. See base.py for the contract.
"""

from posttrain_arena.sandbox.base import (
    Backend,
    BuildError,
    ExecResult,
    ImageRef,
    Limits,
    Mount,
    PrerequisiteError,
    SandboxError,
    Session,
)
from posttrain_arena.sandbox.registry import BACKEND_NAMES, get_backend

__all__ = [
    "BACKEND_NAMES",
    "Backend",
    "BuildError",
    "ExecResult",
    "ImageRef",
    "Limits",
    "Mount",
    "PrerequisiteError",
    "SandboxError",
    "Session",
    "get_backend",
]
