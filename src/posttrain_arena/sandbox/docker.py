"""The `docker` backend: the Docker Engine API through docker-py (no CLI, no compose).

Images are tagged `arena-env:<hash16>` from a content hash of the build context, built
once (an in-process lock plus a file lock per hash) and reused while the tag exists;
builds take a slot of their own semaphore (ARENA_BUILD_CONCURRENCY, default 2) so they
never starve trials. A session is one container whose PID 1 is an idle shell loop that
reaps zombies and ends every other process on a signal (docker_anchor.py); commands run
through the exec API. Containers
carry `posttrain-arena=1` labels and are removed with force (SIGKILL, no grace period).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import posixpath
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from posttrain_arena.paths import cache_home
from posttrain_arena.sandbox.base import (
    SESSION_CAPABILITIES,
    BuildError,
    ImageRef,
    Limits,
    Mount,
    PrerequisiteError,
    SandboxError,
)
from posttrain_arena.sandbox.docker_anchor import ANCHOR
from posttrain_arena.sandbox.docker_session import DockerSession, OutputDir
from posttrain_arena.sandbox.engine import LABEL, docker_client
from posttrain_arena.sandbox.imagemap import (
    EngineImages,
    apply_image_map,
    ensure_base_images,
    load_image_map,
)
from posttrain_arena.sandbox.owner import owner_label, pid_namespace
from posttrain_arena.sandbox.reaper import reap_docker
from posttrain_arena.task_format.hashing import tree_hash

FORMAT = "docker-image-v1"


def _locks_dir() -> Path:
    path = cache_home() / "locks"
    path.mkdir(parents=True, exist_ok=True)
    return path


BUILD_NETWORK_ENV = "ARENA_BUILD_NETWORK"
"""The network an image build's RUN steps get: `none` (the default) or, where the
operator allows it, `default` (the engine's bridge)."""


def build_network_mode() -> str:
    """The build network the operator chose ($ARENA_BUILD_NETWORK; none by default)."""
    mode = os.environ.get(BUILD_NETWORK_ENV, "none").strip() or "none"
    if mode not in ("none", "default"):
        raise PrerequisiteError(f"{BUILD_NETWORK_ENV}={mode!r}: use 'none' (no network for "
                                "image builds, the default) or 'default' (the engine's "
                                "bridge, for Dockerfiles that download)")
    return mode


class DockerBackend:
    """Sandboxes as Docker containers."""

    name = "docker"
    host_copies = False

    def __init__(self, reap_after_hours: float | None = None) -> None:
        self._client: Any = None
        self._guard = threading.Lock()
        self._build_locks: dict[str, threading.Lock] = {}
        slots = int(os.environ.get("ARENA_BUILD_CONCURRENCY", "2"))
        self._build_slots = threading.BoundedSemaphore(max(1, slots))
        self._storage_opt: bool | None = None
        self._host_output: bool | None = None
        hours = reap_after_hours
        if hours is None:
            hours = float(os.environ.get("ARENA_REAP_AFTER_HOURS", "6"))
        self._reap_after = hours * 3600

    @property
    def client(self) -> Any:
        """The docker-py client (connects on first use and reaps old orphans)."""
        with self._guard:
            if self._client is None:
                self._client = docker_client()
                # reaping is housekeeping; never block a start on it
                with contextlib.suppress(Exception):
                    reap_docker(self._reap_after, client=self._client)
            return self._client

    def available(self) -> tuple[bool, str]:
        """Whether an engine answers, with its version and storage-limit support."""
        try:
            info = self.client.info()
        except PrerequisiteError as exc:
            return False, str(exc)
        storage = (
            "storage limit enforced"
            if self.storage_limit_supported()
            else ("no storage limit (needs overlay2 on xfs with pquota, or btrfs/zfs/devicemapper)")
        )
        return True, f"Docker {info.get('ServerVersion', '?')}, {info.get('Driver')}; {storage}"

    def host_output_supported(self) -> bool:
        """Whether a host directory bound into a container is written as the container's
        root sees it and this process can read and remove what it wrote: no user-namespace
        remapping (the container's root would be an unprivileged host user that cannot
        write a directory this process made), and this process is root or the engine is
        rootless (its containers' root is this user)."""
        if self._host_output is None:
            options = [str(o) for o in self.client.info().get("SecurityOptions") or []]
            remapped = any("name=userns" in o for o in options)
            rootless = any("name=rootless" in o for o in options)  # its root: this user
            self._host_output = not remapped and (os.geteuid() == 0 or rootless)
        return self._host_output

    def storage_limit_supported(self) -> bool:
        """Whether the engine's storage driver can cap a container's disk (storage_opt)."""
        if self._storage_opt is None:
            info = self.client.info()
            driver = info.get("Driver", "")
            status = {str(k): str(v) for k, v in info.get("DriverStatus") or []}
            if driver == "overlay2":
                self._storage_opt = status.get("Backing Filesystem", "") == "xfs"
            else:
                self._storage_opt = driver in {"btrfs", "zfs", "devicemapper", "windowsfilter"}
        return self._storage_opt

    # -- build ------------------------------------------------------------------------
    def build(self, context: Path, *, timeout: float, task_name: str = "") -> ImageRef:
        """Build (or reuse, by the context's content hash) `arena-env:<hash16>`."""
        context = Path(context)
        if not (context / "Dockerfile").is_file():
            raise BuildError(f"{context}: no Dockerfile in the build context")
        try:
            text = (context / "Dockerfile").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BuildError(f"{context}/Dockerfile: cannot read it ({exc})") from exc
        mapped = apply_image_map(text, load_image_map())
        engine = EngineImages(self.client)
        ensure_base_images(mapped, f"{context}/Dockerfile", engine.has, engine.pull)
        dockerfile = mapped if mapped != text else None
        basis = tree_hash(context) + FORMAT + engine.base_ids(mapped) + (dockerfile or "")
        digest = hashlib.sha256(basis.encode()).hexdigest()
        tag = f"arena-env:{digest[:16]}"
        found = self._image(tag, digest)
        if found is not None:
            return found
        with self._guard:
            lock = self._build_locks.setdefault(tag, threading.Lock())
        deadline = time.monotonic() + timeout
        with lock, open(_locks_dir() / f"{digest[:16]}.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            found = self._image(tag, digest)
            if found is not None:
                return found
            with self._build_slots:
                log = self._run_build(context, tag, digest, task_name, deadline, dockerfile)
            found = self._image(tag, digest)
            if found is None:
                raise BuildError(f"{context}: build finished without an image:\n{log[-3000:]}")
            return found

    def _run_build(
        self, context: Path, tag: str, digest: str, task_name: str, deadline: float,
        dockerfile: str | None = None,
    ) -> str:
        """Build `context`; `dockerfile`: its Dockerfile's text with the image map applied
        (passed from outside the context, so the package's files stay as they are)."""
        if dockerfile is None:
            return self._stream_build(context, tag, digest, task_name, deadline, None)
        with tempfile.TemporaryDirectory(prefix="arena-dockerfile-") as tmp:
            path = Path(tmp) / "Dockerfile"
            path.write_text(dockerfile, encoding="utf-8")
            return self._stream_build(context, tag, digest, task_name, deadline, str(path))

    def _stream_build(
        self, context: Path, tag: str, digest: str, task_name: str, deadline: float,
        dockerfile: str | None,
    ) -> str:
        lines: list[str] = []
        labels = {LABEL: "1", f"{LABEL}.context": digest, f"{LABEL}.task": task_name[:200]}
        try:
            stream = self.client.api.build(
                path=str(context),
                dockerfile=dockerfile,
                tag=tag,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
                labels=labels,
                timeout=max(1, int(deadline - time.monotonic()) + 5),
                # A contributed Dockerfile's RUN steps get no network unless the operator
                # allows it; the classic builder adds no capability beyond the engine's
                # defaults, and no entitlement (network.host, security.insecure) is asked.
                network_mode=build_network_mode(),
            )
            for chunk in stream:
                if "stream" in chunk:
                    lines.append(str(chunk["stream"]))
                if "error" in chunk:
                    raise BuildError(
                        f"{context}/Dockerfile: {str(chunk['error']).strip()}\n"
                        + "".join(lines)[-3000:]
                    )
                if time.monotonic() > deadline:
                    stream.close()  # disconnecting cancels the build in the engine
                    raise BuildError(f"{context}: build timed out\n" + "".join(lines)[-2000:])
        except BuildError:
            raise
        except Exception as exc:
            if time.monotonic() > deadline:
                raise BuildError(f"{context}: build timed out ({exc})") from exc
            raise BuildError(f"{context}: docker build failed: {exc}") from exc
        return "".join(lines)

    def _image(self, tag: str, digest: str) -> ImageRef | None:
        import docker.errors

        try:
            attrs = self.client.api.inspect_image(tag)
        except docker.errors.ImageNotFound:
            return None
        config = attrs.get("Config") or {}
        env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
        return ImageRef(
            backend="docker",
            tag=tag,
            context_hash="sha256:" + digest,
            workdir=config.get("WorkingDir") or "/root",
            env=env,
            image_id=attrs["Id"],
        )

    # -- sessions ---------------------------------------------------------------------
    def start(
        self,
        image: ImageRef,
        *,
        limits: Limits,
        mounts: list[Mount] | None = None,
        labels: Mapping[str, str] | None = None,
        output_dir: str | None = None,
    ) -> DockerSession:
        """Create and start a container from `image` with `limits` applied. With
        `output_dir`, an empty host directory (see OutputDir) is bound there read-write
        where the engine maps the container's root to this host's (no user-namespace
        remapping): once the session is halted, copy_out reads it on the host instead
        of through the engine's archive API (a helper process in the engine)."""
        import docker.errors
        from docker.types import Ulimit

        api = self.client.api
        sid = "arena-" + uuid.uuid4().hex[:12]
        all_labels = {
            **{str(k): str(v) for k, v in (labels or {}).items()},
            LABEL: "1",
            f"{LABEL}.session": sid,
            f"{LABEL}.owner": owner_label(),
        }
        binds = {
            str(m.source): {"bind": m.target, "mode": "ro" if m.read_only else "rw"}
            for m in mounts or []
        }
        output = None
        if output_dir is not None and self.host_output_supported():
            output = OutputDir.create(
                sid, posixpath.normpath(posixpath.join(image.workdir, output_dir)),
                f"{os.getpid()} {time.time():.0f} {pid_namespace()}\n")
            binds[str(output.host)] = {"bind": output.target, "mode": "rw"}
        host_kwargs: dict[str, Any] = dict(
            network_mode="bridge" if limits.allow_internet else "none",
            nano_cpus=int(limits.cpus * 1e9),
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            pids_limit=limits.pids_limit,
            cap_drop=["ALL"],
            cap_add=list(SESSION_CAPABILITIES),
            security_opt=["no-new-privileges"],
            binds=binds or None,
            # no single file may exceed the task's storage; the only disk cap where the
            # storage driver cannot limit a container's size
            ulimits=[
                Ulimit(name="fsize", soft=limits.storage_mb << 20, hard=limits.storage_mb << 20)
            ],
        )
        if self.storage_limit_supported():
            host_kwargs["storage_opt"] = {"size": f"{limits.storage_mb}M"}
        try:
            try:
                container = self._create(api, image, sid, all_labels, host_kwargs)
            except docker.errors.ImageNotFound as exc:
                raise SandboxError(f"image {image.tag} is gone; build it again ({exc})") from exc
            try:
                api.start(container)
            except docker.errors.APIError as exc:
                api.remove_container(container, force=True)
                raise SandboxError(f"cannot start a container from {image.tag}: {exc}") from exc
        except BaseException:
            if output is not None:
                output.remove()
            raise
        return DockerSession(api, container, sid, image, output=output)

    def _create(
        self,
        api: Any,
        image: ImageRef,
        sid: str,
        labels: dict[str, str],
        host_kwargs: dict[str, Any],
    ) -> str:
        import docker.errors

        try:
            host_config = api.create_host_config(**host_kwargs)
            created = api.create_container(
                image.tag,
                command=["/bin/sh", "-c", ANCHOR],
                name=sid,
                hostname="arena",
                labels=labels,
                host_config=host_config,
                working_dir=image.workdir,
                detach=True,
                stop_signal="SIGKILL",
            )
        except docker.errors.APIError as exc:
            if "storage_opt" in host_kwargs and "storage" in str(exc).lower():
                self._storage_opt = False  # the engine refused it after all; go without
                host_kwargs = {k: v for k, v in host_kwargs.items() if k != "storage_opt"}
                return self._create(api, image, sid, labels, host_kwargs)
            if isinstance(exc, docker.errors.ImageNotFound):
                raise
            raise SandboxError(f"cannot create a container from {image.tag}: {exc}") from exc
        return str(created["Id"])
