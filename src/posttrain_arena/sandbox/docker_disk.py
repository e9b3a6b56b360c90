"""A docker session's directory on the host, and the disk that bounds its writes.

Where the storage driver cannot cap a container (`storage_opt` needs overlay2 on xfs
with pquota, btrfs, zfs), each session gets a size-capped ext4 of its own
(diskcap.make_disk) at `<sessions>/arena-docker-out-<id>/disk`, and everything the
container can write lands on it:

* its writable layer: between create and start, the container's overlay2 layer
  directory (the parent of `GraphDriver.Data.UpperDir`, which holds `diff` and `work`,
  which must share one mount) is copied onto the disk and the copy bound over it, so the
  engine's overlay mount writes there (`attach_layer`); the binds go before the
  container is removed (`SessionDir.remove`);
* `/etc/hosts`, `/etc/hostname`, `/etc/resolv.conf`: files on the disk bound there (the
  engine then leaves out its own, which live outside any bound);
* a verifier's output directory (`out/`), read on the host once the session is halted.

The container's log is off (PID 1 prints nothing; a process writing to /proc/1/fd/1
would otherwise grow a host file). Image VOLUMEs are bound to directories on the disk.
Where the engine caps the container itself, only the output directory is on a disk.
Without a disk (not root, no loop devices) the output stays in the container and the
bound is the engine's, or the per-file limit alone; `DockerSession.disk_bound` says
which.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain_arena.sandbox.diskcap import DiskCap, make_disk, unmount_under
from posttrain_arena.sandbox.localfs import remove_tree, sessions_dir

OUTPUT_PREFIX = "arena-docker-out-"
"""Directories under sessions_dir() holding a docker session's host directory."""

NETWORK_FILES = ("hosts", "hostname", "resolv.conf")
_HOSTS = ("127.0.0.1\tlocalhost arena\n::1\tlocalhost ip6-localhost ip6-loopback\n")


@dataclass
class SessionDir:
    """A docker session's directory on the host (mode 0700, beside an `owner` file the
    reaper reads), with its disk when there is one and its output directory when the
    session has one (`output_target`: where it is bound in the container)."""

    root: Path
    disk: DiskCap | None
    output_target: str | None = None
    layer: Path | None = None

    @property
    def host(self) -> Path:
        """The output directory on the host (empty at start, mode 0755)."""
        return (self.root / "disk" / "out") if self.disk is not None else self.root / "out"

    @property
    def target(self) -> str:
        assert self.output_target is not None
        return self.output_target

    @classmethod
    def create(cls, sid: str, owner: str, *, payload: int | None,
               output_target: str | None, inodes: int | None = None) -> SessionDir:
        """A new one for session `sid` (`owner`: the line of its owner file); `payload`:
        bytes of the disk to make (None: no disk), with `inodes` (None: the default)."""
        root = sessions_dir() / f"{OUTPUT_PREFIX}{sid}"
        root.mkdir(mode=0o700)
        made = cls(root, None, output_target)
        try:
            (root / "owner").write_text(owner)
            if payload is not None:
                made.disk = make_disk(root / "disk", payload, inodes=inodes)
            if output_target is not None:
                made.host.mkdir()
                os.chmod(made.host, 0o755)
        except BaseException:
            made.remove()
            raise
        return made

    def binds(self, *, allow_internet: bool, volumes: list[str]) -> dict[str, dict[str, str]]:
        """Binds for the container: the output directory, and with a disk the network
        files and each image VOLUME (else the engine makes them outside any bound)."""
        binds: dict[str, dict[str, str]] = {}
        if self.output_target is not None:
            binds[str(self.host)] = {"bind": self.output_target, "mode": "rw"}
        if self.disk is None:
            return binds
        etc = self.disk.mount / "etc"
        etc.mkdir(mode=0o755)
        texts = {"hosts": _HOSTS, "hostname": "arena\n",
                 "resolv.conf": _resolv_conf() if allow_internet else ""}
        for name in NETWORK_FILES:
            (etc / name).write_text(texts[name])
            os.chmod(etc / name, 0o644)
            binds[str(etc / name)] = {"bind": f"/etc/{name}", "mode": "rw"}
        for i, volume in enumerate(sorted(volumes)):
            folder = self.disk.mount / "volumes" / str(i)
            folder.mkdir(mode=0o755, parents=True)
            binds[str(folder)] = {"bind": volume, "mode": "rw"}
        return binds

    def attach_layer(self, api: Any, container: str) -> bool:
        """Put the created (not started) container's writable layer on the disk; False
        where the engine's storage driver is not overlay2 (nothing done)."""
        assert self.disk is not None
        driver = api.inspect_container(container).get("GraphDriver") or {}
        data = driver.get("Data") or {}
        upper, work = data.get("UpperDir"), data.get("WorkDir")
        if driver.get("Name") != "overlay2" or not upper or not work:
            return False
        layer = Path(upper).parent
        if Path(work).parent != layer or not layer.is_dir():
            return False
        copy = self.disk.mount / "layer"
        shutil.copytree(layer, copy, symlinks=True)  # diff/ and work/ are empty now
        self.disk.bind(copy, layer)
        self.layer = layer
        return True

    def detach_layer(self) -> None:
        """Take the disk's layer off the engine's layer directory (before the engine
        removes the container: it then removes its own, empty directory)."""
        if self.layer is not None:
            unmount_under(self.layer)
            self.layer = None

    def remove(self) -> None:
        """Unmount everything (the disk frees its loop device and blocks) and remove the
        directory. Idempotent."""
        self.detach_layer()
        if self.disk is not None:
            self.disk.release()
        unmount_under(self.root)
        remove_tree(self.root)  # what the verifier wrote there without a disk: any depth


def _resolv_conf() -> str:
    """The host's name servers for a container with network (the engine's rule: loopback
    servers cannot be reached from the container, so Google's public ones instead)."""
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        lines = []
    servers = [ln for ln in lines if ln.split()[:1] == ["nameserver"] and len(ln.split()) > 1
               and not ln.split()[1].startswith(("127.", "::1"))]
    other = [ln for ln in lines if ln.startswith(("search", "options"))]
    if not servers:
        servers = ["nameserver 8.8.8.8", "nameserver 8.8.4.4"]
    return "\n".join(servers + other) + "\n"
