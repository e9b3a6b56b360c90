"""Host-side reads and writes of files that a sandbox produced or can reach.

Every write into a record directory goes through `write_file`: a new temporary file
(O_CREAT | O_EXCL | O_NOFOLLOW) under a random name in the target directory, then an
atomic rename over the final name. A link planted at the final name or at any
temporary name is replaced, never followed, so no sandbox can make the harness write
outside the record. Reads of sandbox output go through `read_regular`, which opens
with O_NOFOLLOW and refuses anything that is not a regular file of bounded size.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

MAX_OUTPUT_FILE = 64 << 20
"""Largest verifier output file kept in a record (bytes)."""


class NotRegular(OSError):
    """The path is a link, a directory, a device, or too large to read."""


def write_file(path: Path, data: str | bytes, *, mode: int = 0o644) -> None:
    """Replace `path` with `data` (a file of permission bits `mode`) without following
    any link at `path` (see module)."""
    # surrogateescape: a name that is not UTF-8 (a dropped link, a file left out) is
    # written as the bytes it was, never an error where the record is written
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode & 0o777)
            fh.write(raw)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def read_regular(path: Path, *, limit: int = MAX_OUTPUT_FILE) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; NotRegular otherwise (a
    link is never followed; FileNotFoundError when absent)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if os.path.islink(path):
            raise NotRegular(f"{path.name} is a symbolic link, not a regular file") from exc
        raise
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(f"{path.name} is not a regular file")
        if info.st_size > limit:
            raise NotRegular(f"{path.name} is too large ({info.st_size} bytes)")
        return fh.read(limit + 1)[:limit]


def keep_regular_files(src: Path, dest: Path, *, limit: int = MAX_OUTPUT_FILE) -> list[str]:
    """Copy the top-level regular files of `src` (a host copy of sandbox output) into
    `dest` through `write_file`; returns the names of entries left out (links,
    directories, devices, oversized files)."""
    left_out: list[str] = []
    if src.is_symlink() or not src.is_dir():
        return left_out
    for entry in sorted(src.iterdir()):
        try:
            data = read_regular(entry, limit=limit)
        except OSError:
            left_out.append(entry.name)
            continue
        write_file(dest / entry.name, data)
    return left_out
