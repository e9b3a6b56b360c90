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
from posttrain_arena.sandbox.diskcap import (
    VERIFIER_INODES,
    bound_text,
    disk_support,
    inodes_for,
    verifier_room,
)
from posttrain_arena.sandbox.docker_anchor import ANCHOR
from posttrain_arena.sandbox.docker_disk import SessionDir
from posttrain_arena.sandbox.docker_session import DockerSession
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


class _Again(Exception):
    """The engine refused storage_opt after all: start again without it."""


class DockerBackend:
    """Sandboxes as Docker containers."""

    name = "docker"

    def __init__(self, reap_after_hours: float | None = None) -> None:
        self._client: Any = None
        self._guard = threading.Lock()
        self._build_locks: dict[str, threading.Lock] = {}
        slots = int(os.environ.get("ARENA_BUILD_CONCURRENCY", "2"))
        self._build_slots = threading.BoundedSemaphore(max(1, slots))
        self._storage_opt: bool | None = None
        self._host_output: bool | None = None
        self._image_volumes: dict[str, list[str]] = {}
        self._driver: str | None = None
        self._layer_cap: str | None = None
        """Why the writable layer cannot go on a disk here ('' when it can; None: not
        known yet, the first session on a disk checks that the bound took)."""
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
        return True, (f"Docker {info.get('ServerVersion', '?')}, {info.get('Driver')}; "
                      f"disk: {self.disk_mode()[1]}")

    def disk_mode(self) -> tuple[str, str]:
        """How sessions' writes are bounded in total here: ('engine' | 'disk' | 'file',
        in words). engine: the storage driver caps the container (storage_opt); disk:
        its writable layer on a size-capped file system of its own (docker_disk); file:
        neither is possible, only the per-file limit holds, unbounded in total."""
        if self.storage_limit_supported():
            return "engine", "the storage driver caps each container (storage_opt size)"
        support = disk_support()
        if self._driver is None:
            self._driver = str(self.client.info().get("Driver", ""))
        driver = self._driver
        why = (support.detail if not support.works
               else f"storage driver {driver}, not overlay2" if driver != "overlay2"
               else "user-namespace remapping" if not self.host_output_supported()
               else self._layer_cap)
        if not why:
            return "disk", f"each container's writable layer on a {support.detail}"
        return "file", (f"UNBOUNDED in total, only each file is capped ({why}; the storage "
                        "driver cannot cap containers: run as root with loop devices, or "
                        "give the engine overlay2 on xfs with pquota)")

    def disk_bound(self, storage_mb: int) -> str:
        """How a session with `storage_mb` of storage is bounded here, in words (what
        its `disk_bound` says; for trial records and doctor)."""
        mode, how = self.disk_mode()
        return how if mode == "file" else bound_text(storage_mb, how)

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
        """Create and start a container from `image` with `limits` applied, its writes
        bounded in total as disk_mode() says (docker_disk). With `output_dir` and a disk
        for the session, an empty directory on that disk is bound there read-write
        where the engine maps the container's root to this host's (no user-namespace
        remapping): once the session is halted, copy_out reads it on the host instead
        of through the engine's archive API (a helper process in the engine); without
        a disk it stays in the container, inside the container's bound."""
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
        mode, _ = self.disk_mode()
        target = (posixpath.normpath(posixpath.join(image.workdir, output_dir))
                  if output_dir is not None else None)
        payload = limits.storage_mb << 20
        volumes = self._volumes(image)
        host_dir = None
        if (mode == "disk" or (mode == "engine" and (target or volumes))) and (
                disk_support().works and self.host_output_supported()):
            owner = f"{os.getpid()} {time.time():.0f} {pid_namespace()}\n"
            room = verifier_room(limits.storage_mb) if target is not None else 0
            inodes = inodes_for(payload) + (VERIFIER_INODES if target is not None else 0)
            host_dir = SessionDir.create(sid, owner, payload=payload + room, inodes=inodes,
                                         output_target=target)
        host_kwargs: dict[str, Any] = dict(
            network_mode="bridge" if limits.allow_internet else "none",
            nano_cpus=int(limits.cpus * 1e9),
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            pids_limit=limits.pids_limit,
            cap_drop=["ALL"],
            cap_add=list(SESSION_CAPABILITIES),
            security_opt=["no-new-privileges"],
            # PID 1 prints nothing; what a process writes to its stdout must not grow a
            # host file outside the session's bound
            log_config={"type": "none", "config": {}},
            # no single file may exceed the task's storage (kept under every other bound)
            ulimits=[Ulimit(name="fsize", soft=payload, hard=payload)],
        )
        if mode == "engine":
            host_kwargs["storage_opt"] = {"size": f"{limits.storage_mb}M"}
        try:
            if host_dir is not None:
                binds.update(host_dir.binds(allow_internet=limits.allow_internet,
                                            volumes=volumes))
            host_kwargs["binds"] = binds or None
            try:
                container = self._create(api, image, sid, all_labels, host_kwargs)
            except docker.errors.ImageNotFound as exc:
                raise SandboxError(f"image {image.tag} is gone; build it again ({exc})") from exc
            bound = self.disk_bound(limits.storage_mb)
            if mode == "engine" and not self.storage_limit_supported():
                api.remove_container(container, force=True)  # it refused storage_opt
                raise _Again()
            try:
                if mode == "disk":
                    assert host_dir is not None
                    if not host_dir.attach_layer(api, container):
                        raise SandboxError("the engine's storage driver is not overlay2")
                api.start(container)
                if mode == "disk" and self._layer_cap is None:
                    self._check_layer_cap(api, container, host_dir)
            except BaseException as exc:
                with contextlib.suppress(Exception):
                    api.remove_container(container, force=True)
                if isinstance(exc, docker.errors.APIError):
                    raise SandboxError(f"cannot start a container from {image.tag}: "
                                       f"{exc}") from exc
                raise
        except BaseException as exc:
            if host_dir is not None:
                host_dir.remove()
            if isinstance(exc, _Again):
                return self.start(image, limits=limits, mounts=mounts, labels=labels,
                                  output_dir=output_dir)
            raise
        return DockerSession(api, container, sid, image, host_dir=host_dir, disk_bound=bound)

    def _check_layer_cap(self, api: Any, container: str, host_dir: SessionDir | None) -> None:
        """Once per backend: the started container's root file system reports the disk's
        size (overlayfs answers statfs from its upper layer), else the engine did not
        mount the layer it was given (another mount namespace): SandboxError, and
        later sessions say they are unbounded (disk_mode)."""
        assert host_dir is not None and host_dir.disk is not None
        pid = (api.inspect_container(container).get("State") or {}).get("Pid") or 0
        try:
            root, disk = os.statvfs(f"/proc/{pid}/root"), os.statvfs(host_dir.disk.mount)
            took = root.f_blocks * root.f_frsize == disk.f_blocks * disk.f_frsize
        except OSError:
            took = False
        if not took:
            self._layer_cap = ("the engine did not use the layer on the session's disk "
                               "(another mount namespace?)")
            raise SandboxError(f"session {container[:12]}: {self._layer_cap}; start again "
                               "(sessions are now unbounded in total, doctor says so)")
        self._layer_cap = ""

    def _volumes(self, image: ImageRef) -> list[str]:
        """The image's VOLUMEs (the engine would make each an unbounded host volume);
        looked up once per image."""
        key = image.image_id or image.tag
        if key not in self._image_volumes:
            try:
                config = self.client.api.inspect_image(image.tag).get("Config") or {}
            except Exception:
                return []
            self._image_volumes[key] = [str(v) for v in (config.get("Volumes") or {})]
        return self._image_volumes[key]

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
