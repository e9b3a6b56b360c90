"""The `local` backend's entry: is bubblewrap usable here, build an image, start a session.

Images are directories built from a Dockerfile subset (localbuild); a session is a
private copy of one (local.LocalSession).
"""

from __future__ import annotations

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
from posttrain_arena.sandbox.local import OUTPUT_ROOT, LocalSession
from posttrain_arena.sandbox.localbuild import build_local_image, image_dir, read_meta
from posttrain_arena.sandbox.localfs import SESSION_PREFIX, remove_tree, sessions_dir
from posttrain_arena.sandbox.owner import pid_namespace


class LocalBackend:
    """Sandboxes made with bubblewrap on this host."""

    name = "local"
    host_copies = True

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
                "process limit is not enforced for root)"
            )
        group.remove()
        return True, f"bubblewrap {bwrap} works (cgroup limits: pids, memory, cpu)"

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
        """A new session with a private copy of the image's files. `output_dir` needs
        nothing more here: every writable root (OUTPUT_ROOT among them) is a host
        directory, which copy_out reads directly."""
        src = image_dir(image)
        meta = read_meta(src)
        state = Path(tempfile.mkdtemp(prefix=SESSION_PREFIX, dir=sessions_dir()))
        try:
            subprocess.run(
                ["cp", "-a", "--reflink=auto", str(src / "fs"), str(state / "fs")],
                check=True,
                capture_output=True,
            )
            owner = f"{os.getpid()} {time.time():.0f} {pid_namespace()}\n"
            (state / "owner").write_text(owner)
            return LocalSession(
                image,
                state_dir=state,
                roots=[*meta.roots, OUTPUT_ROOT],
                limits=limits,
                mounts=mounts,
                labels=labels,
                base_fs=src / "fs",
            )
        except (OSError, subprocess.CalledProcessError) as exc:
            remove_tree(state)
            raise SandboxError(f"cannot start a local session from {image.tag}: {exc}") from exc
