"""Content hashes of packages and directories, independent of where they live.

The canonical form walks files in sorted POSIX order and hashes each relative path with
the sha256 of the file's bytes (a Merkle list: each file is hashed once, and that one
digest serves both the package hash and the content comparisons of the checks). The
package's own directory name is not part of the hash, so the same task copied under
another name has the same hash (that is how duplicates are found). Symlinks are hashed
by their target text, never followed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

IGNORED_NAMES = frozenset({".git", "__pycache__", ".DS_Store", ".pytest_cache", ".mypy_cache"})


def iter_files(root: Path) -> list[Path]:
    """Every file and symlink under root (relative paths, sorted), skipping junk."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES)
        base = Path(dirpath)
        for d in dirnames:
            if (base / d).is_symlink():
                out.append((base / d).relative_to(root))
        for name in filenames:
            if name in IGNORED_NAMES or name.endswith(".pyc"):
                continue
            out.append((base / name).relative_to(root))
    return sorted(out, key=lambda p: p.as_posix())


def tree_hash(root: Path, files: list[Path] | None = None) -> str:
    """sha256 of the canonical form of the tree at `root`, as 'sha256:HEX'."""
    h = hashlib.sha256()
    for rel in files if files is not None else iter_files(root):
        path = root / rel
        h.update(rel.as_posix().encode("utf-8", "surrogateescape") + b"\0")
        if path.is_symlink():
            h.update(b"L" + os.readlink(path).encode("utf-8", "surrogateescape"))
        else:
            digest = hashlib.sha256()
            with path.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
            h.update(b"F" + digest.digest())
        h.update(b"\0")
    return "sha256:" + h.hexdigest()


def combine_hashes(items: list[tuple[str, str]]) -> str:
    """Hash of named hashes (name, hash), order-independent."""
    h = hashlib.sha256()
    for name, digest in sorted(items):
        h.update(f"{name}\0{digest}\n".encode())
    return "sha256:" + h.hexdigest()
