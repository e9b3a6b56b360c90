"""The `local` backend's entry: is bubblewrap usable here, build an image, start a session.

Images are directories built from a Dockerfile subset (localbuild); a session is a
private copy of one (local.LocalSession).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from posttrain_arena.sandbox.base import ImageRef, Limits, Mount, PrerequisiteError, SandboxError
from posttrain_arena.sandbox.bwrap import bwrap_path
from posttrain_arena.sandbox.cgroups import SessionCgroup
from posttrain_arena.sandbox.diskcap import (
    VERIFIER_INODES,
    DiskCap,
    bound_text,
    disk_support,
    inodes_for,
    make_disk,
    verifier_room,
)
from posttrain_arena.sandbox.local import OUTPUT_ROOT, LocalSession
from posttrain_arena.sandbox.localbuild import build_local_image, image_dir, read_meta
from posttrain_arena.sandbox.localfs import SESSION_PREFIX, remove_tree, sessions_dir
from posttrain_arena.sandbox.owner import pid_namespace


class LocalBackend:
    """Sandboxes made with bubblewrap on this host."""

    name = "local"

    def available(self) -> tuple[bool, str]:
        """Whether bwrap is installed and can create namespaces here."""
        try:
            bwrap = bwrap_path()
        except PrerequisiteError as exc:
            return False, str(exc)
        probe = subprocess.run(
            [
                bwrap,
                "--unshare-all",
                "--die-with-parent",
                "--ro-bind",
                "/",
                "/",
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "true",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if probe.returncode != 0:
            return False, (
                f"bwrap cannot create a sandbox here: {probe.stderr.strip()}; fix: enable "
                "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) "
                "or run as root"
            )
        group = SessionCgroup.create("probe-" + uuid.uuid4().hex[:8], Limits())
        if group is None:
            return True, (
                f"bubblewrap {bwrap} works (rlimits only: no writable cgroup, so the "
                f"process limit is not enforced for root); disk: {self.disk_mode()}"
            )
        group.remove()
        return True, (f"bubblewrap {bwrap} works (cgroup limits: pids, memory, cpu); "
                      f"disk: {self.disk_mode()}")

    def disk_bound(self, storage_mb: int) -> str:
        """How a session with `storage_mb` of storage is bounded here, in words (what
        its `disk_bound` says; for trial records and doctor)."""
        if disk_support().works:
            return bound_text(storage_mb, "a file system of its own, with the image's files")
        return self.disk_mode()

    @staticmethod
    def disk_mode() -> str:
        """How sessions' writes are bounded in total here, in words."""
        support = disk_support()
        if support.works:
            return f"each session's files on a size-capped {support.detail}"
        return (f"UNBOUNDED in total, only each file is capped ({support.detail}; run as "
                "root with loop devices and mkfs.ext4)")

    def build(self, context: Path, *, timeout: float, task_name: str = "") -> ImageRef:
        """Build (or reuse, by content hash) a local image from a Dockerfile subset."""
        return build_local_image(Path(context), timeout=timeout, task_name=task_name)

    def start(
        self,
        image: ImageRef,
        *,
        limits: Limits,
        mounts: list[Mount] | None = None,
        labels: Mapping[str, str] | None = None,
        output_dir: str | None = None,
    ) -> LocalSession:
        """A new session with a private copy of the image's files, on a file system of
        its own whose size is the image's files plus the task's storage (diskcap), where
        the host allows it. `output_dir` (a verifier's session) makes it hold an
        agent's whole disk (the state, which may have used the image's space too) beside
        the image's emptied files, and room for the verifier's own files
        (diskcap.verifier_room); nothing more: every writable root (OUTPUT_ROOT among
        them) is a directory of that file system, which copy_out reads directly."""
        src = image_dir(image)
        meta = read_meta(src)
        state = Path(tempfile.mkdtemp(prefix=SESSION_PREFIX, dir=sessions_dir()))
        disk: DiskCap | None = None
        try:
            owner = f"{os.getpid()} {time.time():.0f} {pid_namespace()}\n"
            (state / "owner").write_text(owner)
            if disk_support().works:
                image_bytes, image_entries = _image_size(src)
                payload = (limits.storage_mb << 20) + image_bytes
                inodes = inodes_for(limits.storage_mb << 20) + image_entries
                if output_dir is not None:  # a verifier's: see the docstring
                    payload += image_bytes + verifier_room(limits.storage_mb)
                    inodes += image_entries + VERIFIER_INODES
                disk = make_disk(state / "fs", payload, inodes=inodes)
                bound = self.disk_bound(limits.storage_mb)
                copy = [str(src / "fs") + "/.", str(state / "fs")]
            else:
                bound = self.disk_mode()
                copy = [str(src / "fs"), str(state / "fs")]
            subprocess.run(["cp", "-a", "--reflink=auto", *copy], check=True,
                           capture_output=True)
            return LocalSession(
                image,
                state_dir=state,
                roots=[*meta.roots, OUTPUT_ROOT],
                limits=limits,
                mounts=mounts,
                labels=labels,
                base_fs=src / "fs",
                disk=disk,
                disk_bound=bound,
            )
        except (OSError, subprocess.CalledProcessError, SandboxError) as exc:
            if disk is not None:
                disk.release()
            remove_tree(state)
            raise SandboxError(f"cannot start a local session from {image.tag}: {exc}") from exc


_image_sizes: dict[str, tuple[int, int]] = {}


def _image_size(image: Path) -> tuple[int, int]:
    """(bytes, entries) an image's files take on a disk (4 KiB blocks; an image never
    changes once built, so counted once per process)."""
    key = str(image)
    if key not in _image_sizes:
        total, entries = 0, 0
        for dirpath, dirs, files in os.walk(image / "fs"):
            for name in [*dirs, *files]:
                entries += 1
                with contextlib.suppress(OSError):
                    total += -(-os.lstat(os.path.join(dirpath, name)).st_size // 4096) * 4096
        _image_sizes[key] = (total, entries)
    return _image_sizes[key]
