"""TaskPackage: a task directory loaded into one frozen object.

`load_task(path)` reads task.md and inspects the layout without running any package
code. It raises SpecError (with located findings) when the package cannot be used; the
deeper checks in `checks.py` add warnings and the safety checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from posttrain_arena.task_format.body import (
    Section,
    TaskBody,
    parse_body,
    sidecar_kind,
    sidecar_sections,
)
from posttrain_arena.task_format.compose import compose_findings
from posttrain_arena.task_format.domain_map import category_notes
from posttrain_arena.task_format.domains import Domain
from posttrain_arena.task_format.files import read_small_file, read_text_file
from posttrain_arena.task_format.findings import Finding, Severity, SpecError, validation_findings
from posttrain_arena.task_format.harbor import TASK_TOML, parse_harbor
from posttrain_arena.task_format.hashing import tree_hash
from posttrain_arena.task_format.layout import (
    BENCHFLOW_TESTS_MOUNT,
    LAYOUT_DIRS,
    TASK_MD,
    Layout,
    detect_layout,
)
from posttrain_arena.task_format.rubric import VERIFIER_MD, Rubric, read_rubric
from posttrain_arena.task_format.steps import Step, Strategy, parse_steps
from posttrain_arena.task_format.task import (
    SPELLINGS,
    TaskFrontmatter,
    normalize_spellings,
    version_tuple,
)
from posttrain_arena.task_format.yamlsafe import YamlProblem, load_yaml

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
    layout: Layout = Field(default=Layout.POSTTRAIN, description="The directory's format")
    rubric: Rubric | None = Field(
        default=None, description="verifier.md's rubric: how dimension scores make the reward"
    )
    steps: list[Step] = Field(default_factory=list, description="Multi-step tasks' steps")
    step_strategy: Strategy = Field(default="mean", description="mean or final step reward")
    verifier_path: Path | None = Field(
        default=None, description="Overrides the layout's verifier folder (one step's)"
    )
    oracle_path: Path | None = Field(
        default=None, description="Overrides the layout's oracle folder (one step's)"
    )

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
        """The folder the verifier phase mounts (verifier/, or tests/ for Harbor)."""
        return self.verifier_path or self.root / LAYOUT_DIRS[self.layout][0]

    @property
    def oracle_dir(self) -> Path:
        """The reference solution's folder (oracle/, or solution/ for Harbor)."""
        return self.oracle_path or self.root / LAYOUT_DIRS[self.layout][1]

    @property
    def verifier_mount(self) -> str:
        """Where the verifier folder appears in the verifier's session: /verifier, or
        what task.md says (/tests for Harbor tasks, whose test.sh names that path)."""
        return self.frontmatter.verifier.mount

    @property
    def dockerfile(self) -> Path:
        return self.environment_dir / "Dockerfile"

    @property
    def prebuilt_image(self) -> str | None:
        """The image the task runs in as it is (Harbor's `docker_image`), when it has no
        environment/Dockerfile to build; None when the Dockerfile is built."""
        image = self.frontmatter.environment.docker_image
        return image if image and not self.dockerfile.is_file() else None


def read_task_md(path: Path, cached: bytes | None = None) -> str:
    """task.md's text; SpecError when missing, too large, binary or not UTF-8.
    `cached`: its bytes, when the caller's walk already read them as a regular file."""
    where = str(path)
    raw = cached if cached is not None and len(cached) <= MAX_TASK_MD_BYTES else \
        read_small_file(path, MAX_TASK_MD_BYTES, "task.md", "run `arena task new`")
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
    yaml_text: str, where: str, prompt: str = "", layout: Layout = Layout.POSTTRAIN
) -> tuple[TaskFrontmatter | None, dict[str, int], list[Finding]]:
    """Validate frontmatter text; returns the model (or None) and findings with lines:
    errors, and the warning of a category that is not a domain slug (placed by
    `domain_map` with `prompt`'s help, never an error).

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
    data, problems = normalize_spellings(data)
    renamed = {name: other for other, name in SPELLINGS.items() if other in lines}
    for name, other in renamed.items():
        for key in [k for k in lines if k == other or k.startswith(other + ".")]:
            lines.setdefault(name + key[len(other):], lines[key])
    findings = [_err("conflict", where, msg, line=lines.get(key), field=key)
                for key, msg in problems]
    if findings:
        return None, lines, findings
    notes: list[Finding] = []
    meta = data.get("metadata")
    if isinstance(meta, dict):
        meta, note = category_notes(meta, prompt)
        data["metadata"] = meta
        if note is not None:
            notes.append(Finding(severity=Severity.WARNING, code="category", path=where,
                                 line=lines.get("metadata.category", lines.get("metadata")),
                                 field="metadata.category", message=note))
    if layout is Layout.BENCHFLOW and isinstance(data.get("verifier"), dict):
        data["verifier"] = {"mount": BENCHFLOW_TESTS_MOUNT, **data["verifier"]}
    try:
        return TaskFrontmatter.model_validate(data), lines, notes
    except ValidationError as exc:
        found = validation_findings(exc, where, lines)
        return None, lines, notes + [_respelled(f, renamed) for f in found]


def _respelled(finding: Finding, renamed: dict[str, str]) -> Finding:
    """A finding about `environment.x` names `sandbox.x` when the file wrote that."""
    top, dot, rest = (finding.field or "").partition(".")
    if top in renamed:
        return finding.model_copy(update={"field": renamed[top] + dot + rest})
    return finding


def detect_verifier(verifier_dir: Path) -> VerifierKind | None:
    """The verifier entry point present in `verifier/`, by preference order."""
    for kind in (VerifierKind.VERIFIER_PY, VerifierKind.TEST_SH, VerifierKind.PYTEST):
        if (verifier_dir / kind.value).is_file():
            return kind
    return None


class ParsedTaskMd(NamedTuple):
    """task.md read and validated: what parsed, plus the findings on the way (errors,
    and the warnings of verifier.md's rubric)."""

    frontmatter: TaskFrontmatter | None
    body: TaskBody | None
    lines: dict[str, int]
    findings: list[Finding]
    rubric: Rubric | None = None
    steps: list[Step] = []
    strategy: Strategy = "mean"


PROMPTS_DIR = "prompts"
MAX_SIDECAR_BYTES = 256 * 1024
MAX_SIDECARS = 64


def read_sidecars(root: Path, texts: Mapping[str, bytes] | None = None
                  ) -> tuple[list[Section], list[Finding]]:
    """Sections from `prompts/scene.NAME.md`, `prompts/role.NAME.md` and
    `prompts/user-persona.md` (schema 1.3); other files there are a warning."""
    folder = root / PROMPTS_DIR
    if not folder.is_dir() or folder.is_symlink():
        return [], []
    found: dict[str, str] = {}
    findings: list[Finding] = []
    for entry in sorted(folder.iterdir())[:MAX_SIDECARS + 1]:
        rel = f"{PROMPTS_DIR}/{entry.name}"
        if sidecar_kind(entry.name) is None:
            findings.append(Finding(severity=Severity.WARNING, code="sidecar", path=str(entry),
                                    message="not a prompt sidecar (scene.NAME.md, role.NAME.md "
                                    "or user-persona.md); ignored"))
            continue
        if len(found) >= MAX_SIDECARS:
            findings.append(_err("sidecar", str(folder), f"more than {MAX_SIDECARS} sidecars"))
            break
        try:
            found[rel] = read_text_file(entry, MAX_SIDECAR_BYTES, rel,
                                        (texts or {}).get(rel))
        except SpecError as exc:
            findings.extend(exc.findings)
    return sidecar_sections(found), findings


def parse_task_md(root: Path, texts: Mapping[str, bytes] | None = None,
                  layout: Layout = Layout.POSTTRAIN) -> ParsedTaskMd:
    """Read and validate `root/task.md` (with its prompt sidecars and verifier.md's
    rubric) without raising; problems come back as findings. `texts`: files already
    read by the caller's walk, by relative path (see `inventory.hash_contents`).
    `layout`: POSTTRAIN, or BENCHFLOW (its verifier is tests/, mounted at /tests)."""
    where = str(root / TASK_MD)
    texts = texts or {}
    try:
        text = read_task_md(root / TASK_MD, texts.get(TASK_MD))
        yaml_text, body_text, body_line = split_frontmatter(text, where)
    except SpecError as exc:
        return ParsedTaskMd(None, None, {}, list(exc.findings))
    frontmatter, lines, findings = parse_frontmatter(yaml_text, where, body_text, layout)
    sidecars, more = read_sidecars(root, texts)
    findings += more
    body = parse_body(body_text, body_line).with_sections(sidecars)
    if frontmatter is not None and version_tuple(frontmatter.version) == (1, 0) \
            and body.prompt is not None and not any(
                s.kind == "prompt" for s in body.sections):
        findings.append(Finding(severity=Severity.WARNING, code="posttrain-prompt",
                                path=where, line=body_line, message="a version \"1.0\" "
                                "task.md without a '## prompt' section: read here (the body "
                                "is the prompt), but the published PostTrain Arena's "
                                "structural check rejects it. Put the instruction under "
                                "'## prompt', or declare version \"1.3\""))
    if body.prompt is None:
        findings.append(_err("prompt", where, "no prompt: the body is empty and there is no "
                             "'## prompt' section or scene; write the agent's instruction "
                             "(under '## prompt', or as the body itself)"))
    elif not body.prompt.strip():
        findings.append(_err("prompt", where, "the '## prompt' section is empty; write the "
                             "agent's instruction under it"))
    tests = LAYOUT_DIRS[layout][0]
    rubric, notes = read_rubric(root / tests, texts.get(f"{tests}/{VERIFIER_MD}"))
    findings += notes
    steps: list[Step] = []
    strategy: Strategy = "mean"
    if frontmatter is not None and frontmatter.steps is not None:
        steps, strategy, more = parse_steps(root, {
            "steps": frontmatter.steps,
            "multi_step_reward_strategy": frontmatter.multi_step_reward_strategy}, lines,
            where, "posttrain")
        findings += more
    return ParsedTaskMd(frontmatter, body, lines, findings, rubric, steps, strategy)


def missing_verifier(root: Path, folder: str = "verifier") -> Finding:
    """The finding for a package without a verifier entry point in `folder`."""
    return _err("verifier", str(root / folder), "no verifier entry point; add "
                f"{folder}/verifier.py, {folder}/test.sh or {folder}/test_outputs.py")


def is_task_dir(path: Path) -> bool:
    """Whether `path` holds a task package in either layout (task.md or task.toml)."""
    return (path / TASK_MD).is_file() or (path / TASK_TOML).is_file()


def harbor_verifier(root: Path, steps: list[Step] | None = None) -> VerifierKind | None:
    """A Harbor task's verifier entry point: tests/test.sh, the only one Harbor runs (for
    a multi-step task, each step's tests/ or the task's must hold one)."""
    if steps:
        ok = all((s.verifier_dir is not None and (s.verifier_dir / "test.sh").is_file())
                 or (root / "tests" / "test.sh").is_file() for s in steps)
        return VerifierKind.TEST_SH if ok else None
    return VerifierKind.TEST_SH if (root / "tests" / "test.sh").is_file() else None


def missing_harbor_verifier(root: Path) -> Finding:
    """The finding for a Harbor task without tests/test.sh."""
    return _err("verifier", str(root / "tests" / "test.sh"), "no tests/test.sh; a Harbor "
                "task is verified by it (it writes /logs/verifier/reward.txt)")


def load_task(path: Path | str, checksum: str | None = None) -> TaskPackage:
    """Load a task package (PostTrain or Harbor layout); raise SpecError listing every
    blocking problem found.

    `checksum`, when the caller has already hashed the tree (the checks do, in their
    single walk), saves reading every file a second time.
    """
    root = Path(path)
    if not root.is_dir():
        raise SpecError([_err("not-a-directory", str(root), "not a task directory (expected "
                              f"a folder with {TASK_MD}, or {TASK_TOML} for a Harbor task)")])
    layout = detect_layout(root)
    if layout is Layout.HARBOR:
        harbor = parse_harbor(root)
        frontmatter, body, rubric = harbor.frontmatter, harbor.body, harbor.rubric
        steps, strategy = harbor.steps, harbor.strategy
        findings = list(harbor.findings)
        kind = harbor_verifier(root, steps)
        if kind is None:
            findings.append(missing_harbor_verifier(root))
    else:
        parsed = parse_task_md(root, layout=layout)
        frontmatter, body, rubric = parsed.frontmatter, parsed.body, parsed.rubric
        steps, strategy = parsed.steps, parsed.strategy
        findings = list(parsed.findings)
        tests = LAYOUT_DIRS[layout][0]
        kind = detect_verifier(root / tests)
        if kind is None:
            findings.append(missing_verifier(root, tests))
    findings += compose_findings(root)
    blocking = [f for f in findings if f.severity is Severity.ERROR]
    if frontmatter is None or body is None or kind is None or blocking:
        raise SpecError(blocking)
    return TaskPackage(root=root, name=root.resolve().name, frontmatter=frontmatter,
                       body=body, verifier_kind=kind, rubric=rubric, layout=layout,
                       steps=steps, step_strategy=strategy,
                       checksum=checksum or tree_hash(root))


def _err(code: str, path: str, message: str, line: int | None = None,
         field: str | None = None) -> Finding:
    return Finding(severity=Severity.ERROR, code=code, path=path, line=line, field=field,
                   message=message)
