"""Multi-step tasks: several instructions in one environment, each step verified.

Harbor declares them in task.toml; packages here the same way in task.md:

    # task.toml (Harbor)                  # task.md frontmatter
    multi_step_reward_strategy = "mean"   multi_step_reward_strategy: mean
    [[steps]]                             steps:
    name = "write"                          - name: write
    [[steps]]                               - name: check
    name = "check"                            agent: {timeout_sec: 120}
    [steps.agent]
    timeout_sec = 120

Each step has a folder `steps/NAME/` with its instruction (`instruction.md`; a package
may call it `prompt.md`), its verifier files (`tests/`, or `verifier/` in a package)
layered over the task-level verifier folder, and optionally its reference solution
(`solution/solve.sh`, or `oracle/solve.sh`). The agent keeps one environment across
steps; after each step every agent process is ended and the step's verifier scores the
state so far in a fresh session. The trial's reward is the mean of the step rewards or
the final step's (`final`); a step whose verifier gives no reward makes the trial a
verifier error, as in a one-step trial.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from posttrain_arena.task_format.files import err, read_text_file
from posttrain_arena.task_format.findings import Finding, SpecError

Strategy = Literal["mean", "final"]
MAX_STEPS = 64
MAX_STEP_PROMPT = 1024 * 1024
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: (instruction file names, verifier folder, oracle folder) per layout spelling.
NAMES = {"harbor": (("instruction.md",), "tests", "solution"),
         "posttrain": (("prompt.md", "instruction.md"), "verifier", "oracle")}
UNSUPPORTED_STEP_KEYS = {
    "min_reward": "stopping at a step's minimum reward",
    "healthcheck": "step health checks",
    "environment": "a separate environment per step",
}


class Step(BaseModel):
    """One step of a multi-step task, resolved to its files."""

    model_config = ConfigDict(frozen=True)

    name: str
    prompt: str = Field(description="The step's instruction")
    verifier_dir: Path | None = Field(default=None, description="Its verifier files, layered "
                                      "over the task-level verifier folder")
    oracle_dir: Path | None = Field(default=None, description="Its reference solution folder")
    agent_timeout_sec: float | None = Field(default=None, gt=0)
    verifier_timeout_sec: float | None = Field(default=None, gt=0)


def parse_steps(root: Path, data: dict[str, Any], lines: dict[str, int], where: str,
                layout: str) -> tuple[list[Step], Strategy, list[Finding]]:
    """The steps `data` (task.toml or task.md frontmatter) declares, with findings."""
    raw = data.get("steps")
    strategy = data.get("multi_step_reward_strategy", "mean")
    findings: list[Finding] = []
    if raw is None:
        if "multi_step_reward_strategy" in data:
            findings.append(err("steps", where, "multi_step_reward_strategy without steps; "
                                "remove it or declare the steps", line=lines.get(
                                    "multi_step_reward_strategy")))
        return [], "mean", findings
    if strategy not in ("mean", "final"):
        findings.append(err("steps", where, f"multi_step_reward_strategy {strategy!r}: use "
                            '"mean" or "final"', line=lines.get("multi_step_reward_strategy"),
                            field="multi_step_reward_strategy"))
        strategy = "mean"
    if not isinstance(raw, list) or not raw or len(raw) > MAX_STEPS:
        findings.append(err("steps", where, f"steps must be a list of 1 to {MAX_STEPS} "
                            "tables with a name", line=lines.get("steps"), field="steps"))
        return [], strategy, findings
    prompts, vname, oname = NAMES[layout]
    steps: list[Step] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        field = f"steps.{i}"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                or not _NAME.match(item["name"]) or item["name"] in seen:
            findings.append(err("steps", where, "each step needs a unique name of letters, "
                                "digits, '.', '_' and '-' (its folder under steps/)",
                                line=lines.get(field, lines.get("steps")), field=field))
            continue
        name = item["name"]
        seen.add(name)
        for key, what in UNSUPPORTED_STEP_KEYS.items():
            if key in item:
                findings.append(err("harbor-unsupported", where, f"{what} ({field}.{key}) is "
                                    "not supported here; remove the key",
                                    line=lines.get(f"{field}.{key}", lines.get("steps")),
                                    field=f"{field}.{key}"))
        folder = root / "steps" / name
        prompt, problems = _prompt(folder, prompts)
        findings += problems
        vdir, odir = folder / vname, folder / oname
        try:
            steps.append(Step(
                name=name, prompt=prompt or "", verifier_dir=vdir if vdir.is_dir() else None,
                oracle_dir=odir if (odir / "solve.sh").is_file() else None,
                agent_timeout_sec=_timeout(item, "agent"),
                verifier_timeout_sec=_timeout(item, "verifier")))
        except ValueError as exc:
            findings.append(err("steps", where, f"{field}: {exc}", line=lines.get(field),
                                field=field))
    return steps, strategy, findings


def _prompt(folder: Path, names: tuple[str, ...]) -> tuple[str | None, list[Finding]]:
    for name in names:
        path = folder / name
        if path.exists() or path.is_symlink():
            try:
                text = read_text_file(path, MAX_STEP_PROMPT, f"steps/{folder.name}/{name}")
            except SpecError as exc:
                return None, list(exc.findings)
            if not text.strip():
                return None, [err("prompt", str(path), "the step's instruction is empty")]
            return text.strip(), []
    return None, [err("prompt", str(folder / names[0]), f"step {folder.name!r} has no "
                      f"{' or '.join(names)}; write the step's instruction there")]


def _timeout(item: dict[str, Any], section: str) -> float | None:
    table = item.get(section)
    value = table.get("timeout_sec") if isinstance(table, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{section}.timeout_sec must be a positive number (got {value!r})")
    return float(value)


def aggregate(rewards: list[float], strategy: Strategy) -> float:
    """The trial's reward from its steps' rewards."""
    if not rewards:
        raise ValueError("no step rewards")
    return rewards[-1] if strategy == "final" else sum(rewards) / len(rewards)
