"""The `local` backend: bubblewrap on the host, no Docker needed.

Each `exec` is one `bwrap` invocation over the session's state directory:
`--unshare-all` (no network but loopback, unless the task allows the internet), its own
pid namespace (`--die-with-parent`, so killing bwrap kills the whole tree), the host's
system directories read-only, `/dev`, `/proc`, and the writable roots (see localfs)
bound from the session. Files persist between execs; processes do not: anything an exec
leaves in the background dies when it returns (which also means an agent cannot leave a
process behind to tamper with verification). Limits: a cgroup per session (pids, memory,
cpu) where the host allows it, plus rlimits (file size, and address space when no memory
cgroup). Images are directories built from a Dockerfile subset (see localbuild).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import stat
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from posttrain_arena.sandbox.base import (
    ExecResult,
    ImageRef,
    Limits,
    MissingPath,
    Mount,
    SandboxError,
    Stdin,
    TransferBounds,
)
from posttrain_arena.sandbox.bwrap import base_bwrap_args, bwrap_path
from posttrain_arena.sandbox.cgroups import SessionCgroup
from posttrain_arena.sandbox.diskcap import DiskCap
from posttrain_arena.sandbox.janitor import later
from posttrain_arena.sandbox.localfs import (
    Budget,
    SandboxFS,
    changed_since,
    copy_tree,
    discard,
    normalize,
    remove_tree,
)
from posttrain_arena.sandbox.process import run_with_deadline
from posttrain_arena.task_format.trust import DEFAULT_PATH

OUTPUT_ROOT = "/logs"
"""A writable root of every session (not of builds): where a verifier's output goes."""


def _uid_of(user: str | None) -> int | None:
    if user is None or user in ("", "root", "0"):
        return None
    if user.isdigit():
        return int(user)
    try:
        return pwd.getpwnam(user.split(":")[0]).pw_uid
    except KeyError as exc:
        raise SandboxError(
            f"user {user!r} does not exist on this host; the local backend runs as root "
            "or a numeric uid (use the docker backend for users created in the image)"
        ) from exc


class LocalSession:
    """One local sandbox: a state directory, a cgroup, and bwrap per exec."""

    host_copies = True  # see Session.host_copies: its files are a host directory

    def __init__(
        self,
        image: ImageRef,
        *,
        state_dir: Path,
        roots: list[str],
        limits: Limits,
        mounts: list[Mount] | None,
        labels: Mapping[str, str] | None,
        base_fs: Path | None = None,
        disk: DiskCap | None = None,
        disk_bound: str = "",
    ) -> None:
        """`base_fs`: the image's files the session's `fs/` was copied from (what
        changed_paths compares against; None: every file counts as added). `disk`: the
        size-capped file system mounted at `fs/` (released at stop); `disk_bound`: how
        the session's writes are bounded in total, in words."""
        self.id = state_dir.name
        self.image = image
        self.state_dir = state_dir
        self.fs = SandboxFS(
            state_dir / "fs",
            roots,
            [(normalize(m.target), Path(m.source), not m.read_only) for m in mounts or []],
        )
        self.base_fs = base_fs
        self.copied_ns = time.time_ns()
        """When the private copy of the image's files was complete: a file whose
        inode changed later (ctime, which no process can set) was changed by the
        session."""
        self.limits = limits
        self.mounts = list(mounts or [])
        self.labels = dict(labels or {})
        self.disk = disk
        self.disk_bound = disk_bound
        self.cgroup = SessionCgroup.create(self.id, limits)
        self._bwrap = bwrap_path()
        self._running: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._stopped = False
        self._halted = False

    # -- exec -------------------------------------------------------------------------
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
        """Run a command in a fresh bwrap over this session's files (see module doc)."""
        if self._stopped or self._halted:
            state = "stopped" if self._stopped else "halted"
            raise SandboxError(f"session {self.id} is {state}")
        argv = ["bash", "-lc", command] if isinstance(command, str) else list(command)
        if not argv:
            raise SandboxError("exec: empty command")
        cwd = normalize(workdir or self.image.workdir)
        full_env = {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb"}
        full_env.update(self.image.env)
        full_env.update(env or {})
        args = [
            self._bwrap,
            *base_bwrap_args(
                self.fs, allow_internet=self.limits.allow_internet, mounts=self.mounts
            ),
        ]
        args += ["--chdir", cwd, "--clearenv"]
        for key, value in full_env.items():
            args += ["--setenv", key, value]
        uid = _uid_of(user)
        if uid is not None:
            args += ["--uid", str(uid), "--gid", str(uid)]
        if cwd != "/" and not self.fs.host_path(cwd, write=False).exists():
            raise SandboxError(f"exec: workdir {cwd} does not exist in session {self.id}")
        # The first thing that runs inside writes one byte on this pipe (and closes it)
        # before the command starts: without it, a failure is the sandbox's (setup), never
        # the command's, and a command cannot pass its own failure off as one.
        status_r, status_w = os.pipe()
        ready = f'printf x >&{status_w} && exec {status_w}>&- && exec "$@"'
        args += ["--", "/bin/bash", "-c", ready, "arena-exec", *argv]
        try:
            result = run_with_deadline(
                self._limited(args),
                timeout=timeout,
                env={"PATH": DEFAULT_PATH},
                on_output=on_output,
                kill_extra=self.cgroup.kill if self.cgroup is not None else None,
                register=self._register,
                pass_fds=(status_w,),
                after_start=lambda: os.close(status_w),
                stdin=stdin,
            )
            with os.fdopen(status_r, "rb") as fh:
                status = fh.read()
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(status_r)
            raise
        if status != b"x" and not result.timed_out:
            raise SandboxError(
                f"bubblewrap could not set up session {self.id}: {result.stderr.strip()[-500:]}"
            )
        if (
            not result.timed_out
            and result.exit_code == 137
            and self.cgroup is not None
            and self.cgroup.oom_killed()
        ):
            return ExecResult(
                result.exit_code,
                result.stdout,
                result.stderr + "\n[posttrain-arena: killed by the memory limit]\n",
                False,
                result.duration_sec,
            )
        return result

    def _register(self, proc: subprocess.Popen[bytes], running: bool) -> None:
        with self._lock:
            if running:
                self._running.add(proc)
            else:
                self._running.discard(proc)

    def _limited(self, args: list[str]) -> list[str]:
        """Wrap bwrap in a shell that joins the session's cgroups and sets rlimits before
        exec'ing it (rather than preexec_fn, which is unsafe with threads)."""
        # POSIX sh ulimit units: -f in 512-byte blocks, -v in KiB
        steps = [f"ulimit -f {(self.limits.storage_mb << 20) // 512}", "ulimit -c 0"]
        if self.cgroup is None:  # no memory cgroup: cap each process's address space
            steps.append(f"ulimit -v {max(self.limits.memory_mb, 256) << 10}")
        else:
            for d in self.cgroup.dirs:
                steps.append(f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))}")
        script = " && ".join(steps) + ' || exit 125; exec "$@"'
        return ["/bin/sh", "-c", script, "arena-enter", *args]

    # -- files ------------------------------------------------------------------------
    def copy_in(self, src: Path, dest: str, *, own_tools: bool = False) -> None:
        """Copy a host file or directory to `dest` (the copy's own path; a directory's
        contents are merged into it). Links are copied as links. The copy is made on
        the host, so `own_tools` changes nothing."""
        if not os.path.lexists(src):
            raise SandboxError(f"copy_in: {src} does not exist")
        target = self.fs.host_path(normalize(dest, self.image.workdir), write=True)
        try:
            copy_tree(Path(src), target)
        except OSError as exc:  # the session's disk is full, or the agent made it so
            raise SandboxError(f"copy_in {src} -> {dest}: {exc}") from exc

    def copy_out(self, src: str, dest: Path, *, bounds: TransferBounds | None = None) -> None:
        """Copy a sandbox path to `dest` on the host (the copy's own path). Links are
        copied as links, never followed; `bounds` cap what may travel."""
        try:
            host = self.fs.host_path(normalize(src, self.image.workdir), write=False)
        except SandboxError as exc:  # e.g. a link the agent put in its path
            raise MissingPath(f"copy_out: {src} is not reachable in session {self.id}: "
                              f"{exc}") from exc
        if not os.path.lexists(host):
            raise MissingPath(f"copy_out: {src} does not exist in session {self.id}")
        try:
            copy_tree(host, Path(dest), Budget(bounds, src) if bounds else None)
        except BaseException:
            _remove_quietly(Path(dest))
            raise

    def empty(self, paths: list[str], *, make_dir: str | None = None) -> None:
        """See Session.empty: done on the host, in the session's own files (no process
        runs in the session, so nothing races it). Each path is resolved as the sandbox
        sees it (a link the image planted in a parent stays inside the sandbox's view),
        its last component never followed; entries are renamed into the session's trash
        (one metadata operation each) and deleted with the session."""
        if self._stopped or self._halted:
            raise SandboxError(f"session {self.id} is {'stopped' if self._stopped else 'halted'}")
        trash = self.fs.state / ".arena-emptied"  # same file system: renames work
        trash.mkdir(exist_ok=True)
        for path in paths:
            host = self.fs.host_path(normalize(path, self.image.workdir), write=True)
            try:
                info = os.lstat(host)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(info.st_mode):
                for entry in os.listdir(host):
                    os.rename(host / entry, trash / uuid.uuid4().hex)
            else:
                os.unlink(host)
        if make_dir is not None:
            target = self.fs.host_path(normalize(make_dir, self.image.workdir), write=True)
            target.mkdir(mode=0o755, parents=True, exist_ok=True)

    # -- lifecycle --------------------------------------------------------------------
    def kill_all(self) -> None:
        """Kill every running exec and anything it left behind."""
        with self._lock:
            procs = list(self._running)
        for proc in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, 9)
        if self.cgroup is not None:
            self.cgroup.kill()

    def halt(self) -> None:
        """Kill every process for good; the files stay readable (copy_out works)."""
        self._halted = True
        self.kill_all()

    def changed_paths(self) -> list[str]:
        """Paths of the writable roots changed, added or deleted since the session
        started, read on the host (what the session's processes cannot hide: an inode
        whose ctime is past the session's copy of the image, an entry the image lacks,
        an entry of the image gone). None of the system paths: they are bound
        read-only from the host."""
        return changed_since(self.fs, self.base_fs, self.copied_ns)

    def stop(self) -> None:
        """Kill everything and delete the session's files and groups, on the janitor's
        thread (see janitor.py: done before the process exits). Idempotent. With a
        disk, its files go with it (unmounted: the loop device frees them)."""
        if self._stopped:
            return
        self._stopped = True
        self.kill_all()
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.disk is not None:  # the unmount writes back; the caller need not wait
            later(_remover(self.disk, self.state_dir))
        else:
            discard(self.state_dir)

    def __enter__(self) -> LocalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _remover(disk: DiskCap, state: Path) -> Callable[[], None]:
    def remove() -> None:
        disk.release()
        remove_tree(state)
    return remove


def _remove_quietly(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        remove_tree(path)
