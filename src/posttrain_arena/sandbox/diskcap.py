"""A session's writable space on a file system of its own, whose size is the bound.

Each session (local: its state directory's `fs/`; docker: its container's writable
layer and the verifier's output directory) gets a fresh ext4 made in a sparse file and
loop-mounted `nosuid,nodev` (`make_disk`). The file is unlinked as soon as it is
mounted: the mount holds it, and unmounting (`DiskCap.release`, or `unmount_under` in
the reaper) frees the loop device (autoclear) and the file's blocks together, so a
crash leaves a mount the reaper finds in /proc/self/mountinfo, never a file. A write
past the bound fails with ENOSPC, whatever writes it and however many files it spreads
over; the host's disk gives up at most the file system's size.

Needs root, loop devices and mkfs.ext4 (`disk_support`, probed once per process).
Where they are missing the backends say which bound applies instead (`bound_text`):
`arena sandbox doctor` prints it, and every session carries it (`disk_bound`).
`ARENA_DISK_CAP=off` turns the loop file systems off (the per-file limit is then all).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import os
import shutil
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from posttrain_arena.sandbox.base import SandboxError
from posttrain_arena.sandbox.janitor import wait as finish_janitor

DISK_CAP_ENV = "ARENA_DISK_CAP"
"""`auto` (the default: loop file systems where the host allows them) or `off`."""

_MNT_DETACH = 2
_MS_BIND = 4096
_RESERVE = 2 << 20
"""Bytes a file system is given beyond its payload and inode tables (superblock, group
descriptors, the root directory), besides 1/1024 of the payload (block bitmaps)."""
INODE_BYTES = 256
BLOCK = 4096


@dataclass(frozen=True)
class DiskSupport:
    """Whether this process can give sessions a file system of their own, and why not."""

    works: bool
    detail: str


_support: DiskSupport | None = None
_support_guard = threading.Lock()


_libc_handle: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _libc_handle
    if _libc_handle is None:
        _libc_handle = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                                   use_errno=True)
    return _libc_handle


def disk_support() -> DiskSupport:
    """Probed once: root, /dev/loop-control, mkfs.ext4 and mount, and one small disk
    made, written and released for real."""
    global _support
    if os.environ.get(DISK_CAP_ENV, "auto").strip().lower() == "off":
        return DiskSupport(False, f"{DISK_CAP_ENV}=off")
    with _support_guard:
        if _support is None:
            _support = _probe()
        return _support


def _probe() -> DiskSupport:
    if os.geteuid() != 0:
        return DiskSupport(False, "not root (loop mounts need it)")
    if not os.path.exists("/dev/loop-control"):
        return DiskSupport(False, "no loop devices (/dev/loop-control is missing)")
    for tool in ("mkfs.ext4", "mount"):
        if shutil.which(tool) is None and not os.path.exists(f"/sbin/{tool}"):
            return DiskSupport(False, f"{tool} is not installed (apt-get install e2fsprogs)")
    from posttrain_arena.sandbox.localfs import sessions_dir

    probe = sessions_dir() / f".disk-probe-{uuid.uuid4().hex[:8]}"
    probe.mkdir()
    try:
        disk = make_disk(probe / "m", 1 << 20, inodes=64)
        try:
            (probe / "m" / "x").write_bytes(b"x")
        finally:
            disk.release()
    except (OSError, SandboxError) as exc:
        return DiskSupport(False, f"a loop-mounted ext4 could not be made here: {exc}")
    finally:
        for leftover in (probe / "m", probe):
            with contextlib.suppress(OSError):
                leftover.rmdir()
    return DiskSupport(True, "loop-mounted ext4 per session")


def fs_size(payload: int, inodes: int) -> int:
    """Bytes of a file system that holds `payload` bytes of files and `inodes` inodes."""
    blocks = -(-payload // BLOCK) + -(-inodes * INODE_BYTES // BLOCK)
    return blocks * BLOCK + _RESERVE + payload // 1024


def inodes_for(payload: int) -> int:
    """Inodes of a disk for `payload` bytes: one per 4 KiB, at least 32 768 (a task may
    make many small files; the state transfer allows 100 000 entries)."""
    return max(32_768, min(payload // 4096, 4_000_000))


@dataclass
class DiskCap:
    """A mounted, size-capped file system (see the module doc)."""

    mount: Path
    size: int
    binds: list[Path]
    released: bool = False
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def bind(self, source: Path, target: Path) -> None:
        """Bind `source` (a directory on this disk) over `target`; undone by release."""
        if _libc().mount(str(source).encode(), str(target).encode(), None, _MS_BIND,
                         None) != 0:
            err = ctypes.get_errno()
            raise SandboxError(f"cannot bind {source} over {target}: {os.strerror(err)}")
        self.binds.append(target)

    def release(self) -> None:
        """Detach the binds and the file system (lazily: a process still inside keeps
        it until it ends); the loop device and the file's blocks go with the last user.
        Idempotent."""
        with self._guard:  # a second caller returns once the first has detached
            if self.released:
                return
            for target in reversed(self.binds):
                detach(target)
            detach(self.mount)
            self.released = True
        with _live_guard:
            _live.pop(id(self), None)


_live: dict[int, DiskCap] = {}
"""Disks made by this process and not released yet."""
_live_guard = threading.Lock()


@atexit.register
def _release_all() -> None:
    """At exit, release every disk a session did not (a process that ends on an
    exception never stops its sessions): their loop devices and blocks go back to the
    host now rather than at the next reap."""
    finish_janitor()  # first what stopped sessions handed over (it releases their disks)
    with _live_guard:
        disks = list(_live.values())
    for disk in disks:
        with contextlib.suppress(Exception):
            disk.release()


def detach(path: Path | str) -> bool:
    """Lazily unmount whatever is mounted at `path` (MNT_DETACH); False if nothing was."""
    return _libc().umount2(str(path).encode(), _MNT_DETACH) == 0


def make_disk(mount: Path, payload: int, *, inodes: int | None = None) -> DiskCap:
    """A new ext4 for `payload` bytes of files, mounted at `mount` (created; a
    directory beside it holds the image file only until it is mounted)."""
    count = inodes if inodes is not None else inodes_for(payload)
    size = fs_size(payload, count)
    mount.mkdir(mode=0o755, exist_ok=True)
    image = mount.with_name(f".{mount.name}.img")
    try:
        with open(image, "xb") as fh:
            fh.truncate(size)
        subprocess.run(
            ["mkfs.ext4", "-q", "-F", "-m", "0", "-b", str(BLOCK), "-I", str(INODE_BYTES),
             "-N", str(count), "-O", "^has_journal,^resize_inode",
             "-E", "lazy_itable_init=1,nodiscard,root_owner=0:0", str(image)],
            check=True, capture_output=True, text=True, timeout=60,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )
        subprocess.run(
            ["mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noatime,noinit_itable",
             str(image), str(mount)],
            check=True, capture_output=True, text=True, timeout=60,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )
    except subprocess.CalledProcessError as exc:
        raise SandboxError(f"cannot make a {size >> 20} MiB disk at {mount}: "
                           f"{(exc.stderr or '').strip()[-300:]}") from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"cannot make a {size >> 20} MiB disk at {mount}: {exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            image.unlink()  # the loop device holds it from now on
    disk = DiskCap(mount, size, [])
    with _live_guard:
        _live[id(disk)] = disk
    os.chmod(mount, 0o755)
    with contextlib.suppress(OSError):
        (mount / "lost+found").rmdir()
    return disk


def _unescape(field: str) -> str:
    """A path as /proc/self/mountinfo writes it (space, tab, newline, backslash octal)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts_under(path: Path | str) -> list[str]:
    """Mount points at or under `path`, deepest first."""
    top = os.path.realpath(path)
    found: list[str] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        point = _unescape(fields[4])
        if point == top or point.startswith(top.rstrip("/") + "/"):
            found.append(point)
    return sorted(set(found), key=len, reverse=True)


def unmount_under(path: Path | str) -> int:
    """Lazily unmount everything mounted at or under `path` (a crashed session's disk);
    returns how many mounts went."""
    count = 0
    for point in mounts_under(path):
        for _ in range(8):  # stacked mounts: one detach each
            if not detach(point):
                break
            count += 1
    return count


def verifier_room(storage_mb: int) -> int:
    """Bytes a verifier's session gets beyond the task's storage: the agent's state (at
    most `storage_mb`, the state transfer's bound) goes in, and the verifier still needs
    room for its output and temporary files (a state just under the bound must not
    leave the verifier without space)."""
    return (16 << 20) + (storage_mb << 20) // 16


VERIFIER_INODES = 16_384
"""Inodes a verifier's session gets beyond an agent's: its own files, and the entries of
the image's state roots it empties (moved aside, or whiteouts on docker)."""


def bound_text(storage_mb: int, how: str) -> str:
    """How a session's disk is bounded, in words (doctor, trial records)."""
    return f"{storage_mb} MiB in total ({how})"
