"""The identity of the code that produces results: a content hash of its source files.

Some results are reused instead of being measured again: a challenge's shared baseline
(`train.pipeline`), the gates' evidence records (`gates.evidence`). They are keyed on what
produced them, and the code is part of that. The package version string cannot say it
(it has read "0.1.0" since the first commit); this hash changes with any edit to any
module of the installed package, so a change that could alter a result invalidates every
reused one. The price: an edit that alters nothing (a comment) re-measures too.

The libraries the code runs on produce results as well (a transformers or torch release
changes a sampled token): `environment_hash` names every installed distribution and its
version, so a score says which resolved environment made it and a shared result made on
other libraries is not reused.
"""

from __future__ import annotations

import functools
import hashlib
import platform
from importlib import metadata
from pathlib import Path

from posttrain_arena.task_format.hashing import iter_files, tree_hash

PACKAGE_ROOT = Path(__file__).resolve().parent
#: Sources that produce results: the Python modules, and the C of the verifier's
#: supervisor (trial/supervise.c), which the harness compiles and every verdict runs under.
SOURCE_SUFFIXES = frozenset({".py", ".c"})


def source_hash(root: Path) -> str:
    """'sha256:HEX' of every source file under `root` (SOURCE_SUFFIXES): relative path and
    bytes, in sorted order. Compiled files and caches are not part of it; nor is prose or
    markup (web templates, READMEs), which produces no result."""
    return tree_hash(root, [rel for rel in iter_files(root) if rel.suffix in SOURCE_SUFFIXES])


@functools.cache
def code_hash() -> str:
    """`source_hash` of the installed posttrain_arena package (read once per process)."""
    return source_hash(PACKAGE_ROOT)


def distributions_hash(pins: list[str], python: str) -> str:
    """'sha256:HEX' of a Python version and `name==version` pins (order and case of the
    names do not matter; the same distribution listed twice counts once)."""
    lines = sorted({pin.lower() for pin in pins})
    digest = hashlib.sha256(f"python=={python}\n".encode())
    digest.update("\n".join(lines).encode())
    return "sha256:" + digest.hexdigest()


@functools.cache
def environment_hash() -> str:
    """`distributions_hash` of this interpreter's installed distributions (read once per
    process): the resolved environment, as a lock file of it would pin it."""
    pins = [f"{dist.metadata['Name']}=={dist.version}" for dist in metadata.distributions()
            if dist.metadata["Name"]]
    return distributions_hash(pins, platform.python_version())
