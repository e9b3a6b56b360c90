"""Reading a package's small text files: bounded, never through a symlink, located errors."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from posttrain_arena.task_format.findings import Finding, Severity, SpecError


def read_small_file(path: Path, limit: int, label: str, hint: str) -> bytes:
    """The bytes of a manifest file; SpecError when missing, not a regular file or large.

    Symlinks are refused (never followed): a manifest linked to a file outside the
    package would have its content quoted back in error messages.
    """
    where = str(path)
    try:
        info = path.lstat()
    except OSError:
        raise SpecError([err("missing", where, f"{label} is missing; {hint}")]) from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        what = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise SpecError([err("missing", where, f"{label} is {what}; it must be a plain file")])
    if info.st_size > limit:
        raise SpecError([err("too-large", where, f"{label} is {info.st_size} bytes; the "
                              f"limit is {limit} bytes")])
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise SpecError([err("unreadable", where, f"cannot read {label}: "
                              f"{exc.strerror or exc}")]) from None
    if len(raw) > limit:
        raise SpecError([err("too-large", where, f"{label} is over {limit} bytes")])
    return raw


def read_text_file(path: Path, limit: int, label: str, cached: bytes | None = None) -> str:
    """A small UTF-8 text file (SpecError when it is not one); see read_small_file.
    `cached`: its bytes, when the caller's walk already read them as a regular file."""
    raw = cached if cached is not None and len(cached) <= limit else \
        read_small_file(path, limit, label, "")
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise SpecError([err("encoding", str(path), f"{label} is not UTF-8 text; save it "
                              "as UTF-8")]) from None


def err(code: str, path: str, message: str, line: int | None = None,
        field: str | None = None) -> Finding:
    """An error finding."""
    return Finding(severity=Severity.ERROR, code=code, path=path, line=line, field=field,
                   message=message)
