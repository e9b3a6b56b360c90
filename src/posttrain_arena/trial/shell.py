"""The agent's view of its session: a Shell that runs commands before a deadline.

It is the only handle an agent gets. Each command's timeout is capped by the time left
in the agent phase; a command cut short by the deadline, or one attempted after it,
marks the phase as timed out. After the phase the shell is closed, so an agent thread
that outlived its deadline can no longer touch the session.
"""

from __future__ import annotations

import io
import posixpath
import secrets
import shlex
import tarfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from posttrain_arena.agents.base import ShellResult
from posttrain_arena.sandbox.base import ExecResult, SandboxError, Session

BROKEN_EXIT = 125
"""Exit status of a command the session could no longer run (the agent wrecked it)."""

# The agent's commands run in a plain (non-login) bash, or sh where the image has none:
# a login shell reads /etc/profile, which on Debian and Ubuntu sets PATH anew and so
# drops what the image's Dockerfile put first with ENV (a venv, cargo, go): the image's
# own tools would not be found by name. Without it the command sees exactly the
# environment the session gives (the image's ENV on docker, the same on local), as
# Docker's own RUN and `docker exec` do.
_PLAIN_SHELL = ("/bin/sh", "-c",
                'if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; fi; '
                'exec /bin/sh -c "$1"', "arena-shell")


def plain_shell(command: str) -> list[str]:
    """argv running `command` in a non-login bash (sh where there is no bash)."""
    return [*_PLAIN_SHELL, command]


class ShellClosed(RuntimeError):
    """The agent phase is over; the session no longer takes commands from the agent."""


class SessionShell:
    """A `Shell` over a sandbox session, bounded by the agent phase's deadline."""

    def __init__(self, session: Session, workdir: str, deadline: float,
                 env: Mapping[str, str] | None = None) -> None:
        self.workdir = workdir
        self._session = session
        self._deadline = deadline
        self._env = dict(env or {})
        self._lock = threading.Lock()
        self._closed = False
        self.deadline_hit = False
        self.commands = 0
        self.broken: str | None = None
        """Why the session stopped running commands, once it has (see exec)."""

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self._deadline - time.monotonic())

    def exec(
        self, command: str, *, timeout: float | None = None, env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ShellResult:
        """Run a shell command in the workspace; the deadline caps its timeout."""
        with self._lock:
            if self._closed:
                raise ShellClosed("the agent phase is over")
            self.commands += 1
        left = self.remaining()
        if left <= 0:
            self.deadline_hit = True
            return cast(ShellResult, ExecResult(exit_code=124, stdout="",
                                                stderr="deadline reached\n", timed_out=True))
        capped = left if timeout is None else min(timeout, left)
        try:
            result = self._session.exec(
                plain_shell(command), timeout=capped, env={**self._env, **(env or {})},
                workdir=self.workdir, stdin=stdin)
        except SandboxError as exc:
            # The session no longer runs commands (its PID 1 killed, its workdir gone):
            # the agent sees that as any failed command and may go on; the phase decides
            # afterwards whether the backend or the agent broke it.
            self.broken = self.broken or str(exc)
            return cast(ShellResult, ExecResult(
                exit_code=BROKEN_EXIT, stdout="",
                stderr=f"[posttrain-arena: the sandbox cannot run commands: {exc}]\n"))
        if result.timed_out and (timeout is None or timeout >= left):
            self.deadline_hit = True
        return cast(ShellResult, result)

    def copy_in(self, src: Path, dest: str) -> None:
        """Copy a host file or directory into the session."""
        with self._lock:
            if self._closed:
                raise ShellClosed("the agent phase is over")
        # into the agent's own session, its own tools may do it (docker: one exec
        # instead of the engine's slower archive upload)
        self._session.copy_in(src, dest, own_tools=True)

    def run_with(
        self, src: Path, dest: str, command: str, *, env: Mapping[str, str] | None = None
    ) -> ShellResult:
        """copy_in then exec; where copies are engine round trips, one exec instead: the
        session's own tar unpacks `src` (sent on its stdin) at `dest`, then the command
        runs with its stdin at end of file. When that tar cannot (none in the image, a
        path it may not write), the two calls, as for any other session."""
        if self._session.host_copies:  # a plain host copy: copy first, then exec
            self.copy_in(src, dest)
            return self.exec(command, env=env)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(src), arcname=posixpath.basename(dest.rstrip("/")) or ".")
        marker = f"posttrain-arena-unpack-failed-{secrets.token_hex(8)}"
        parent = posixpath.dirname(posixpath.normpath(posixpath.join(self.workdir, dest)))
        unpack = (f"mkdir -p -- {shlex.quote(parent)} && "
                  f"tar --numeric-owner -xpf - -C {shlex.quote(parent)} 2>/dev/null "
                  f"|| {{ echo {marker} >&2; exit 86; }}; exec </dev/null; ")
        result = self.exec(unpack + command, env=env, stdin=buf.getvalue())
        if result.exit_code == 86 and marker in result.stderr and not result.timed_out:
            self.copy_in(src, dest)
            return self.exec(command, env=env)
        return result

    def close(self) -> None:
        """End the agent's access to the session."""
        with self._lock:
            self._closed = True
