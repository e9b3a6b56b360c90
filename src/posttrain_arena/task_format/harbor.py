"""Harbor / Terminal-Bench task directories, read as they are.

    task.toml               schema_version, [task], [metadata], [agent], [verifier],
                            [environment], multi_step_reward_strategy, [[steps]]
    instruction.md          the prompt
    environment/Dockerfile  the image; built even when task.toml names a prebuilt
                            `docker_image` (Harbor's --force-build)
    tests/test.sh           the verifier, mounted at /tests; writes
                            /logs/verifier/reward.txt (one number) or reward.json
    solution/solve.sh       the reference solution (the oracle)

`parse_harbor(root)` maps task.toml onto the same `TaskFrontmatter` that task.md
gives, so trials, checks and collections treat both alike. What this arena cannot do
as Harbor does is refused with the file, the key and the fix: GPUs,
`network_mode = "allowlist"`, verifier environment variables of the host (`${NAME}`),
a compose file with services besides `main` (several containers). A `docker_image`
with no Dockerfile is kept as `environment.docker_image` (the image is used as it is);
`[verifier] env` constants are passed to the verifier. `[[steps]]`
multi-step tasks are read by `task_format/steps.py`. Descriptive keys (`[metadata]`,
`[task]`, `artifacts`, ...) are never errors.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from posttrain_arena.task_format import dockerfile as df
from posttrain_arena.task_format.body import Section, TaskBody
from posttrain_arena.task_format.domain_map import category_notes
from posttrain_arena.task_format.files import err, read_text_file
from posttrain_arena.task_format.findings import Finding, Severity, SpecError, validation_findings
from posttrain_arena.task_format.rubric import Rubric, read_rubric
from posttrain_arena.task_format.steps import Step, Strategy, parse_steps
from posttrain_arena.task_format.task import TaskFrontmatter

TASK_TOML = "task.toml"
INSTRUCTION_MD = "instruction.md"
MAX_TOML_BYTES = 256 * 1024
MAX_INSTRUCTION_BYTES = 1024 * 1024
HARBOR_TESTS_MOUNT = "/tests"
"""Harbor uploads tests/ there; its test.sh files name that path."""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_SCALE_MB = {"": 1 / (1024 * 1024), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


class ParsedHarbor(NamedTuple):
    """task.toml + instruction.md read and mapped: the model (or None) and findings."""

    frontmatter: TaskFrontmatter | None
    body: TaskBody | None
    lines: dict[str, int]
    findings: list[Finding]
    rubric: Rubric | None = None
    steps: list[Step] = []
    strategy: Strategy = "mean"


def is_harbor(root: Path) -> bool:
    """Whether `root` is written in the Harbor layout (it has task.toml)."""
    return (root / TASK_TOML).is_file() or (root / TASK_TOML).is_symlink()


def toml_lines(text: str) -> dict[str, int]:
    """Dotted key -> 1-based line, for the plain `[table]` / `key = value` layout task.toml
    files use (enough to locate an error; values are read by tomllib)."""
    lines: dict[str, int] = {}
    table = ""
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        header = re.match(r"^\[\[?\s*([A-Za-z0-9_.\-]+)\s*\]\]?", line)
        if header:
            table = header.group(1)
            lines.setdefault(table, n)
            continue
        key = re.match(r"^([A-Za-z0-9_\-]+)\s*=", line)
        if key:
            lines.setdefault(f"{table}.{key.group(1)}" if table else key.group(1), n)
    return lines


def parse_harbor(root: Path, texts: Mapping[str, bytes] | None = None) -> ParsedHarbor:
    """Read `root/task.toml` and `root/instruction.md` without raising. `texts`: files
    already read by the caller's walk, by relative path."""
    where = str(root / TASK_TOML)
    texts = texts or {}
    try:
        text = read_text_file(root / TASK_TOML, MAX_TOML_BYTES, TASK_TOML, texts.get(TASK_TOML))
    except SpecError as exc:
        return ParsedHarbor(None, None, {}, list(exc.findings))
    lines = toml_lines(text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        return ParsedHarbor(None, None, lines, [err("toml", where, f"task.toml is not valid "
                                                    f"TOML: {exc}", line=line)])
    findings = _unsupported(root, data, lines, where)
    dockerfile = _dockerfile_text(root, texts.get("environment/Dockerfile"))
    prompt_text = _peek(root / INSTRUCTION_MD, texts.get(INSTRUCTION_MD))
    mapped, notes = to_frontmatter(data, _workdir(dockerfile), prompt_text,
                                   has_dockerfile=dockerfile is not None)
    findings += [Finding(severity=Severity.WARNING, code="harbor", path=where,
                         line=lines.get(key), field=key, message=msg) for key, msg in notes]
    frontmatter = None
    try:
        frontmatter = TaskFrontmatter.model_validate(mapped)
    except ValidationError as exc:
        findings += validation_findings(exc, where, lines)
    steps, strategy, more = parse_steps(root, data, lines, where, "harbor")
    findings += more
    body = None
    if steps:
        first = steps[0].prompt
        body = TaskBody(sections=[Section(kind="prompt", name="prompt", text=first, line=1,
                                          path=f"steps/{steps[0].name}/instruction.md")],
                        text=first)
    else:
        try:
            prompt = read_text_file(root / INSTRUCTION_MD, MAX_INSTRUCTION_BYTES,
                                    INSTRUCTION_MD, texts.get(INSTRUCTION_MD))
        except SpecError as exc:
            findings += [f.model_copy(update={"message": f.message + "; a Harbor task's "
                                              "prompt is instruction.md"})
                         for f in exc.findings]
        else:
            if not prompt.strip():
                findings.append(err("prompt", str(root / INSTRUCTION_MD), "instruction.md "
                                    "is empty; write the agent's instruction in it"))
            body = TaskBody(sections=[Section(kind="prompt", name="prompt",
                                              text=prompt.strip(), line=1,
                                              path=INSTRUCTION_MD)], text=prompt.strip())
    rubric, rubric_findings = read_rubric(root / "tests", texts.get("tests/verifier.md"))
    return ParsedHarbor(frontmatter, body, lines, findings + rubric_findings, rubric, steps,
                        strategy)


def to_frontmatter(data: dict[str, Any], workdir: str | None, prompt: str = "", *,
                   has_dockerfile: bool = True
                   ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """task.toml's tables as task.md frontmatter data; (key, message) notes to warn.
    `prompt` (instruction.md) helps place a free-form category (`domain_map`)."""
    notes: list[tuple[str, str]] = []
    meta = dict(_table(data, "metadata"))
    task = _table(data, "task")
    authors = task.get("authors")
    if isinstance(authors, list) and authors and isinstance(authors[0], dict):
        meta.setdefault("author_name", authors[0].get("name"))
        meta.setdefault("author_email", authors[0].get("email"))
    meta, note = category_notes(meta, prompt)
    if note is not None:
        notes.append(("metadata.category", note))
    env_in = _table(data, "environment")
    env: dict[str, Any] = {k: env_in[k] for k in
                           ("build_timeout_sec", "cpus", "memory_mb", "storage_mb", "workdir")
                           if k in env_in}
    for ours, theirs in (("memory_mb", "memory"), ("storage_mb", "storage")):
        if ours not in env and theirs in env_in:
            env[ours] = _megabytes(env_in[theirs])
    mode = env_in.get("network_mode")
    env["allow_internet"] = mode == "public" if mode is not None \
        else env_in.get("allow_internet", False)
    if workdir is not None:
        env.setdefault("workdir", workdir)
    image = env_in.get("docker_image")
    if isinstance(image, str) and image.strip():
        if has_dockerfile:
            notes.append(("environment.docker_image", f"{image} is Harbor's prebuilt copy "
                          "of environment/Dockerfile; the Dockerfile is built here instead "
                          "(as Harbor's --force-build), so the two cannot drift"))
        else:
            env["docker_image"] = image.strip()
    agent = {k: v for k, v in _table(data, "agent").items() if k == "timeout_sec"}
    verifier = {k: v for k, v in _table(data, "verifier").items()
                if k in ("timeout_sec", "env")}
    verifier["mount"] = HARBOR_TESTS_MOUNT
    # limits this arena adds, kept by `arena task convert --to harbor` in a free-form table
    arena = meta.pop("arena", None)
    if isinstance(arena, dict):
        for key in ("pids_limit",):
            if key in arena:
                env[key] = arena[key]
        if "state_paths" in arena:
            verifier["state_paths"] = arena["state_paths"]
    agent.setdefault("timeout_sec", 600)
    verifier.setdefault("timeout_sec", 600)
    # task.toml's schema_version is Harbor's own; the mapped model is task.md's 1.0
    return {"version": "1.0", "metadata": meta, "agent": agent, "verifier": verifier,
            "environment": env}, notes


def _unsupported(root: Path, data: dict[str, Any], lines: dict[str, int],
                 where: str) -> list[Finding]:
    """What Harbor runs and this arena cannot: errors that say what to change."""
    out: list[Finding] = []
    env = _table(data, "environment")

    def refuse(key: str, message: str) -> None:
        out.append(err("harbor-unsupported", where, message, line=lines.get(key), field=key))

    gpus = env.get("gpus", 0)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus != 0:
        refuse("environment.gpus", f"the task asks for {gpus!r} GPUs; trials here run without "
               "GPUs. Remove the key or set gpus = 0 if the task runs on CPU")
    if env.get("gpu_types"):
        refuse("environment.gpu_types", "GPU types are not supported (trials have no GPU); "
               "remove the key")
    mode = env.get("network_mode")
    if mode is not None and mode not in ("public", "no-network"):
        refuse("environment.network_mode", f"network_mode {mode!r} is not supported: use "
               '"no-network", or "public" for full access (host allowlists are not enforced '
               "here)")
    return out


def _dockerfile_text(root: Path, cached: bytes | None) -> str | None:
    try:
        return read_text_file(root / "environment" / "Dockerfile", 256 * 1024,
                              "environment/Dockerfile", cached)
    except SpecError:
        return None


def _peek(path: Path, cached: bytes | None) -> str:
    """A file's text for placing the task in a domain, or "" (errors are read later)."""
    try:
        return read_text_file(path, MAX_INSTRUCTION_BYTES, path.name, cached)
    except SpecError:
        return ""


def _workdir(text: str | None) -> str | None:
    """The Dockerfile's last WORKDIR (the agent's working directory), if absolute."""
    if text is None:
        return None
    found = None
    for ins in df.parse_dockerfile(text):
        if ins.keyword == "WORKDIR" and ins.args.strip().startswith("/"):
            found = ins.args.strip().strip("\"'")
    return found


def _megabytes(value: Any) -> Any:
    """'2G' / '512M' / '2048' (Harbor's older size strings) as MiB; else as given."""
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match:
            return max(1, int(float(match.group(1)) * _SCALE_MB[match.group(2).upper()]))
    return value


def _table(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name)
    return value if isinstance(value, dict) else {}
