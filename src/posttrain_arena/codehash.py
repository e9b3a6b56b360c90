"""The identity of the code that produces results: a content hash of its source files.

Some results are reused instead of being measured again: a challenge's shared baseline
(`train.pipeline`), the gates' evidence records (`gates.evidence`). They are keyed on what
produced them, and the code is part of that. The package version string cannot say it
(it has read "0.1.0" since the first commit); this hash changes with any edit to any
module of the installed package, so a change that could alter a result invalidates every
reused one. The price: an edit that alters nothing (a comment) re-measures too.
"""

from __future__ import annotations

import functools
from pathlib import Path

from posttrain_arena.spec.hashing import iter_files, tree_hash

PACKAGE_ROOT = Path(__file__).resolve().parent


def source_hash(root: Path) -> str:
    """'sha256:HEX' of every Python source file under `root`: relative path and bytes, in
    sorted order. Compiled files and caches are not part of it; nor is anything but
    `.py` (web templates, READMEs), which produces no result."""
    return tree_hash(root, [rel for rel in iter_files(root) if rel.suffix == ".py"])


@functools.cache
def code_hash() -> str:
    """`source_hash` of the installed posttrain_arena package (read once per process)."""
    return source_hash(PACKAGE_ROOT)
