"""One running container of the `docker` backend: exec, copy in/out, kill, stop.
(The exec API's pieces are in docker_exec.py, the archive transfers in
docker_archive.py, the session's host folder and disk in docker_disk.py.)

Every exec carries a marker in its environment (ARENA_EXEC_ID=<id>), which every process
it starts inherits, even one that calls setsid or is re-parented to PID 1. On timeout a
second exec SIGKILLs every process with that marker, so the whole tree of the timed-out
command dies while the session itself (and other execs) live on.

`halt()` ends a session's processes in one engine call (the container is killed, its
anchor with it) and keeps its files readable: a trial with fresh verification halts
the agent's session and copies the state out of the stopped container. A session
started with an output directory (a verifier's) may have it on the host, on the
session's disk (`docker_disk.SessionDir`): once halted, copy_out of that directory is a
host copy, not an archive from the engine. `disk_bound` says how the session's writes
are bounded in total.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from posttrain_arena.sandbox.base import (
    ExecResult,
    ImageRef,
    MissingPath,
    SandboxError,
    SessionDiskFull,
    Stdin,
    TransferBounds,
)
from posttrain_arena.sandbox.docker_anchor import end_all_but_anchor
from posttrain_arena.sandbox.docker_archive import get_path, put_path, tar_of
from posttrain_arena.sandbox.docker_disk import SessionDir
from posttrain_arena.sandbox.docker_exec import KILL_MARKED, NOT_FOUND, StdinStream
from posttrain_arena.sandbox.janitor import later
from posttrain_arena.sandbox.localfs import Budget, copy_tree
from posttrain_arena.sandbox.process import OutputCapture
from posttrain_arena.task_format.trust import DEFAULT_PATH

_EMPTY = (
    'for p in "$@"; do if [ -d "$p" ] && [ ! -L "$p" ]; then '
    'find "$p" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} + ; else rm -rf -- "$p"; fi; done'
)
"""Empties each path in place (a directory may be a mount point, so it is kept)."""


class DockerSession:
    """A container started by DockerBackend.start."""

    host_copies = False  # see Session.host_copies: copies go through the engine's API

    def __init__(self, api: Any, container: str, sid: str, image: ImageRef, *,
                 host_dir: SessionDir | None = None, disk_bound: str = "") -> None:
        self.api = api
        self.container = container
        self.id = sid
        self.image = image
        self.host_dir = host_dir
        self.output = host_dir if host_dir is not None and host_dir.output_target else None
        self.disk_bound = disk_bound
        """How the session's writes are bounded in total, in words (docker_disk)."""
        self._stopped = False
        self._halted = False
        self._shell = ["bash", "-lc"]

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
        """Run a command through the exec API; on timeout kill its whole tree.
        `stdin`: bytes fed to the command's standard input, which is then closed, or a
        callable giving them once the command runs (see Session.exec). A string runs
        under `bash -lc`, or `/bin/sh -lc` in an image without bash (found out on the
        first string the engine could not start bash for, then kept)."""
        if not isinstance(command, str):
            return self._exec(list(command), timeout=timeout, user=user, env=env,
                              workdir=workdir, on_output=on_output, stdin=stdin)
        result = self._exec([*self._shell, command], timeout=timeout, user=user, env=env,
                            workdir=workdir, on_output=on_output, stdin=stdin)
        if (self._shell[0] == "bash" and result.exit_code in (126, 127) and not callable(stdin)
                and NOT_FOUND in result.stdout + result.stderr and '"bash"' in result.stdout
                + result.stderr):
            self._shell = ["/bin/sh", "-lc"]
            result = self._exec([*self._shell, command], timeout=timeout, user=user, env=env,
                                workdir=workdir, on_output=on_output, stdin=stdin)
        return result

    def _exec(
        self,
        argv: list[str],
        *,
        timeout: float | None,
        user: str | None,
        env: Mapping[str, str] | None,
        workdir: str | None,
        on_output: Callable[[str], None] | None,
        stdin: Stdin | None,
    ) -> ExecResult:
        import docker.errors

        if self._stopped or self._halted:
            raise SandboxError(f"session {self.id} is {'stopped' if self._stopped else 'halted'}")
        marker = uuid.uuid4().hex
        environment = {**(env or {}), "ARENA_EXEC_ID": marker}
        t0 = time.monotonic()
        try:
            exec_id = self.api.exec_create(
                self.container,
                argv,
                stdout=True,
                stderr=True,
                stdin=stdin is not None,
                tty=False,
                user=user or "",
                environment=environment,
                workdir=workdir or self.image.workdir,
            )["Id"]
            if stdin is None:
                stream: Any = self.api.exec_start(exec_id, stream=True, demux=True)
            else:
                sock = self.api.exec_start(exec_id, socket=True)
        except docker.errors.APIError as exc:
            raise SandboxError(f"exec in session {self.id} failed: {exc}") from exc
        if stdin is not None:
            if callable(stdin):
                try:  # the command runs and waits on its input meanwhile
                    payload = stdin()
                except BaseException:
                    self._cancel(exec_id, marker)  # then close: no EOF reaches it alive
                    StdinStream.close_socket(sock)
                    raise
                t0 = time.monotonic()
            else:
                payload = stdin
            stream = StdinStream(sock, payload)
        out, err = OutputCapture(on_output), OutputCapture(on_output)
        failure: list[BaseException] = []

        def pump() -> None:
            try:
                for so, se in stream:
                    if so:
                        out.feed(so)
                    if se:
                        err.feed(se)
            except Exception as exc:  # connection closed under us by a kill
                failure.append(exc)

        reader = threading.Thread(target=pump, name=f"exec-{self.id}", daemon=True)
        reader.start()
        reader.join(timeout)
        timed_out = reader.is_alive()
        if timed_out:
            self._kill_marked(marker)
            reader.join(5)
            if reader.is_alive():  # something dropped the marker and holds the stream
                self.kill_all()
                reader.join(5)
            if reader.is_alive():
                with contextlib.suppress(Exception):
                    stream.close()
        code = 137
        if not timed_out:
            ended = self._wait_exit(exec_id, marker, None if timeout is None else t0 + timeout)
            timed_out = ended is None
            code = 137 if ended is None else ended
        return ExecResult(
            exit_code=int(code),
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            duration_sec=time.monotonic() - t0,
        )

    def _wait_exit(self, exec_id: str, marker: str, deadline: float | None) -> int | None:
        """The exec's exit code once it has ended; None if the deadline passed first (then
        its tree is killed). The stream can end early (a read timeout on a long silent
        command), so the engine's state decides, not the stream."""
        import docker.errors

        while True:
            try:
                info = self.api.exec_inspect(exec_id)
            except docker.errors.APIError as exc:
                raise SandboxError(f"exec in session {self.id}: {exc}") from exc
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            if deadline is not None and time.monotonic() > deadline:
                self._kill_marked(marker)
                return None
            time.sleep(0.2)

    def _cancel(self, exec_id: str, marker: str, *, patience: float = 1.0) -> None:
        """Kill an exec's tree and wait until the engine reports it ended (an exec may
        start a moment after exec_start answers, so one kill is not enough); past
        `patience`, halt the session. A second is enough for the marker's kill to land:
        what outlives it is a tree the kill cannot see (the verifier's supervisor is not
        dumpable, so its environment is unreadable), and waiting longer only delays the
        halt that ends it (it cost every withdrawn verifier exec 10 s)."""
        import docker.errors

        deadline = time.monotonic() + patience
        while True:
            self._kill_marked(marker)
            try:
                info = self.api.exec_inspect(exec_id)
            except docker.errors.APIError:
                return  # the session is gone, and the exec with it
            if not info.get("Running") and info.get("ExitCode") is not None:
                return
            if time.monotonic() > deadline or self._stopped or self._halted:
                self.halt()  # whatever it is doing, it ends with the session
                return
            time.sleep(0.05)

    def _run_root(self, argv: list[str]) -> None:
        exec_id = self.api.exec_create(self.container, argv, user="0", stdout=True, stderr=True)
        self.api.exec_start(exec_id["Id"])

    def _kill_marked(self, marker: str) -> None:
        for _ in range(2):  # a second pass catches forks racing the first
            try:
                self._run_root(["/bin/sh", "-c", KILL_MARKED, "kill-marked", marker])
            except Exception:
                self.kill_all()
                return

    # -- files ------------------------------------------------------------------------
    def copy_in(self, src: Path, dest: str, *, own_tools: bool = False) -> None:
        """Copy a host file or directory to `dest` (the copy's own path; a directory's
        contents merge into it). Links are copied as links. `own_tools`: through the
        container's own tar in one exec (see copy_in_by_exec)."""
        if own_tools:
            self.copy_in_by_exec(src, dest)
            return
        put_path(self.api, self.container, Path(src),
                 posixpath.normpath(posixpath.join(self.image.workdir, dest)))

    def copy_in_by_exec(self, src: Path, dest: str, *, timeout: float = 120) -> None:
        """copy_in through the container's own `tar` in one exec with stdin: cheaper than
        the engine's archive upload (no helper process in the engine). The container's
        tools run, so use it only where its user may have changed them at no one's cost
        but their own (an agent bringing files into its own session); falls back to
        copy_in when that tar fails or is missing."""
        src = Path(src)
        if not os.path.lexists(src):
            raise SandboxError(f"copy_in: {src} does not exist")
        dest = posixpath.normpath(posixpath.join(self.image.workdir, dest))
        parent, name = posixpath.split(dest)
        script = 'mkdir -p -- "$1" && exec tar --numeric-owner -xpf - -C "$1"'
        result = self.exec(["/bin/sh", "-c", script, "copy-in", parent or "/"], user="0",
                           timeout=timeout, workdir="/", stdin=tar_of(src, name))
        if result.exit_code != 0 or result.timed_out:
            self.copy_in(src, dest)

    def empty(self, paths: list[str], *, make_dir: str | None = None) -> None:
        """See Session.empty: one exec of the system's shell and find, as root."""
        if not paths and make_dir is None:
            return
        script = _EMPTY + (f'; mkdir -p -m 0755 -- "{make_dir}"' if make_dir else "")
        # the system's tools, never the image's PATH (which may lie in a state root)
        result = self.exec(["/bin/sh", "-c", script, "empty", *paths], timeout=120,
                           user="0", workdir="/", env={"PATH": DEFAULT_PATH})
        if result.exit_code != 0 or result.timed_out:
            raise SandboxError(f"cannot empty {', '.join(paths)} in session {self.id}: "
                               f"{result.stderr[-300:]}")

    def copy_out(self, src: str, dest: Path, *, bounds: TransferBounds | None = None) -> None:
        """Copy a container path to `dest` on the host (the copy's own path). Links are
        copied as links, never followed: `src` itself a link (the engine's archive would
        follow it) becomes a link to where the engine resolves it, nothing under it is
        read. With `bounds`, the engine's archive is read as a stream and abandoned at
        the first bound passed (TransferLimit)."""
        src = posixpath.normpath(posixpath.join(self.image.workdir, src))
        dest = Path(dest)
        if self.output is not None and src == self.output.target and self._halted:
            self._copy_output(dest, bounds)  # no process is left to write it
            return
        try:
            get_path(self.api, self.container, self.id, src, dest, bounds)
        except SandboxError as exc:
            # The engine mounts the container to read it and may need a block or an inode
            # on its layer: on a session disk the agent filled, that is the agent's doing.
            if "no space left on device" in str(exc) and self._disk_full():
                raise SessionDiskFull(f"copy_out {src}: the session's disk is full; the "
                                      "engine cannot read it") from exc
            raise

    def _disk_full(self) -> bool:
        """The session's own disk has (almost) no block or inode left."""
        if self.host_dir is None or self.host_dir.disk is None:
            return False
        try:
            st = os.statvfs(self.host_dir.disk.mount)
        except OSError:
            return False
        return st.f_bavail * st.f_frsize < (1 << 20) or st.f_favail < 16

    def _copy_output(self, dest: Path, bounds: TransferBounds | None) -> None:
        """copy_out of the output directory of a halted session: a host copy (links as
        links, never followed; devices, fifos and sockets skipped) within `bounds`."""
        assert self.output is not None
        host = self.output.host
        if self._stopped or not os.path.isdir(host) or os.path.islink(host):
            raise MissingPath(f"copy_out: {self.output.target} does not exist in session "
                              f"{self.id}")
        try:
            copy_tree(host, dest, Budget(bounds, self.output.target) if bounds else None)
        except BaseException:
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest, ignore_errors=True)
            elif os.path.lexists(dest):
                dest.unlink()
            raise

    def read_bytes(self, path: str) -> bytes:
        """Contents of one file (a convenience over copy_out)."""
        with tempfile.TemporaryDirectory() as tmp:
            self.copy_out(path, Path(tmp) / "f")
            return (Path(tmp) / "f").read_bytes()

    def changed_paths(self) -> list[str]:
        """Paths changed, added or deleted since the container started, as the engine
        (not the container, which its processes may have tampered with) reports them.
        Used by shared-mode verification to tell whether the verifier's runtime moved."""
        import docker.errors

        try:
            changes = self.api.diff(self.container) or []
        except docker.errors.APIError as exc:
            raise SandboxError(f"cannot list changes of session {self.id}: {exc}") from exc
        return [str(c.get("Path", "")) for c in changes]

    # -- lifecycle --------------------------------------------------------------------
    def kill_all(self) -> None:
        """SIGKILL every process but PID 1 (the idle anchor), by PID 1, and return once
        they are gone (docker_anchor.py): nothing from the session's files runs."""
        if self._stopped or self._halted:
            return
        end_all_but_anchor(self.api, self.container, self.id)

    def halt(self) -> None:
        """End every process in the session, PID 1 included, and keep the container's
        files: copy_out still works (the engine reads a stopped container's filesystem);
        exec no longer does. One engine call (SIGKILL, no grace period): when
        the pid namespace's PID 1 dies the kernel kills every other process in it, and
        the engine reports the container stopped only after that, so nothing the agent
        started (setsid, double fork, a late exec) outlives this call."""
        import docker.errors

        if self._stopped or self._halted:
            return
        self._halted = True
        try:
            self.api.kill(self.container)
        except docker.errors.NotFound as exc:
            raise SandboxError(f"cannot halt session {self.id}: it is gone ({exc})") from exc
        except docker.errors.APIError as exc:
            if "is not running" not in str(exc):
                raise SandboxError(f"cannot halt session {self.id}: {exc}") from exc
        try:  # a SIGKILL returns once stopped; waiting makes that explicit and cheap
            status = self.api.wait(self.container, timeout=60, condition="not-running")
        except Exception as exc:
            raise SandboxError(f"session {self.id} did not stop after SIGKILL: {exc}") from exc
        if not isinstance(status, dict):
            raise SandboxError(f"session {self.id}: unexpected wait answer {status!r}")

    def stop(self) -> None:
        """Remove the container with force (SIGKILL, no grace period), then its disk.
        Idempotent. A container whose layer is on the disk is halted first and the disk
        taken off the layer, so the engine removes only its own, empty directory."""
        import docker.errors

        if self._stopped:
            return
        if self.host_dir is not None and self.host_dir.layer is not None:
            with contextlib.suppress(SandboxError):
                self.halt()  # the engine unmounts the layer once the container stops
            self.host_dir.detach_layer()
        self._stopped = True
        try:
            self.api.remove_container(self.container, force=True, v=True)
        except docker.errors.NotFound:
            pass  # already gone (e.g. removed by the reaper)
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise SandboxError(f"cannot remove container {self.id}: {exc}") from exc
        finally:
            if self.host_dir is not None:  # its disk's unmount writes back: not waited for
                later(self.host_dir.remove)

    def __enter__(self) -> DockerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
