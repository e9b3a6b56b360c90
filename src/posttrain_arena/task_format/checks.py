"""Structural checks of one task package, without running any of its code.

`check_task(path)` reports everything `load_task` finds, plus: unknown frontmatter keys
(warnings), the image's Dockerfile (present, first instruction FROM, COPY/ADD inside the
build context), the oracle and verifier entry points, answer leaks (files of `oracle/`
or `verifier/` copied into the build context), symlinks that leave the package or loop,
special files, file and package size limits, and odd path names. Answer leaks are
judged in `leaks.py`.

The package is walked once (`inventory.walk`) and each file read at most once.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from posttrain_arena.task_format import dockerfile as df
from posttrain_arena.task_format import trust
from posttrain_arena.task_format.compose import COMPOSE_FILE, compose_findings
from posttrain_arena.task_format.findings import Finding, Severity, SpecError
from posttrain_arena.task_format.harbor import parse_harbor
from posttrain_arena.task_format.inventory import Inventory, hash_contents, walk
from posttrain_arena.task_format.layout import LAYOUT_DIRS, Layout, detect_layout, task_toml_note
from posttrain_arena.task_format.leaks import leak_findings
from posttrain_arena.task_format.package import (
    PROMPTS_DIR,
    ParsedTaskMd,
    TaskPackage,
    VerifierKind,
    harbor_verifier,
    missing_harbor_verifier,
    missing_verifier,
    parse_task_md,
)
from posttrain_arena.task_format.task import TaskFrontmatter, unknown_keys

MiB = 1024 * 1024

_ODD_CHARS = frozenset(':*?"<>|')
# A cheap pre-filter over whole relative paths; _name_findings says what is wrong.
_SUSPECT_NAME = re.compile(r'[\x00-\x1f\x7f\\\udc80-\udcff:*?"<>|]|(^|/)\s|\s($|/)')
_MAX_DOCKERFILE_BYTES = 256 * 1024
#: Small files the checks parse after the walk: their bytes are kept from the one read.
MANIFESTS = frozenset({"task.md", "verifier/verifier.md", "environment/Dockerfile",
                       "task.toml", "instruction.md", "tests/verifier.md", COMPOSE_FILE})


class CheckLimits(BaseModel):
    """Bounds a package must stay within (the service applies the same ones)."""

    model_config = ConfigDict(frozen=True)

    max_file_bytes: int = Field(default=10 * MiB, gt=0, description="Largest single file")
    max_package_bytes: int = Field(default=50 * MiB, gt=0, description="All files together")
    max_entries: int = Field(
        default=5000, gt=0, description="Files, folders and links in one package"
    )


DEFAULT_LIMITS = CheckLimits()


class TaskReport(BaseModel):
    """The outcome of checking one package."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    path: str = Field(description="The package directory as given")
    name: str = Field(description="The package's directory name (its id in a collection)")
    findings: list[Finding] = Field(default_factory=list, description="Errors and warnings")
    checksum: str | None = Field(default=None, description="Canonical content hash")
    domain: str | None = Field(default=None, description="metadata.category, if it parsed")
    layout: Layout | None = Field(default=None, description="posttrain or harbor, if either")
    package: TaskPackage | None = Field(
        default=None, exclude=True, description="The loaded package when there are no errors"
    )

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.WARNING]

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed)."""
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        """A plain dict for `--json` output."""
        data = self.model_dump(mode="json")
        data["ok"] = self.ok
        for finding, raw in zip(self.findings, data["findings"], strict=True):
            raw["rendered"] = finding.render()
        return data


def check_task(path: Path | str, limits: CheckLimits = DEFAULT_LIMITS) -> TaskReport:
    """Check one package; never raises for anything found in the package itself."""
    root = Path(path)
    name = os.path.basename(os.path.abspath(root))
    if not root.is_dir():
        msg = "no such directory" if not root.exists() else "not a directory"
        return TaskReport(path=str(root), name=name, findings=[
            _f("error", "not-a-directory", str(root),
               f"{msg}; a task package is a folder with task.md")])
    inv = walk(root, limits.max_entries)
    findings = _tree_findings(root, inv, limits)
    try:
        layout = detect_layout(root)
    except SpecError as exc:
        return TaskReport(path=str(root), name=name, findings=findings + list(exc.findings))
    secret = LAYOUT_DIRS[layout]
    readable = not any(f.severity is Severity.ERROR for f in findings)
    if readable:
        hash_contents(inv, MANIFESTS | {e.rel for e in inv.under(PROMPTS_DIR)})
        findings += [_f("error", "unreadable", str(root / rel), f"cannot read: {why}")
                     for rel, why in inv.unreadable]
    if layout is Layout.HARBOR:
        harbor = parse_harbor(root, inv.texts)
        frontmatter, body, rubric = harbor.frontmatter, harbor.body, harbor.rubric
        steps, strategy = harbor.steps, harbor.strategy
        findings += harbor.findings
        kind = harbor_verifier(root, steps)
        if kind is None:
            findings.append(missing_harbor_verifier(root))
    else:
        parsed = parse_task_md(root, inv.texts, layout)
        frontmatter, body, rubric = parsed.frontmatter, parsed.body, parsed.rubric
        steps, strategy = parsed.steps, parsed.strategy
        findings += parsed.findings + _task_md_warnings(root, parsed)
        note = task_toml_note(root)
        findings += [note] if note is not None else []
        kind = _verifier_kind(inv, secret[0])
        if kind is None:
            findings.append(missing_verifier(root, secret[0]))
    findings += compose_findings(root, inv.texts.get(COMPOSE_FILE))
    findings += _layout_findings(root, inv, secret[1], bool(steps and any(
        st.oracle_dir for st in steps)), frontmatter)
    findings += _dockerfile_findings(root, inv, frontmatter)
    raw = inv.texts.get("environment/Dockerfile")
    findings += leak_findings(root, inv, secret[0], secret[1],
                              raw.decode("utf-8", "replace") if raw is not None else None,
                              ("steps",) if steps else ())
    report = TaskReport(path=str(root), name=name, findings=findings, checksum=inv.checksum,
                        layout=layout)
    if frontmatter is not None:
        report.domain = frontmatter.metadata.category.value
    if report.ok and frontmatter and body and kind and inv.checksum:
        report.package = TaskPackage(root=root, name=name, frontmatter=frontmatter, body=body,
                                     verifier_kind=kind, checksum=inv.checksum, layout=layout,
                                     rubric=rubric, steps=steps, step_strategy=strategy)
    return report


# --- the tree: sizes, special files, symlinks, names -------------------------------------


def _tree_findings(root: Path, inv: Inventory, limits: CheckLimits) -> list[Finding]:
    out: list[Finding] = []
    for rel, why in inv.unreadable:
        out.append(_f("error", "unreadable", str(root / rel), f"cannot read: {why}"))
    if inv.truncated:
        out.append(_f("error", "too-many-files", str(root),
                      f"more than {limits.max_entries} files and folders; keep packages "
                      "small and generate bulk data in the Dockerfile"))
    if inv.total_bytes > limits.max_package_bytes:
        out.append(_f("error", "package-too-large", str(root),
                      f"package holds {_mib(inv.total_bytes)} of files; the limit is "
                      f"{_mib(limits.max_package_bytes)}"))
    real_root = os.path.realpath(root) if any(e.kind == "link" for e in inv.entries) else ""
    for e in inv.entries:
        if _SUSPECT_NAME.search(e.rel):
            out.extend(_name_findings(str(root / e.rel), e.rel.rpartition("/")[2]))
        if e.kind == "file":
            if e.size > limits.max_file_bytes:
                out.append(_f("error", "file-too-large", str(root / e.rel),
                              f"{_mib(e.size)}; the limit per file is "
                              f"{_mib(limits.max_file_bytes)}"))
        elif e.kind == "link":
            out.extend(_link_findings(root, real_root, e.rel, e.target or ""))
        elif e.kind == "other":
            out.append(_f("error", "special-file", str(root / e.rel), "not a regular file, "
                          "folder or symlink (a device, socket or pipe); remove it"))
    return out


def _link_findings(root: Path, real_root: str, rel: str, target: str) -> list[Finding]:
    where = str(root / rel)
    if os.path.isabs(target):
        return [_f("error", "symlink-outside", where, f"absolute symlink to {target!r}; "
                   "copy the file into the package or use a relative link inside it")]
    try:
        resolved = os.path.realpath(root / rel, strict=True)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return [_f("error", "symlink-loop", where, f"symlink loop via {target!r}")]
        resolved = os.path.realpath(root / rel)
        if _inside(resolved, real_root):
            return [_f("warning", "symlink-dangling", where,
                       f"symlink to {target!r}, which does not exist in the package")]
    if not _inside(resolved, real_root):
        return [_f("error", "symlink-outside", where, f"symlink to {target!r} leaves the "
                   "package; copy the file in instead")]
    if rel.startswith("environment/"):
        inside = os.path.relpath(resolved, real_root)
        if inside.split(os.sep)[0] in ("oracle", "verifier"):
            return [_f("error", "answer-leak", where, f"symlink into {inside!r}: the image "
                       "must not see the oracle or verifier")]
        if not _inside(resolved, os.path.join(real_root, "environment")):
            return [_f("warning", "symlink-context", where, "points outside environment/ "
                       "(the build context); Docker copies the link, not its target")]
    return []


def _name_findings(where: str, name: str) -> list[Finding]:
    if any(ord(c) < 32 or ord(c) == 127 for c in name) or "\\" in name:
        return [_f("error", "path-name", where, "control characters or backslashes in a "
                   "file name; rename it")]
    if any("\udc80" <= c <= "\udcff" for c in name):
        return [_f("error", "path-name", where, "file name is not valid UTF-8; rename it")]
    if name != name.strip() or any(c in _ODD_CHARS for c in name):
        return [_f("warning", "path-name", where, 'file name has leading or trailing spaces '
                   'or one of :*?"<>|, which some systems cannot store; rename it')]
    return []


# --- task.md, layout, Dockerfile ---------------------------------------------------------


def _task_md_warnings(root: Path, parsed: ParsedTaskMd) -> list[Finding]:
    where = str(root / "task.md")
    out: list[Finding] = []
    if parsed.frontmatter is not None:
        for key in unknown_keys(parsed.frontmatter):
            out.append(_f("warning", "unknown-key", where, "unknown key, ignored; check its "
                          "spelling against `arena task schema`", parsed.lines.get(key), key))
        for key, message in parsed.frontmatter.metadata.descriptive_notes():
            out.append(_f("warning", "descriptive", where, message, parsed.lines.get(key), key))
    if parsed.body is not None:
        seen: set[tuple[str, str]] = set()
        for s in parsed.body.sections:
            if s.kind == "other":
                continue
            if (s.kind, s.name.lower()) in seen:
                what = "'## prompt' section" if s.kind == "prompt" else f"{s.kind} {s.name!r}"
                out.append(_f("warning", "body", where, f"duplicate {what}; only the first "
                              "is used", s.line))
            seen.add((s.kind, s.name.lower()))
            if s.kind != "prompt" and not s.text.strip():
                out.append(_f("warning", "body", where, f"{s.kind} {s.name!r} is empty",
                              s.line))
    return out


def _verifier_kind(inv: Inventory, folder: str) -> VerifierKind | None:
    files = {e.rel for e in inv.entries if e.kind == "file"}
    for kind in VerifierKind:
        if f"{folder}/{kind.value}" in files:
            return kind
    return None


def _layout_findings(root: Path, inv: Inventory, oracle: str, step_oracles: bool,
                     frontmatter: TaskFrontmatter | None) -> list[Finding]:
    kinds = {e.rel: e.kind for e in inv.entries}
    out: list[Finding] = []
    if kinds.get(f"{oracle}/solve.sh") != "file" and not step_oracles:
        out.append(_f("error", "oracle", str(root / oracle), f"no {oracle}/solve.sh; add the "
                      "reference solution (it runs inside the task image)"))
    image = frontmatter.environment.docker_image if frontmatter else None
    if "environment/Dockerfile" not in kinds and image:
        out.append(_f("warning", "base-image", str(root / "task.toml"), f"no "
                      f"environment/Dockerfile: trials run in the prebuilt image {image} as "
                      "it is, used where the engine has it or can pull it (else the run "
                      "says how to load or map it); the local backend runs on the host's "
                      "system and cannot honour it", field="environment.docker_image"))
    elif kinds.get("environment/Dockerfile") != "file":
        what = "is not a regular file" if "environment/Dockerfile" in kinds else "is missing"
        out.append(_f("error", "dockerfile", str(root / "environment" / "Dockerfile"),
                      f"environment/Dockerfile {what}; the task image is built from it"))
    return out


def _dockerfile_findings(root: Path, inv: Inventory,
                         frontmatter: TaskFrontmatter | None) -> list[Finding]:
    entry = next((e for e in inv.entries if e.rel == "environment/Dockerfile"), None)
    if entry is None or entry.kind != "file":
        return []
    where = str(root / entry.rel)
    if entry.size > _MAX_DOCKERFILE_BYTES:
        return [_f("error", "dockerfile", where, "Dockerfile larger than 256 KiB")]
    try:
        raw = inv.texts.get(entry.rel)
        text = (raw if raw is not None else (root / entry.rel).read_bytes()).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return [_f("error", "dockerfile", where, "Dockerfile is not UTF-8 text")]
    instructions = df.parse_dockerfile(text)
    first = df.first_instruction(instructions)
    if first is None:
        return [_f("error", "dockerfile", where, "no instructions; start with FROM IMAGE")]
    if first.keyword != "FROM":
        return [_f("error", "dockerfile", where, f"the first instruction must be FROM "
                   f"(got {first.keyword})", first.line)]
    out: list[Finding] = []
    if not first.args:
        out.append(_f("error", "dockerfile", where, "FROM needs an image", first.line))
    context = {e.rel[len("environment/"):] for e in inv.under("environment")}
    for src in df.copy_sources(instructions):
        line = src.instruction.line
        if df.is_remote(src.source):
            out.append(_f("warning", "dockerfile", where, f"{src.instruction.keyword} "
                          f"{src.source} downloads while building; air-gapped hosts cannot "
                          "build it. Put the file in environment/ instead", line))
        elif df.escapes_context(src.source):
            out.append(_f("error", "dockerfile", where, f"{src.source!r} is outside the "
                          "build context (environment/)", line))
        else:
            lit = df.literal_path(src.source)
            if lit is not None and lit != "." and lit not in context:
                out.append(_f("error", "dockerfile", where, f"{src.instruction.keyword} "
                              f"source {src.source!r} is not in environment/", line))
    for base in df.base_images(instructions):
        if base.image not in df.LOCAL_BASE_IMAGES:
            out.append(_f("warning", "base-image", where, f"FROM {base.image} is pulled "
                          "from a registry when the image is built; a machine without one "
                          "needs it pulled elsewhere and `docker load`ed, a registry "
                          "mirror, or an entry in the image map (ARENA_IMAGE_MAP, `arena "
                          "task run --image-map`; docs/task-format.md, \"Base images\")",
                          base.line))
    if frontmatter is not None and frontmatter.verifier.isolation.value == "fresh":
        out += _state_runtime_findings(where, instructions, frontmatter)
    return out


def _state_runtime_findings(where: str, instructions: list[df.Instruction],
                            frontmatter: TaskFrontmatter) -> list[Finding]:
    """ENV values that make the verifier resolve programs inside the agent's state."""
    roots = trust.state_roots(frontmatter.environment.workdir,
                              list(frontmatter.verifier.state_paths))
    env = trust.dockerfile_env([(i.keyword, i.args, i.line) for i in instructions])
    out: list[Finding] = []
    for name, (value, line) in sorted(env.items()):
        for problem in trust.untrusted_entries({name: value}, roots):
            out.append(_f("error", "state-runtime", where,
                          f"{problem}: the agent could plant a program or a .pth file there "
                          f"that the fresh verifier runs as root; {trust.FIX}", line or None))
    return out


# --- helpers -----------------------------------------------------------------------------


def _f(severity: str, code: str, path: str, message: str, line: int | None = None,
       field: str | None = None) -> Finding:
    # Undecodable names (surrogate escapes) would break JSON and terminals: show escapes.
    shown = path.encode("utf-8", "backslashreplace").decode("utf-8")
    return Finding(severity=Severity(severity), code=code, path=shown, line=line,
                   field=field, message=message)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB"
