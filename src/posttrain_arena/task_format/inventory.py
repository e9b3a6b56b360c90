"""One walk over a package: every entry's kind, size, link target and content hash.

The checks need the same facts several times (sizes, symlinks, names, what the build
context holds, the package checksum). Collecting them in a single `scandir` pass, and
reading each file once to feed both its own digest and the package's canonical hash,
keeps a 200-task collection check close to the cost of walking the tree.

Symlinks are never followed. Files are read only when the walk stayed within the
limits, so a hostile package cannot make the check read gigabytes or walk forever.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Literal

from posttrain_arena.task_format.hashing import IGNORED_NAMES

EntryKind = Literal["file", "dir", "link", "other"]


class Entry:
    """One path in the package, relative to its root, POSIX separators."""

    # A plain slotted class: thousands are made per collection, and dataclass
    # generation would cost more at import than the class saves in typing.
    __slots__ = ("digest", "kind", "link_to_dir", "rel", "size", "target")

    def __init__(self, rel: str, kind: EntryKind, size: int = 0, target: str | None = None):
        self.rel = rel
        self.kind = kind
        self.size = size
        self.target = target
        self.link_to_dir = False
        self.digest: str | None = None

    def __repr__(self) -> str:
        return f"Entry({self.rel!r}, {self.kind!r}, size={self.size})"


class Inventory:
    """What one walk of a package found."""

    __slots__ = ("checksum", "entries", "root", "texts", "total_bytes", "truncated",
                 "unreadable")

    def __init__(self, root: Path) -> None:
        self.root = root
        self.entries: list[Entry] = []
        self.unreadable: list[tuple[str, str]] = []
        self.truncated = False
        self.total_bytes = 0
        self.checksum: str | None = None
        self.texts: dict[str, bytes] = {}

    def under(self, top: str) -> list[Entry]:
        """Entries inside the top-level folder `top` (excluding the folder itself)."""
        prefix = top + "/"
        return [e for e in self.entries if e.rel.startswith(prefix)]

    def files(self) -> list[Entry]:
        """Regular files, sorted by path."""
        return [e for e in self.entries if e.kind == "file"]


def _hashed(entry: Entry) -> bool:
    """Whether hashing.iter_files would list this entry (same rules, same order)."""
    name = entry.rel.rpartition("/")[2]
    if entry.kind == "link" and entry.link_to_dir:
        return True
    return entry.kind in ("file", "link") and not name.endswith(".pyc")


def walk(root: Path, max_entries: int) -> Inventory:
    """Collect every entry under `root` without following symlinks.

    Stops (and sets `truncated`) after `max_entries` entries, so a package with a
    million files costs no more than the limit.
    """
    inv = Inventory(root=root)
    stack: list[tuple[str, str]] = [(str(root), "")]
    while stack:
        path, rel_dir = stack.pop()
        try:
            with os.scandir(path) as it:
                items = list(it)
        except OSError as exc:
            inv.unreadable.append((rel_dir or ".", exc.strerror or str(exc)))
            continue
        for item in items:
            if item.name in IGNORED_NAMES:
                continue
            rel = f"{rel_dir}/{item.name}" if rel_dir else item.name
            if len(inv.entries) >= max_entries:
                inv.truncated = True
                return inv
            # d_type answers kind questions without a syscall; only files need a stat.
            try:
                if item.is_symlink():
                    entry = Entry(rel, "link", target=_readlink(item.path))
                    entry.link_to_dir = os.path.isdir(item.path)
                elif item.is_dir(follow_symlinks=False):
                    entry = Entry(rel, "dir")
                    stack.append((item.path, rel))
                elif item.is_file(follow_symlinks=False):
                    size = item.stat(follow_symlinks=False).st_size
                    entry = Entry(rel, "file", size=size)
                    inv.total_bytes += size
                else:
                    entry = Entry(rel, "other")
            except OSError as exc:
                inv.unreadable.append((rel, exc.strerror or str(exc)))
                continue
            inv.entries.append(entry)
    inv.entries.sort(key=lambda e: e.rel)
    return inv


def hash_contents(inv: Inventory, keep: frozenset[str] | set[str] = frozenset()) -> None:
    """Read and hash each file once: its digest, and from the digests the checksum.

    The checksum equals `hashing.tree_hash(root)`: same entries, order and framing.
    The bytes of the files named in `keep` (the small manifests the checks parse next)
    are kept in `inv.texts`, so they are not read a second time.
    """
    tree = hashlib.sha256()
    root = str(inv.root)
    for entry in inv.entries:
        if not _hashed(entry):
            continue
        tree.update(entry.rel.encode("utf-8", "surrogateescape") + b"\0")
        if entry.kind == "link":
            tree.update(b"L" + (entry.target or "").encode("utf-8", "surrogateescape"))
        else:
            try:
                data = _read_file(os.path.join(root, entry.rel))
            except OSError as exc:
                inv.unreadable.append((entry.rel, exc.strerror or str(exc)))
                return  # no checksum: the package cannot be hashed
            digest = hashlib.sha256(data)
            entry.digest = digest.hexdigest()
            tree.update(b"F" + digest.digest())
            if entry.rel in keep:
                inv.texts[entry.rel] = data
        tree.update(b"\0")
    inv.checksum = "sha256:" + tree.hexdigest()


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _read_file(path: str) -> bytes:
    """A file's bytes through the descriptor alone (no buffered file object: a third
    cheaper per file), refusing a symlink swapped in since the walk."""
    fd = os.open(path, _READ_FLAGS)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""
