"""TaskPackage: a task directory loaded into one frozen object.

`load_task(path)` reads task.md and inspects the layout without running any package
code. It raises SpecError (with located findings) when the package cannot be used; the
deeper checks in `checks.py` add warnings and the safety checks.
"""

from __future__ import annotations

import os
import stat
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from posttrain_arena.spec.body import TaskBody, parse_body
from posttrain_arena.spec.domains import Domain
from posttrain_arena.spec.findings import Finding, Severity, SpecError
from posttrain_arena.spec.hashing import tree_hash
from posttrain_arena.spec.task import TaskFrontmatter
from posttrain_arena.spec.yamlsafe import YamlProblem, load_yaml

TASK_MD = "task.md"
MAX_TASK_MD_BYTES = 1024 * 1024


class VerifierKind(StrEnum):
    """The verifier's entry point, in order of preference."""

    VERIFIER_PY = "verifier.py"
    TEST_SH = "test.sh"
    PYTEST = "test_outputs.py"


class TaskPackage(BaseModel):
    """One task, loaded and validated."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    root: Path = Field(description="The package directory")
    name: str = Field(description="Directory name; the task's id within a collection")
    frontmatter: TaskFrontmatter
    body: TaskBody
    verifier_kind: VerifierKind = Field(description="Which verifier entry point runs")
    checksum: str = Field(description="Content hash of the canonical package")

    @property
    def prompt(self) -> str:
        return self.body.prompt or ""

    @property
    def domain(self) -> Domain:
        return self.frontmatter.metadata.category

    @property
    def environment_dir(self) -> Path:
        return self.root / "environment"

    @property
    def verifier_dir(self) -> Path:
        return self.root / "verifier"

    @property
    def oracle_dir(self) -> Path:
        return self.root / "oracle"

    @property
    def dockerfile(self) -> Path:
        return self.environment_dir / "Dockerfile"


def read_small_file(path: Path, limit: int, label: str, hint: str) -> bytes:
    """The bytes of a manifest file; SpecError when missing, not a regular file or large.

    Symlinks are refused (never followed): a manifest linked to a file outside the
    package would have its content quoted back in error messages.
    """
    where = str(path)
    try:
        info = path.lstat()
    except OSError:
        raise SpecError([_err("missing", where, f"{label} is missing; {hint}")]) from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        what = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise SpecError([_err("missing", where, f"{label} is {what}; it must be a plain file")])
    if info.st_size > limit:
        raise SpecError([_err("too-large", where, f"{label} is {info.st_size} bytes; the "
                              f"limit is {limit} bytes")])
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise SpecError([_err("unreadable", where, f"cannot read {label}: "
                              f"{exc.strerror or exc}")]) from None
    if len(raw) > limit:
        raise SpecError([_err("too-large", where, f"{label} is over {limit} bytes")])
    return raw


def read_task_md(path: Path) -> str:
    """task.md's text; SpecError when missing, too large, binary or not UTF-8."""
    where = str(path)
    raw = read_small_file(path, MAX_TASK_MD_BYTES, "task.md", "run `arena task new`")
    if b"\0" in raw:
        raise SpecError([_err("binary", where, "task.md is binary; it must be UTF-8 text")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError([_err("encoding", where, f"task.md is not UTF-8 (byte {exc.start}); "
                              "save it as UTF-8", line=line)]) from None


def split_frontmatter(text: str, where: str) -> tuple[str, str, int]:
    """(yaml_text, body_text, body_first_line) from `---` delimited task.md text."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise SpecError([_err("frontmatter", where, "task.md must start with a '---' line "
                              "opening the YAML frontmatter", line=1)])
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :]), i + 2
    raise SpecError([_err("frontmatter", where, "the YAML frontmatter is never closed; add "
                          "a '---' line after it", line=1)])


def parse_frontmatter(
    yaml_text: str, where: str
) -> tuple[TaskFrontmatter | None, dict[str, int], list[Finding]]:
    """Validate frontmatter text; returns the model (or None) and findings with lines.

    Lines in the result are task.md lines (the frontmatter starts on line 2).
    """
    try:
        data, lines = load_yaml(yaml_text)
    except YamlProblem as exc:
        line = exc.line + 1 if exc.line is not None else None
        return None, {}, [_err("yaml", where, str(exc), line=line)]
    lines = {k: v + 1 for k, v in lines.items()}
    if not isinstance(data, dict):
        return None, lines, [_err("frontmatter", where, "the frontmatter must be a YAML mapping "
                                  f"(got {type(data).__name__})", line=1)]
    try:
        return TaskFrontmatter.model_validate(data), lines, []
    except ValidationError as exc:
        return None, lines, validation_findings(exc, where, lines)


def validation_findings(
    exc: ValidationError, where: str, lines: dict[str, int], code: str = "schema"
) -> list[Finding]:
    """Turn pydantic errors into `file:line: field: what (got ...)` findings."""
    out = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        dotted = ".".join(loc)
        line = None
        for n in range(len(loc), 0, -1):
            line = lines.get(".".join(loc[:n]))
            if line is not None:
                break
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "is required"
        elif "input" in err and not isinstance(err["input"], dict | list):
            msg = f"{msg} (got {_short(err['input'])})"
        out.append(Finding(severity=Severity.ERROR, code=code, path=where, line=line,
                           field=dotted or None, message=msg))
    return out


def detect_verifier(verifier_dir: Path) -> VerifierKind | None:
    """The verifier entry point present in `verifier/`, by preference order."""
    for kind in (VerifierKind.VERIFIER_PY, VerifierKind.TEST_SH, VerifierKind.PYTEST):
        if (verifier_dir / kind.value).is_file():
            return kind
    return None


class ParsedTaskMd(NamedTuple):
    """task.md read and validated: what parsed, plus the findings (errors) on the way."""

    frontmatter: TaskFrontmatter | None
    body: TaskBody | None
    lines: dict[str, int]
    findings: list[Finding]


def parse_task_md(root: Path) -> ParsedTaskMd:
    """Read and validate `root/task.md` without raising; problems come back as findings."""
    where = str(root / TASK_MD)
    try:
        text = read_task_md(root / TASK_MD)
        yaml_text, body_text, body_line = split_frontmatter(text, where)
    except SpecError as exc:
        return ParsedTaskMd(None, None, {}, list(exc.findings))
    frontmatter, lines, findings = parse_frontmatter(yaml_text, where)
    body = parse_body(body_text, body_line)
    if body.prompt is None:
        findings.append(_err("prompt", where, "no '## prompt' section (or '## scene: NAME'); "
                             "add one with the agent's instruction"))
    elif not body.prompt.strip():
        findings.append(_err("prompt", where, "the '## prompt' section is empty; write the "
                             "agent's instruction under it"))
    return ParsedTaskMd(frontmatter, body, lines, findings)


def missing_verifier(root: Path) -> Finding:
    """The finding for a package without a verifier entry point."""
    return _err("verifier", str(root / "verifier"), "no verifier entry point; add "
                "verifier/verifier.py, verifier/test.sh or verifier/test_outputs.py")


def load_task(path: Path | str, checksum: str | None = None) -> TaskPackage:
    """Load a task package; raise SpecError listing every blocking problem found.

    `checksum`, when the caller has already hashed the tree (the checks do, in their
    single walk), saves reading every file a second time.
    """
    root = Path(path)
    if not root.is_dir():
        raise SpecError([_err("not-a-directory", str(root),
                              "not a task directory (expected a folder with task.md)")])
    parsed = parse_task_md(root)
    findings = list(parsed.findings)
    kind = detect_verifier(root / "verifier")
    if kind is None:
        findings.append(missing_verifier(root))
    if parsed.frontmatter is None or parsed.body is None or kind is None or findings:
        raise SpecError(findings)
    return TaskPackage(root=root, name=root.resolve().name, frontmatter=parsed.frontmatter,
                       body=parsed.body, verifier_kind=kind,
                       checksum=checksum or tree_hash(root))


def _err(code: str, path: str, message: str, line: int | None = None,
         field: str | None = None) -> Finding:
    return Finding(severity=Severity.ERROR, code=code, path=path, line=line, field=field,
                   message=message)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
