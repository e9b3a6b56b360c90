"""Collections: `submission.yaml` plus 1-200 task packages under `envs/`.

`check_collection(dir)` checks the manifest and every package (never running any of
their code) and reports duplicates, per-domain counts and a content hash that pins a
directory which is not a git commit. `load_collection(dir)` returns the `Collection`
that evaluation, training and the service use, or raises SpecError.
"""

from __future__ import annotations

import itertools
import os
import pickle
import re
import sys
from collections import Counter
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from posttrain_arena.task_format.checks import DEFAULT_LIMITS, CheckLimits, TaskReport, check_task
from posttrain_arena.task_format.findings import Finding, Severity, SpecError
from posttrain_arena.task_format.hashing import combine_hashes
from posttrain_arena.task_format.package import TaskPackage, read_small_file, validation_findings
from posttrain_arena.task_format.yamlsafe import MAX_YAML_BYTES, YamlProblem, load_yaml

SUBMISSION_YAML = "submission.yaml"
ENVS_DIR = "envs"
MIN_TASKS = 1
MAX_TASKS = 200
_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: Directory entries under envs/ looked at, at most (a bound on hostile input).
_MAX_LISTING = 5000


class Track(StrEnum):
    """What a collection contributes."""

    ENVIRONMENTS = "environments"
    SKILLS = "skills"


class Submission(BaseModel):
    """The flat `submission.yaml` at a collection's root."""

    model_config = ConfigDict(extra="allow", frozen=True)

    team_name: str = Field(min_length=1, max_length=200, description="Team or author name")
    contact_email: str = Field(
        pattern=r"^[^@\s]+@[^@\s]+$", max_length=320, description="Who to contact about it"
    )
    track: Track = Field(description="environments (task packages under envs/) or skills")
    title: str | None = Field(default=None, max_length=200, description="Collection title")
    license: str | None = Field(default=None, description="SPDX license of the collection")
    description: str | None = Field(default=None, description="What the collection teaches")


class Collection(BaseModel):
    """A checked collection: manifest, packages (sorted by name) and content hash."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    root: Path = Field(description="The collection directory")
    manifest: Submission
    tasks: list[TaskPackage] = Field(description="Packages under envs/, sorted by name")
    content_hash: str = Field(description="Hash of task names and package checksums")

    def domain_counts(self) -> dict[str, int]:
        """Packages per domain slug."""
        return dict(sorted(Counter(t.domain.value for t in self.tasks).items()))

    def task(self, name: str) -> TaskPackage:
        """The package called `name`; KeyError if there is none."""
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(name)


class CollectionReport(BaseModel):
    """The outcome of checking a collection."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    path: str = Field(description="The collection directory as given")
    findings: list[Finding] = Field(default_factory=list, description="Collection-level")
    tasks: list[TaskReport] = Field(default_factory=list, description="One per package")
    manifest: Submission | None = Field(default=None, description="submission.yaml, if valid")
    content_hash: str | None = Field(default=None, description="Pins this directory")
    domain_counts: dict[str, int] = Field(default_factory=dict, description="Per domain")
    collection: Collection | None = Field(default=None, exclude=True)

    @property
    def errors(self) -> list[Finding]:
        """Every error, collection-level and per package."""
        found = [f for f in self.findings if f.severity is Severity.ERROR]
        return found + [f for t in self.tasks for f in t.errors]

    @property
    def warnings(self) -> list[Finding]:
        found = [f for f in self.findings if f.severity is Severity.WARNING]
        return found + [f for t in self.tasks for f in t.warnings]

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def eligible_tasks(self) -> list[TaskPackage]:
        """Packages that check clean on their own (whatever the collection-level errors)."""
        return [t.package for t in self.tasks if t.package is not None]

    def to_json(self) -> dict[str, Any]:
        """A plain dict for `--json` output."""
        data = self.model_dump(mode="json", exclude={"tasks"})
        data["ok"] = self.ok
        data["error_count"] = len(self.errors)
        data["warning_count"] = len(self.warnings)
        for finding, raw in zip(self.findings, data["findings"], strict=True):
            raw["rendered"] = finding.render()
        data["tasks"] = [t.to_json() for t in self.tasks]
        return data


def load_submission(path: Path) -> tuple[Submission | None, list[Finding]]:
    """Validate submission.yaml; unknown keys are warnings."""
    where = str(path)
    try:
        raw = read_small_file(path, MAX_YAML_BYTES, SUBMISSION_YAML, "add one with team_name, "
                              "contact_email and track (see `arena task schema --submission`)")
        data, lines = load_yaml(raw.decode("utf-8"))
    except SpecError as exc:
        return None, list(exc.findings)
    except UnicodeDecodeError:
        return None, [_f("error", "encoding", where, "submission.yaml is not UTF-8 text")]
    except YamlProblem as exc:
        return None, [_f("error", "yaml", where, str(exc), exc.line)]
    if not isinstance(data, dict):
        return None, [_f("error", "manifest", where, "submission.yaml must be a YAML mapping "
                         f"(got {type(data).__name__})", 1)]
    try:
        manifest = Submission.model_validate(data)
    except ValidationError as exc:
        return None, validation_findings(exc, where, lines)
    warnings = [_f("warning", "unknown-key", where, "unknown key, ignored", lines.get(k), k)
                for k in (manifest.model_extra or {})]
    return manifest, warnings


def package_dirs(root: Path) -> tuple[list[Path], list[Finding]]:
    """Package folders under envs/ (sorted), skipping `_` and `.` folders."""
    envs = root / ENVS_DIR
    if not envs.is_dir():
        return [], [_f("error", "envs", str(envs), "no envs/ folder; put each task package in "
                       "envs/NAME/")]
    found: list[Path] = []
    findings: list[Finding] = []
    with os.scandir(envs) as it:  # bounded before sorting: envs/ may be hostile
        names = [e.name for e in itertools.islice(it, _MAX_LISTING + 1)]
    if len(names) > _MAX_LISTING:
        findings.append(_f("error", "too-many-tasks", str(envs),
                           f"more than {_MAX_LISTING} entries in envs/; only the first "
                           f"{_MAX_LISTING} were looked at"))
        names = names[:_MAX_LISTING]
    for name in sorted(names):
        if name.startswith(("_", ".")):
            continue
        entry = envs / name
        if entry.is_symlink():
            findings.append(_f("error", "symlink-outside", str(entry), "a package must be a "
                               "folder, not a symlink; copy it in"))
        elif entry.is_dir():
            found.append(entry)
            findings.extend(_task_name_findings(entry))
        else:
            findings.append(_f("warning", "envs", str(entry), "not a folder; ignored"))
    return found, findings


def check_collection(path: Path | str, limits: CheckLimits = DEFAULT_LIMITS,
                     jobs: int = 1) -> CollectionReport:
    """Check a collection directory and every package in it.

    `jobs` > 1 checks packages in that many processes (forked; Linux only, otherwise
    one). Only single-threaded callers such as the CLI should ask for it: forking a
    process that runs other threads (a web server's) is not safe.
    """
    root = Path(path)
    if not root.is_dir():
        return CollectionReport(path=str(root), findings=[_f(
            "error", "not-a-directory", str(root), "not a collection directory (expected a "
            "folder with submission.yaml and envs/)")])
    manifest, findings = load_submission(root / SUBMISSION_YAML)
    if manifest is not None and manifest.track is Track.SKILLS:
        findings.append(_f("warning", "track", str(root / SUBMISSION_YAML), "track 'skills': "
                           "this arena trains on the task packages under envs/; skills/ is "
                           "not checked", None, "track"))
    dirs, more = package_dirs(root)
    findings += more
    if (root / ENVS_DIR).is_dir() and len(dirs) < MIN_TASKS:
        findings.append(_f("error", "too-few-tasks", str(root / ENVS_DIR), "the collection "
                           "has no task packages; add at least one folder under envs/"))
    if len(dirs) > MAX_TASKS:
        findings.append(_f("error", "too-many-tasks", str(root / ENVS_DIR),
                           f"{len(dirs)} packages; a collection holds at most {MAX_TASKS}"))
    reports = check_tasks(dirs, limits, jobs)
    findings += _duplicates(reports)
    checksums = [(r.name, r.checksum) for r in reports if r.checksum]
    report = CollectionReport(
        path=str(root), findings=findings, tasks=reports, manifest=manifest,
        content_hash=combine_hashes(checksums) if len(checksums) == len(reports) else None,
        domain_counts=dict(sorted(Counter(r.domain for r in reports if r.domain).items())),
    )
    if report.ok and manifest is not None and report.content_hash is not None:
        report.collection = Collection(
            root=root, manifest=manifest, content_hash=report.content_hash,
            tasks=[r.package for r in reports if r.package is not None],
        )
    return report


#: Packages per process below which forking costs more than it saves.
_MIN_PER_JOB = 24


def check_tasks(dirs: list[Path], limits: CheckLimits = DEFAULT_LIMITS,
                jobs: int = 1) -> list[TaskReport]:
    """`check_task` on each folder, in order; in up to `jobs` processes.

    The calling process checks one share itself while forked children check the others
    and send their reports back pickled through a pipe. Checks only read files, so a
    share whose child failed is simply checked again here: a failure costs time, never
    a report.
    """
    jobs = min(jobs, len(dirs) // _MIN_PER_JOB)
    if jobs <= 1 or not hasattr(os, "fork") or sys.platform != "linux":
        return _check_share(dirs, limits)
    shares = [dirs[i::jobs] for i in range(jobs)]  # interleaved: package sizes vary
    children = [_fork_share(share, limits) for share in shares[1:]]
    done = [_check_share(shares[0], limits)]
    for share, (pid, fd) in zip(shares[1:], children, strict=True):
        with os.fdopen(fd, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        reports: list[TaskReport] | None = None
        if status == 0:
            try:
                reports = pickle.loads(data)
            except (pickle.UnpicklingError, EOFError, ValueError):
                reports = None
        done.append(reports if reports is not None else _check_share(share, limits))
    by_path = {r.path: r for share in done for r in share}
    return [by_path[str(d)] for d in dirs]


def _check_share(dirs: list[Path], limits: CheckLimits) -> list[TaskReport]:
    return [check_task(d, limits) for d in dirs]


def _fork_share(dirs: list[Path], limits: CheckLimits) -> tuple[int, int]:
    """Fork a child that checks `dirs`; return its pid and the pipe its reports come on."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: check, send, and leave without running any exit handlers
        status = 1
        try:
            os.close(read_fd)
            data = pickle.dumps(_check_share(dirs, limits), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    return pid, read_fd


def load_collection(path: Path | str, limits: CheckLimits = DEFAULT_LIMITS) -> Collection:
    """The checked Collection; SpecError with every error when it does not check clean."""
    report = check_collection(path, limits)
    if report.collection is None:
        raise SpecError(report.errors)
    return report.collection


def _task_name_findings(entry: Path) -> list[Finding]:
    name = entry.name
    if _TASK_NAME.match(name):
        return []
    bad = any(ord(c) < 32 or ord(c) == 127 or "\udc80" <= c <= "\udcff" for c in name)
    return [_f("error" if bad else "warning", "task-name", str(entry),
               "a task's folder name is its id in URLs and results: use 1-128 characters of "
               "letters, digits, '.', '_' and '-', starting with a letter or digit")]


def _duplicates(reports: list[TaskReport]) -> list[Finding]:
    by_hash: dict[str, list[str]] = {}
    for r in reports:
        if r.checksum:
            by_hash.setdefault(r.checksum, []).append(r.name)
    out = []
    for names in by_hash.values():
        for dup in names[1:]:
            r = next(r for r in reports if r.name == dup)
            out.append(_f("error", "duplicate", r.path, f"identical to {names[0]} (same "
                          "content hash); a collection counts each task once, remove one"))
    return out


def _f(severity: str, code: str, path: str, message: str, line: int | None = None,
       field: str | None = None) -> Finding:
    shown = path.encode("utf-8", "backslashreplace").decode("utf-8")  # printable, JSON-safe
    return Finding(severity=Severity(severity), code=code, path=shown, line=line,
                   field=field, message=message)
