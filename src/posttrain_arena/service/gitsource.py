"""Fetching a collection from git without running any of its code.

The ref is resolved to a commit with a shallow fetch into a bare repository (no
checkout, no hooks, no filters), the tree is measured with `git ls-tree` against the file
count and size bounds, links and submodules are refused, and only then is the tree
exported with `git archive` and unpacked by the same safe extractor as uploads.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from posttrain_arena.service.archive import extract_archive
from posttrain_arena.service.errors import BadRequest, TooLarge

_SHA = re.compile(r"^[0-9a-f]{40}$")
_URL = re.compile(r"^(https?://|ssh://|git://|file://|[\w.-]+@[\w.-]+:)")


def _git(args: list[str], cwd: Path, timeout: float) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_ASKPASS": "/bin/false",
        "GIT_SSH_COMMAND": "ssh -o BatchMode=yes",
    }
    try:
        proc = subprocess.run(
            ["git", "-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never", *args],
            cwd=cwd, env=env, capture_output=True, timeout=timeout, check=False,
        )
    except subprocess.TimeoutExpired:
        raise BadRequest(f"git {args[0]} took longer than {timeout:.0f}s; is the "
                         "repository reachable and small enough?") from None
    if proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        raise BadRequest(f"git {args[0]} failed: {msg[-1] if msg else proc.returncode}")
    return proc.stdout.decode(errors="replace")


def fetch_git(
    url: str, ref: str, dest: Path, max_bytes: int, max_files: int, timeout: float
) -> tuple[Path, str]:
    """Fetch `url` at `ref` into `dest`; returns (collection root, pinned commit)."""
    if not _URL.match(url) or url.startswith("-"):
        raise BadRequest(f"{url!r} is not a git URL (https://, ssh://, git@host:, file://)")
    if not ref or ref.startswith("-"):
        raise BadRequest(f"{ref!r} is not a git ref")
    with tempfile.TemporaryDirectory(prefix="arena-git-") as tmp:
        work = Path(tmp)
        _git(["init", "-q", "--bare", "repo.git"], work, timeout)
        repo = work / "repo.git"
        _git(["fetch", "-q", "--depth", "1", "--no-tags", "--", url, ref], repo, timeout)
        commit = _git(["rev-parse", "FETCH_HEAD^{commit}"], repo, timeout).strip()
        if _SHA.match(ref) and commit != ref:
            raise BadRequest(f"git resolved {ref} to {commit}; the commits differ")
        _check_tree(_git(["ls-tree", "-r", "-l", "-z", commit], repo, timeout),
                    max_bytes, max_files)
        tar = work / "tree.tar"
        with tar.open("wb") as out:
            proc = subprocess.run(["git", "archive", "--format=tar", commit], cwd=repo,
                                  stdout=out, stderr=subprocess.PIPE, timeout=timeout,
                                  check=False)
        if proc.returncode != 0:
            raise BadRequest(f"git archive failed: {proc.stderr.decode(errors='replace')}")
        return extract_archive(tar, dest, max_bytes, max_files), commit


def _check_tree(listing: str, max_bytes: int, max_files: int) -> None:
    files = total = 0
    for entry in filter(None, listing.split("\0")):
        meta, _, path = entry.partition("\t")
        mode, kind, _sha, size = meta.split()
        if mode == "120000":
            raise BadRequest(f"{path} is a symbolic link; links are not allowed in collections")
        if kind == "commit":
            raise BadRequest(f"{path} is a git submodule; vendor its files instead")
        files += 1
        total += int(size) if size.isdigit() else 0
    if files > max_files:
        raise TooLarge(f"the repository holds {files} files; the limit is {max_files}")
    if total > max_bytes:
        raise TooLarge(f"the repository holds {total} bytes; the limit is {max_bytes}")
