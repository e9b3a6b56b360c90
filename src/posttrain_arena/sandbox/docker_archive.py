"""Files in and out of a container through the engine's archive API: a tar upload
(`put_path`), and a bounded, streamed download (`get_path`) that never follows a link
and leaves nothing half-copied on the host."""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from posttrain_arena.sandbox.base import MissingPath, SandboxError, TransferBounds, TransferLimit
from posttrain_arena.sandbox.localfs import Budget, copy_tree

TAR_OVERHEAD = 1536
"""Archive bytes per entry beyond its data (header and padding), for the byte bound."""


def tar_of(src: Path, name: str) -> bytes:
    """An uncompressed tar of `src` (links as links) under the name `name` ('.': its
    contents)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(src), arcname=name or ".", recursive=True)
    return buf.getvalue()


def _mkdir(api: Any, container: str, parent: str) -> None:
    exec_id = api.exec_create(container, ["mkdir", "-p", parent], user="0", stdout=True,
                              stderr=True)
    api.exec_start(exec_id["Id"])


def put_path(api: Any, container: str, src: Path, dest: str) -> None:
    """Copy host file or directory `src` to absolute container path `dest` (a
    directory's contents merge into it; parents are made). Links are copied as links."""
    import docker.errors

    src = Path(src)
    if not os.path.lexists(src):
        raise SandboxError(f"copy_in: {src} does not exist")
    dest = posixpath.normpath(posixpath.join("/", dest))
    parent, name = posixpath.split(dest)
    with tempfile.TemporaryFile() as buf:
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(src), arcname=name or ".", recursive=True)
        buf.seek(0)
        data = buf.read()
    try:
        ok = api.put_archive(container, parent or "/", data)
    except docker.errors.NotFound:
        _mkdir(api, container, parent)
        ok = api.put_archive(container, parent or "/", data)
    except docker.errors.APIError as exc:
        raise SandboxError(f"copy_in {src} -> {dest}: {exc}") from exc
    if not ok:
        raise SandboxError(f"copy_in {src} -> {dest}: the engine refused the archive")


def get_path(api: Any, container: str, sid: str, src: str, dest: Path,
             bounds: TransferBounds | None) -> None:
    """Copy absolute container path `src` to `dest` on the host (see
    DockerSession.copy_out): a link is copied as a link; with `bounds` the archive is
    read as a stream and abandoned at the first bound passed (TransferLimit)."""
    import docker.errors

    try:
        chunks, _stat = api.get_archive(container, src)
    except docker.errors.NotFound as exc:
        if "no such container" in str(exc).lower():
            raise SandboxError(f"copy_out {src}: session {sid} is gone ({exc})") from exc
        raise MissingPath(f"copy_out: {src} does not exist in session {sid}") from exc
    except docker.errors.APIError as exc:
        raise SandboxError(f"copy_out {src}: {exc}") from exc
    link = _stat.get("linkTarget") if isinstance(_stat, dict) else None
    if link:  # the engine's archive would follow it: the link itself is the copy
        with contextlib.suppress(Exception):
            chunks.close()
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            raise SandboxError(f"copy_out {src}: {dest} exists")
        os.symlink(link, dest)
        return
    budget = Budget(bounds, src) if bounds is not None else None

    def admit(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        if budget is not None:  # counted before the entry lands on the host
            budget.add(member.size if member.isreg() else 0, member.name)
        return tarfile.tar_filter(member, path)

    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".arena-copy-") as tmp:
        stream = ArchiveStream(chunks, bounds)
        try:
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                tar.extractall(Path(tmp) / "x", filter=admit)
        finally:
            stream.close()
        entries = list((Path(tmp) / "x").iterdir())
        if len(entries) != 1:
            raise SandboxError(f"copy_out {src}: unexpected archive layout")
        copy_tree(entries[0], dest)


class ArchiveStream(io.RawIOBase):
    """The engine's archive chunks as a readable stream, within a byte and time bound."""

    def __init__(self, chunks: Any, bounds: TransferBounds | None) -> None:
        self.chunks = iter(chunks)
        self.source = chunks
        self.pending = b""
        self.total = 0
        self.limit = None
        if bounds is not None and bounds.max_bytes is not None:
            entries = bounds.max_entries or 100_000
            self.limit = bounds.max_bytes + TAR_OVERHEAD * entries + (1 << 20)
        self.deadline = bounds.deadline if bounds is not None else None

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self.pending:
            try:
                chunk = next(self.chunks)
            except StopIteration:
                return 0
            self.total += len(chunk)
            if self.limit is not None and self.total > self.limit:
                raise TransferLimit(f"the archive is larger than {self.limit >> 20} MiB")
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise TransferLimit(f"copying ran past its deadline ({self.total >> 20} MiB "
                                    "read)")
            self.pending = chunk
        n = min(len(b), len(self.pending))
        b[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n

    def close(self) -> None:
        close = getattr(self.source, "close", None)  # ends the engine's archive stream
        if callable(close):
            with contextlib.suppress(Exception):
                close()
        super().close()
