"""Task packages in transit: packed once on the driver, unpacked once per node.

The driver packs a package's files (exactly the files its checksum covers) into one
tar archive and puts it in Ray's object store once; every trial of that package gets
the object reference, so each node fetches the bytes once, however many trials it runs.
On the node the archive is unpacked once into a cache keyed by the package checksum
(a file lock serialises the worker processes of one node), and the loaded package must
hash to the checksum the driver sent: a node never runs a package that differs from
the one the driver evaluated.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from posttrain_arena.paths import cache_home
from posttrain_arena.task_format.hashing import iter_files
from posttrain_arena.task_format.package import TaskPackage, load_task


class PackageMismatch(RuntimeError):
    """The package a node unpacked does not hash to the checksum the driver sent."""


def pack(task: TaskPackage) -> bytes:
    """The package's hashed files as an uncompressed tar (packages are small; the
    object store moves bytes faster than gzip makes them)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel in iter_files(task.root):
            tar.add(task.root / rel, arcname=rel.as_posix(), recursive=False)
    return buf.getvalue()


def cache_dir() -> Path:
    """$ARENA_CACHE_DIR/ray-packages (default ~/.cache/posttrain-arena/ray-packages)."""
    return cache_home() / "ray-packages"


def unpack(blob: bytes, *, checksum: str, name: str) -> TaskPackage:
    """The package on this node, unpacked on first use; PackageMismatch when its
    content is not the checksum's."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    final = root / checksum.replace("sha256:", "")[:32] / name
    with (root / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not final.is_dir():
                tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=root))
                try:
                    with tarfile.open(fileobj=io.BytesIO(blob), mode="r") as tar:
                        tar.extractall(tmp / name, filter="data")
                    final.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(tmp / name, final)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    task = load_task(final)
    if task.checksum != checksum:
        shutil.rmtree(final, ignore_errors=True)  # the next attempt unpacks afresh
        raise PackageMismatch(f"package {name} unpacked on this node hashes to "
                              f"{task.checksum}, not {checksum} as sent")
    return task
