"""Suites: the tasks an evaluation runs, with a content hash that pins them.

A suite is a directory of task packages (its subdirectories holding a task.md; a
collection's `envs/` is used when present) or a list file naming package paths, one a
line, relative to the file (`#` starts a comment). A suite used as held-out must obey
the composition rule: no domain above 20% of its tasks.

Each task belongs to a *cluster*: a stratum of the paired interval (evaluate.stats;
tasks that share a generator, a family or a source are draws from it, and the interval
weighs each family as the suite does instead of counting its near-clones as independent
evidence about the others). A task declares its cluster with a tag
`cluster:KEY` in its task.md metadata (sealed by the package checksum, hence by the
suite hash); a task without one is its own cluster.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrain_arena.task_format.domains import Domain, composition_violations
from posttrain_arena.task_format.findings import SpecError
from posttrain_arena.task_format.hashing import combine_hashes
from posttrain_arena.task_format.package import TASK_MD, TaskPackage, is_task_dir, load_task


class SuiteError(Exception):
    """The suite cannot be used; the message names the file or task and the fix."""


CLUSTER_TAG = "cluster:"


def cluster_key(task: TaskPackage) -> str:
    """The task's declared cluster (its `cluster:KEY` tag), else the task's own name.

    A task declaring two different clusters is refused: it would be counted twice."""
    keys = sorted({tag[len(CLUSTER_TAG):].strip() for tag in task.frontmatter.metadata.tags
                   if tag.startswith(CLUSTER_TAG)})
    if len(keys) > 1:
        raise SuiteError(f"{task.root / TASK_MD}: metadata.tags declares {len(keys)} clusters "
                         f"({', '.join(keys)}); keep one `{CLUSTER_TAG}KEY` tag")
    if keys and not keys[0]:
        raise SuiteError(f"{task.root / TASK_MD}: metadata.tags has an empty "
                         f"`{CLUSTER_TAG}` tag; name the cluster (e.g. {CLUSTER_TAG}family-a)")
    return f"{CLUSTER_TAG}{keys[0]}" if keys else f"task:{task.name}"


class Suite(BaseModel):
    """An ordered set of task packages with unique names."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    source: str = Field(description="The directory or list file the suite was read from")
    tasks: list[TaskPackage] = Field(description="Task packages, sorted by name")
    hash: str = Field(description="Content hash over (task name, package checksum) pairs")

    def domain_counts(self) -> dict[Domain, int]:
        """Tasks per domain."""
        return dict(Counter(t.domain for t in self.tasks))

    def clusters(self) -> dict[str, str]:
        """Task name -> cluster key (see `cluster_key`)."""
        return {t.name: cluster_key(t) for t in self.tasks}

    def composition_violations(self) -> list[str]:
        """Why this suite may not serve as held-out (empty when it may)."""
        return composition_violations(self.domain_counts())

    def check_heldout(self) -> None:
        """Raise SuiteError when a domain holds more than its share of the suite."""
        problems = self.composition_violations()
        if problems:
            raise SuiteError(f"{self.source} cannot be a held-out suite: " + "; ".join(problems)
                             + "; add tasks of other domains or drop some of these")


def suite_from_tasks(tasks: list[TaskPackage], source: str = "<tasks>") -> Suite:
    """A suite of already loaded packages; SuiteError on duplicate names."""
    seen: dict[str, TaskPackage] = {}
    for task in tasks:
        if task.name in seen:
            raise SuiteError(f"{source}: two tasks are named {task.name!r} ({seen[task.name].root} "
                             f"and {task.root}); task names must be unique within a suite")
        seen[task.name] = task
    ordered = sorted(tasks, key=lambda t: t.name)
    return Suite(source=source, tasks=ordered,
                 hash=combine_hashes([(t.name, t.checksum) for t in ordered]))


def load_suite(path: Path | str) -> Suite:
    """Load a suite from a directory of packages or a list file of package paths."""
    path = Path(path)
    if path.is_dir():
        dirs = _package_dirs(path)
        where = str(path)
    elif path.is_file():
        dirs = _listed_dirs(path)
        where = str(path)
    else:
        raise SuiteError(f"{path}: no such suite; give a directory of task packages or a file "
                         "listing package paths")
    if not dirs:
        raise SuiteError(f"{where}: the suite has no tasks (no subdirectory holds a {TASK_MD})")
    tasks, problems = [], []
    for d in dirs:
        try:
            tasks.append(load_task(d))
        except SpecError as exc:
            problems.append(f"{d}: {exc}")
    if problems:
        shown = "\n  ".join(problems[:10])
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise SuiteError(f"{where}: {len(problems)} task(s) do not load; run `arena task check` "
                         f"on them:\n  {shown}{more}")
    return suite_from_tasks(tasks, where)


def _package_dirs(root: Path) -> list[Path]:
    if is_task_dir(root):
        return [root]
    base = root / "envs" if (root / "envs").is_dir() else root
    return sorted(
        d for d in base.iterdir()
        if d.is_dir() and not d.name.startswith(("_", ".")) and is_task_dir(d)
    )


def _listed_dirs(list_file: Path) -> list[Path]:
    dirs = []
    for n, raw in enumerate(list_file.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        d = Path(line) if Path(line).is_absolute() else list_file.parent / line
        if not is_task_dir(d):
            raise SuiteError(f"{list_file}:{n}: {line} is not a task package (no {TASK_MD})")
        dirs.append(d)
    return dirs
