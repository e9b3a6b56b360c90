"""Where a run's tasks come from: a collection or a suite, local or pinned in git.

A *task set* is a folder of task packages: a collection (`submission.yaml` + `envs/`),
or any folder whose packages sit under `envs/` or directly inside it (a held-out
suite). Its content hash is the same combination of package names and checksums that
`Collection.content_hash` uses, so a collection's hash means the same thing here.

`count_tasks` only lists folders (for `plan`, which must stay fast at thousands of
tasks); `load_taskset` loads every package. `fetch` clones a git location at its commit.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from posttrain_arena.task_format.findings import SpecError
from posttrain_arena.task_format.hashing import combine_hashes
from posttrain_arena.task_format.package import TaskPackage, is_task_dir, load_task


class SourceError(Exception):
    """A collection or suite location cannot be used; the message says what to do."""


@dataclass(frozen=True)
class TaskSet:
    """Loaded packages of a collection or suite."""

    root: Path
    tasks: list[TaskPackage]
    content_hash: str
    kind: str  # "collection" or "suite"


def package_dirs(root: Path) -> list[Path]:
    """Package folders (holding task.md) under `root/envs/`, else directly under `root`."""
    if not root.is_dir():
        raise SourceError(f"{root}: not a directory (expected a collection or suite folder)")
    base = root / "envs" if (root / "envs").is_dir() else root
    if is_task_dir(base):
        return [base]  # a single task package
    return sorted(
        p for p in base.iterdir()
        if p.is_dir() and not p.name.startswith(("_", ".")) and is_task_dir(p)
    )


def count_tasks(root: Path) -> int:
    """How many packages a task set holds (a listing, nothing is parsed)."""
    return len(package_dirs(root))


def load_taskset(root: Path, *, kind: str = "suite", max_tasks: int | None = None) -> TaskSet:
    """Load every package; SourceError lists the packages that do not load."""
    dirs = package_dirs(root)
    if not dirs:
        raise SourceError(f"{root}: no task packages (folders with task.md) in it or in envs/")
    tasks: list[TaskPackage] = []
    problems: list[str] = []
    for d in dirs:
        try:
            tasks.append(load_task(d))
        except SpecError as exc:
            problems.append(str(exc))
    if problems:
        raise SourceError(f"{root}: {len(problems)} package(s) do not load; fix them or "
                          "run `arena collection check`:\n" + "\n".join(problems[:20]))
    tasks.sort(key=lambda t: t.name)
    if max_tasks is not None:
        tasks = tasks[:max_tasks]
    return TaskSet(root=root, tasks=tasks, kind=kind,
                   content_hash=combine_hashes([(t.name, t.checksum) for t in tasks]))


def taskset_hash(root: Path | str) -> str:
    """The content hash that seals a suite (what `[eval] sha256` must equal)."""
    return load_taskset(Path(root)).content_hash


def fetch(location: str, commit: str | None, dest: Path) -> tuple[Path, str | None]:
    """A local folder as is, or a git URL cloned into `dest` at `commit`.

    Returns (folder, commit or None for local folders).
    """
    from posttrain_arena.train.recipe import is_remote

    if not is_remote(location):
        path = Path(location)
        if not path.is_dir():
            raise SourceError(f"{location}: no such folder")
        return path, None
    if not commit:
        raise SourceError(f"{location}: a git location needs a pinned commit")
    if (dest / ".git").is_dir():
        head = _git(["rev-parse", "HEAD"], dest).strip()
        if head.startswith(commit) or commit.startswith(head):
            return dest, head
    dest.parent.mkdir(parents=True, exist_ok=True)
    _git(["clone", "--quiet", "--no-checkout", location, str(dest)], dest.parent)
    _git(["checkout", "--quiet", "--detach", commit], dest)
    return dest, _git(["rev-parse", "HEAD"], dest).strip()


def _git(args: list[str], cwd: Path) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=600, check=False)
    except FileNotFoundError:
        raise SourceError("git is not installed; install it to use git locations") from None
    if done.returncode != 0:
        raise SourceError(f"git {' '.join(args)} failed: {done.stderr.strip()[:500]}")
    return done.stdout
