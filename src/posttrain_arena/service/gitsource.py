"""Fetching a collection from git without running any of its code.

The URL has passed sourceurl.py's policy. The ref is resolved to a commit with a shallow
fetch into a bare repository (no checkout, no hooks, no filters). git runs with an
environment built from nothing: no system or user config, no credential helper, no
terminal prompt, no SSH identity or agent, only the one protocol the URL needs.

Bounds hold *while* fetching, not after: the pack is always kept as one file
(`fetch.unpackLimit=1`) and every process of the fetch runs under a file-size limit
(`prlimit --fsize`), so the kernel stops a pack that grows past the byte bound; the
object count in the pack's header, which git reports before receiving, is compared with
the file bound and the fetch is killed when it is over. A wall-clock deadline (and
curl's low-speed limit) ends slow fetches. Then the tree is measured with `git ls-tree`
(links and submodules refused), exported with `git archive` and unpacked by the same
safe extractor as uploads. Git LFS pointers are refused: they are not the files.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from posttrain_arena.service.archive import extract_archive
from posttrain_arena.service.errors import BadRequest, TooLarge
from posttrain_arena.service.sourceurl import Remote

_SHA = re.compile(r"^[0-9a-f]{40}$")
_RECEIVING = re.compile(rb"Receiving objects:\s+\d+% \(\d+/(\d+)\)")
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"
_BASE_CONFIG = (
    "core.hooksPath=/dev/null", "core.fsmonitor=false", "credential.helper=",
    "core.askPass=", "protocol.allow=never", "fetch.unpackLimit=1",
    "transfer.unpackLimit=1", "fetch.recurseSubmodules=false", "submodule.recurse=false",
    "http.lowSpeedLimit=1024", "http.lowSpeedTime=30",
)


def _env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false", "SSH_ASKPASS": "/bin/false",
        "GIT_SSH_COMMAND": "/bin/false", "GIT_PROTOCOL_FROM_USER": "0",
    }


class _Git:
    """git commands for one fetch: one environment, one deadline, one byte bound."""

    def __init__(self, work: Path, remote: Remote, max_bytes: int, timeout: float):
        self.work, self.remote, self.max_bytes = work, remote, max_bytes
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        # only the one protocol the URL needs; the others named too, whatever git's default
        allowed = [f"protocol.{p}.allow={'always' if p == remote.protocol else 'never'}"
                   for p in ("https", "http", "file", "ssh", "git", "ext")]
        self.config = [x for kv in (*_BASE_CONFIG, *allowed, *remote.config)
                       for x in ("-c", kv)]

    def _argv(self, args: list[str], bounded: bool = False) -> list[str]:
        git = ["git", *self.config, *args]
        # prlimit applies to git and everything it starts (remote-https, index-pack)
        return ["prlimit", f"--fsize={self.max_bytes}", "--", *git] if bounded else git

    def _left(self, what: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise BadRequest(f"git {what} took longer than {self.timeout:.0f}s; is the "
                             "repository reachable and small enough?")
        return left

    def run(self, args: list[str], cwd: Path) -> str:
        """Run a git command to completion; its stdout."""
        try:
            proc = subprocess.run(self._argv(args), cwd=cwd, env=_env(self.work),
                                  capture_output=True, timeout=self._left(args[0]),
                                  check=False, start_new_session=True)
        except subprocess.TimeoutExpired:
            raise BadRequest(f"git {args[0]} took longer than {self.timeout:.0f}s; is the "
                             "repository reachable and small enough?") from None
        if proc.returncode != 0:
            self._failed(args[0], proc.stderr, cwd)
        return proc.stdout.decode(errors="replace")

    def fetch(self, repo: Path, ref: str, max_objects: int) -> None:
        """`git fetch --depth 1 URL REF`, killed when its pack announces more than
        `max_objects` objects or the deadline passes."""
        args = ["fetch", "--progress", "--depth", "1", "--no-tags", "--",
                self.remote.url, ref]
        proc = subprocess.Popen(self._argv(args, bounded=True), cwd=repo, env=_env(self.work),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        announced: list[int] = []
        stderr = bytearray()

        def watch() -> None:
            assert proc.stderr is not None
            while chunk := os.read(proc.stderr.fileno(), 4096):
                stderr.extend(chunk)
                found = _RECEIVING.search(bytes(stderr[-4096:]))
                if found and not announced:
                    announced.append(int(found.group(1)))
                    if announced[0] > max_objects:
                        _kill(proc)

        reader = threading.Thread(target=watch, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.wait()
        reader.join(timeout=5)
        if announced and announced[0] > max_objects:
            raise TooLarge(f"the repository's pack holds {announced[0]} objects; a "
                           f"collection of at most the file limit needs at most "
                           f"{max_objects}. The fetch was stopped.")
        self._left("fetch")
        if proc.returncode != 0:
            self._failed("fetch", bytes(stderr), repo)

    def _failed(self, what: str, stderr: bytes, repo: Path) -> None:
        if _grew_to(repo, self.max_bytes) or b"signal 25" in stderr:  # SIGXFSZ
            raise TooLarge(f"the repository is larger than {self.max_bytes} bytes; the "
                           "fetch was stopped at the bound")
        lines = [ln for ln in stderr.decode(errors="replace").replace("\r", "\n")
                 .splitlines() if ln.strip() and "objects:" not in ln]
        raise BadRequest(f"git {what} failed: {lines[-1] if lines else 'no message'}")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _grew_to(folder: Path, limit: int) -> bool:
    return any(p.is_file() and p.stat().st_size >= limit for p in folder.rglob("*"))


def fetch_git(
    remote: Remote, ref: str, dest: Path, max_bytes: int, max_files: int, timeout: float,
    subdir: str | None = None, expect: str | None = None,
) -> tuple[Path, str]:
    """Fetch `remote` at `ref` into `dest`; returns (collection root, pinned commit).

    `subdir`, when given, is the folder of the repository that holds the collection;
    `expect`, the commit `ref` must resolve to (as another source said it does)."""
    if not ref or ref.startswith("-") or any(c in ref for c in "\0\n\r\t :~^?*[\\"):
        raise BadRequest(f"{ref!r} is not a git ref (a branch, tag or commit)")
    if shutil.which("prlimit") is None:
        raise BadRequest("the server cannot bound git fetches: prlimit (util-linux) is "
                         "not installed")
    with tempfile.TemporaryDirectory(prefix="arena-git-") as tmp:
        work = Path(tmp)
        git = _Git(work, remote, max_bytes, timeout)
        git.run(["init", "-q", "--bare", "--template=", "repo.git"], work)
        repo = work / "repo.git"
        # blobs + trees + the commit: a tree per folder, and folders hold files
        git.fetch(repo, ref, 2 * max_files + 1)
        commit = git.run(["rev-parse", "FETCH_HEAD^{commit}"], repo).strip()
        wanted = expect or (ref if _SHA.match(ref) else None)
        if wanted is not None and commit != wanted:
            raise BadRequest(f"git resolved {ref} to {commit}, not {wanted}; if the branch "
                             "just moved, register it again")
        tree = f"{commit}:{subdir}" if subdir else commit
        _check_tree(git.run(["ls-tree", "-r", "-l", "-z", tree], repo), max_bytes, max_files)
        tar = work / "tree.tar"
        git.run(["archive", "--format=tar", "-o", str(tar), tree], repo)
        root = extract_archive(tar, dest, max_bytes, max_files)
    _refuse_lfs_pointers(root)
    return root, commit


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
    if files == 0:
        raise BadRequest("the repository (or the folder asked for) holds no files")
    if files > max_files:
        raise TooLarge(f"the repository holds {files} files; the limit is {max_files}")
    if total > max_bytes:
        raise TooLarge(f"the repository holds {total} bytes; the limit is {max_bytes}")


def _refuse_lfs_pointers(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_size < 1024:
            with path.open("rb") as fh:
                if fh.read(len(_LFS_POINTER)) == _LFS_POINTER:
                    raise BadRequest(f"{path.relative_to(root)} is a Git LFS pointer, not "
                                     "the file; collections hold plain files (commit them "
                                     "without LFS)")
