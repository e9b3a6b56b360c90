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


class MissingPath(SandboxError):
    """copy_out: the path does not exist in the session (which itself is fine)."""


class TransferLimit(SandboxError):
    """copy_out: what the path holds exceeds the transfer's file, byte or time bound.

    The message says which bound and by how much; nothing was left half-copied on the
    host (the partial copy is removed)."""


class SessionDiskFull(TransferLimit):
    """copy_out: the engine could not read the path because the session's own disk (its
    bound, filled by what ran in it) has no block or inode left for the engine's work."""


@dataclass(frozen=True)
class TransferBounds:
    """Bounds on one copy out of a session: a count of entries (files, directories,
    links), a total of file bytes, and a wall-clock deadline (time.monotonic())."""

    max_entries: int | None = None
    max_bytes: int | None = None
    deadline: float | None = None


class PrerequisiteError(SandboxError):
    """Something the user can fix is missing (no Docker engine, no bubblewrap).

    The message says how to fix it.
    """


SESSION_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID",
                        "SETUID", "NET_BIND_SERVICE")
"""The only capabilities root has in any session, on every backend: what task programs
need to own, chmod, signal and switch between their files and users, and to listen on a
low port. Everything else (SYS_ADMIN, MKNOD, NET_RAW, SYS_CHROOT, SETFCAP, SETPCAP,
AUDIT_WRITE, ...) is dropped, and no process can gain privileges (no_new_privs), so a
setuid binary gives nothing more. docs/threat-model.md says why each is kept."""


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


Stdin = bytes | Callable[[], bytes]
"""What an exec's standard input gets: bytes, or a callable that waits for them."""


@runtime_checkable
class Session(Protocol):
    """One running sandbox instance.

    What differs between backends is declared here, as members, and callers consult
    these (never a backend's name): `host_copies`. Everything else below is a contract
    every backend keeps; fresh verification (`trial/fresh.py`) relies on exec's
    callable `stdin` and on `Backend.start(output_dir=)`, and takes one path on every
    backend."""

    id: str
    host_copies: bool
    """Whether copy_in and copy_out are plain host file copies (local: the session's
    files are a host directory) rather than engine round trips (docker). Where they
    are, moving files beats doing it with the session's own tools; where they are not,
    one exec that also brings the files in saves a round trip (the agent's shell)."""

    def exec(
        self,
        command: str | list[str],
        *,
        timeout: float | None = None,
        user: str | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        on_output: Callable[[str], None] | None = None,
        stdin: Stdin | None = None,
    ) -> ExecResult:
        """Run a command (a string runs under `bash -lc`). Timeout kills it, and every
        process it started, and returns timed_out=True. `stdin`: bytes fed to the
        command's standard input, which is then closed (else it reads end of file); or a
        callable giving them, called once the command has started, so that a command
        can be started before its input exists (it waits on its input meanwhile): the
        timeout counts from when the callable returns, and when it raises, the command
        and every process it started are killed and exec raises that exception.
        Raises SandboxError when the session cannot run commands (stopped, halted, or
        wrecked from inside: its PID 1 killed, its workdir deleted)."""
        ...

    def copy_in(self, src: Path, dest: str, *, own_tools: bool = False) -> None:
        """Copy a host file or directory into the session at `dest`.

        `dest` is the path the copy gets (not its parent): copy_in(dir, "/x") makes /x
        hold dir's contents (merged into /x if it exists); parents are created.
        `own_tools`: the backend may use the session's own programs (its tar) when that
        is faster; only for a session whose programs no one else relies on (an agent
        bringing files into its own session), never for a verifier's.
        """
        ...

    def copy_out(self, src: str, dest: Path, *, bounds: TransferBounds | None = None) -> None:
        """Copy a path of the session to the host (directories recursively).
        Symlinks are copied as links, never followed; devices, fifos and sockets are
        skipped. `dest` is the path the copy gets (not its parent), as for copy_in.
        Works on a halted session. MissingPath when `src` does not exist;
        TransferLimit when it exceeds `bounds` (then nothing is left at `dest`)."""
        ...

    def empty(self, paths: list[str], *, make_dir: str | None = None) -> None:
        """Empty each path of a session in which nothing runs yet (a pristine one, before
        an agent's state is copied in): a directory's entries are removed and the
        directory kept (it may be a mount point), anything else is removed; links are
        removed, never followed; a missing path is fine. Then `make_dir` is created
        (mode 0755, parents too) when given. SandboxError when it cannot."""
        ...

    def kill_all(self) -> None:
        """End every process in the session except its anchor; used between phases."""
        ...

    def halt(self) -> None:
        """End every process in the session for good and keep its files readable:
        copy_out still works, exec raises SandboxError. When it returns, no process
        that ever ran in the session can still change a file. Idempotent."""
        ...

    def changed_paths(self) -> list[str]:
        """Paths of the image changed, added or deleted by the session's processes, as
        seen from outside the session (its processes cannot hide a change). A backend
        whose system paths are read-only reports none of those."""
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
        output_dir: str | None = None,
    ) -> Session:
        """Start a session from an image. `output_dir`: a directory of the session that
        will be read with copy_out once the session is halted (a verifier's output);
        a backend may keep it on the host from the start (docker: an empty host
        directory bound there, removed with the session), so that reading it after the
        halt is a host copy rather than an engine round trip. It starts empty."""
        ...

    def disk_bound(self, storage_mb: int) -> str:
        """How a session with `storage_mb` of storage is bounded in total here, in words
        (a file system of its own, or "UNBOUNDED in total" and why); trial records and
        `arena sandbox doctor` carry it."""
        ...
