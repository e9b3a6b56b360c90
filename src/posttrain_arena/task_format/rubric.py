"""verifier/verifier.md: the verifier's description, and the rubric that makes the reward.

Published packages describe their verifier in the YAML frontmatter of
`verifier/verifier.md`. Only `rubric` is acted on (under `verifier:`, as published, or
at the top level); everything else there is descriptive and never an error:

    verifier:
      rubric:
        combine: weighted_sum
        dimensions:
          correctness: {weight: 0.7, source: pytest}
          style: {weight: 0.3}

`score(rubric, reward_json, reward)` is the pure function that turns a verifier's
output into the reward: each dimension's score is read from `reward.json`
(`{"dimensions": {"style": 0.5}}` or top-level `{"style": 0.5}`), each in [0, 1], and
the reward is their weighted sum with the weights normalised to add up to 1. A
verifier that writes one number and no dimension (every published package) keeps that
number as its reward. Every dimension or none: a verifier that scores some dimensions
and not others, writes a score outside [0, 1], or writes a `reward` that disagrees with
the weighted sum, has no reward (a verifier error with the reason).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from posttrain_arena.task_format.files import read_text_file
from posttrain_arena.task_format.findings import Finding, Severity, SpecError
from posttrain_arena.task_format.yamlsafe import MAX_YAML_BYTES, YamlProblem, load_yaml

VERIFIER_MD = "verifier.md"
AGREEMENT = 1e-6
"""How far a written `reward` may be from the weighted sum (float noise, not a choice)."""


class Dimension(BaseModel):
    """One scored aspect of the final state."""

    model_config = ConfigDict(extra="allow", frozen=True)

    weight: float = Field(ge=0, le=1_000_000, description="Relative weight in the sum")
    source: str | None = Field(default=None, description="What scores it (descriptive)")

    @field_validator("weight")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class Rubric(BaseModel):
    """How per-dimension scores combine into the reward."""

    model_config = ConfigDict(extra="allow", frozen=True)

    combine: Literal["weighted_sum"] = Field(
        default="weighted_sum", description="Only the weighted sum is defined"
    )
    dimensions: dict[str, Dimension] = Field(
        min_length=1, description="Dimension name -> weight (and descriptive fields)"
    )

    @field_validator("dimensions")
    @classmethod
    def _some_weight(cls, value: dict[str, Dimension]) -> dict[str, Dimension]:
        if sum(d.weight for d in value.values()) <= 0:
            raise ValueError("the weights add up to 0; give at least one dimension a "
                             "positive weight")
        return value

    @property
    def total_weight(self) -> float:
        return sum(d.weight for d in self.dimensions.values())


class DimensionScore(BaseModel):
    """One dimension's part in a reward (recorded in the trial's details)."""

    model_config = ConfigDict(frozen=True)

    name: str
    score: float
    weight: float = Field(description="Normalised weight (the weights add up to 1)")


class RubricScore(BaseModel):
    """The outcome of `score`: a reward with its dimensions, or why there is none."""

    model_config = ConfigDict(frozen=True)

    reward: float | None
    reason: str | None = None
    dimensions: list[DimensionScore] = Field(default_factory=list)


def score(rubric: Rubric, reward_json: Any, reward: float | None) -> RubricScore:
    """The reward a rubric gives to a verifier's output.

    `reward_json` is the parsed reward.json (None when absent); `reward` the single
    number the verifier wrote (None when it wrote none).
    """
    scores = _dimension_values(reward_json)
    named = {n: scores[n] for n in rubric.dimensions if n in scores}
    if not named:
        if reward is None:
            return RubricScore(reward=None, reason="the verifier wrote no reward and no "
                               f"rubric dimension ({', '.join(rubric.dimensions)})")
        return RubricScore(reward=reward)
    missing = [n for n in rubric.dimensions if n not in named]
    if missing:
        return RubricScore(reward=None, reason="reward.json scores "
                           f"{', '.join(sorted(named))} but not {', '.join(missing)}; a "
                           "rubric reward needs every dimension")
    total = rubric.total_weight
    parts: list[DimensionScore] = []
    for name, dim in rubric.dimensions.items():
        value = named[name]
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or not 0.0 <= value <= 1.0:
            return RubricScore(reward=None, reason=f"reward.json: dimension {name!r} is "
                               f"{value!r}; each score must be a number in [0, 1]")
        parts.append(DimensionScore(name=name, score=float(value), weight=dim.weight / total))
    combined = min(1.0, max(0.0, sum(p.score * p.weight for p in parts)))
    if reward is not None and abs(reward - combined) > AGREEMENT:
        return RubricScore(reward=None, dimensions=parts, reason=(
            f"the verifier wrote reward {reward:g} but its rubric dimensions give "
            f"{combined:g}; write one or make them agree"))
    return RubricScore(reward=combined, dimensions=parts)


def _dimension_values(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        return {}
    nested = data.get("dimensions")
    if isinstance(nested, dict):
        return {str(k): v for k, v in nested.items()}
    return {str(k): v for k, v in data.items() if k != "reward"}


def load_rubric(verifier_dir: Path, text: str | None) -> tuple[Rubric | None, list[Finding]]:
    """The rubric in verifier.md's frontmatter (`text`, None when there is no file).

    Errors only where the rubric is concerned: it changes the reward. The rest of the
    file is descriptive; a frontmatter that does not parse is an error because it may
    hold a rubric that would then be silently ignored.
    """
    where = str(verifier_dir / VERIFIER_MD)
    if text is None:
        return None, []
    lines_of = text.removeprefix("\ufeff").splitlines()
    if not lines_of or lines_of[0].strip() != "---":
        return None, []  # prose only: no frontmatter, no rubric
    end = next((i for i in range(1, len(lines_of)) if lines_of[i].strip() in ("---", "...")),
               None)
    if end is None:
        return None, [_err(where, "the YAML frontmatter is never closed; add a '---' line "
                           "after it", 1)]
    yaml_text = "\n".join(lines_of[1:end])
    if len(yaml_text.encode()) > MAX_YAML_BYTES:
        return None, [_err(where, "the frontmatter is larger than 256 KiB", 1)]
    if "rubric" not in yaml_text and "\\" not in yaml_text:
        return None, []  # no key can spell `rubric` (YAML escapes need a backslash)
    try:
        data, lines = _rubric_block(lines_of[1:end]) or load_yaml(yaml_text)
    except YamlProblem as exc:
        return None, [_err(where, f"{exc} (it may declare the reward's rubric)",
                           exc.line + 1 if exc.line is not None else None)]
    if not isinstance(data, dict):
        return None, []
    raw, prefix = _rubric_of(data)
    if raw is None:
        return None, []
    try:
        rubric = Rubric.model_validate(raw)
    except ValidationError as exc:
        out = []
        for e in exc.errors():
            field = ".".join([prefix, *[str(p) for p in e["loc"]]])
            line = next((lines[k] + 1 for k in _prefixes(field) if k in lines), None)
            msg = "is required" if e["type"] == "missing" else e["msg"]
            out.append(Finding(severity=Severity.ERROR, code="rubric", path=where, line=line,
                               field=field, message=msg))
        return None, out
    notes: list[Finding] = []
    if abs(rubric.total_weight - 1.0) > 1e-9:
        notes.append(Finding(severity=Severity.WARNING, code="rubric", path=where,
                             line=lines.get(f"{prefix}.dimensions", -1) + 1 or None,
                             field=f"{prefix}.dimensions", message=(
                                 f"the weights add up to {rubric.total_weight:g}; they are "
                                 "normalised to add up to 1")))
    return rubric, notes


_RUBRIC_KEY = re.compile(r"""^( *)["']?rubric["']?\s*:""")
_TOP_KEY = re.compile(r"""^(["']?[^\s"':#][^"':]*["']?)\s*:""")
_VERIFIER_KEY = re.compile(r"""^["']?verifier["']?\s*:\s*(#.*)?$""")


def _rubric_block(lines: list[str]) -> tuple[Any, dict[str, int]] | None:
    """Parse only the rubric's block of a verifier.md frontmatter, when that is certain
    to mean the same as parsing the whole (published files are mostly descriptive):
    "rubric" written once, no backslash escapes, aliases or tabs, at the top level or
    directly under a top-level `verifier:`. None otherwise (the caller parses it all)."""
    text = "\n".join(lines)
    if text.count("rubric") != 1 or any(c in text for c in "\\&*\t") or "<<" in text:
        return None
    at = next((i for i, ln in enumerate(lines) if _RUBRIC_KEY.match(ln)), None)
    if at is None:
        return None
    tops = [m.group(1).strip("\"'") for ln in lines if (m := _TOP_KEY.match(ln))]
    if len(tops) != len(set(tops)):
        return None  # a second `verifier:` would replace the first: parse it all
    indent = len(lines[at]) - len(lines[at].lstrip(" "))
    parent = None
    if indent:
        above = [ln for ln in lines[:at] if ln.strip() and not ln.lstrip().startswith("#")]
        ancestors = [ln for ln in above if len(ln) - len(ln.lstrip(" ")) < indent]
        if not ancestors or not _VERIFIER_KEY.match(ancestors[-1]):
            return None  # under some other key, or nested deeper: parse it all
        parent = "verifier"
    stop = at + 1
    while stop < len(lines) and (not lines[stop].strip()
                                 or len(lines[stop]) - len(lines[stop].lstrip(" ")) > indent):
        stop += 1
    block = "\n".join(ln[indent:] for ln in lines[at:stop])
    try:
        data, found = load_yaml(block)
    except YamlProblem as exc:
        raise YamlProblem(str(exc), exc.line + at if exc.line is not None else None) from None
    if not isinstance(data, dict) or set(data) != {"rubric"}:
        return None
    lines_out = {(f"{parent}.{k}" if parent else k): v + at for k, v in found.items()}
    return ({parent: data} if parent else data), lines_out


def _rubric_of(data: dict[str, Any]) -> tuple[Any, str]:
    verifier = data.get("verifier")
    if isinstance(verifier, dict) and "rubric" in verifier:
        return verifier["rubric"], "verifier.rubric"
    if "rubric" in data:
        return data["rubric"], "rubric"
    return None, ""


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]


def _err(where: str, message: str, line: int | None) -> Finding:
    return Finding(severity=Severity.ERROR, code="rubric", path=where, line=line,
                   message=message)


MAX_REWARD_JSON = 65_536


def read_reward_json(logs: Path) -> Any:
    """reward.json in a verifier's output folder, parsed; None when absent, not a
    regular file, larger than 64 KiB or not JSON (the trial's reward reading reports
    those)."""
    path = logs / "reward.json"
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_REWARD_JSON:
            return None
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None


def scores_dimensions(rubric: Rubric, reward_json: Any) -> bool:
    """Whether reward.json scores at least one of the rubric's dimensions (only then
    does the rubric decide the reward; one number alone works as it always has)."""
    values = _dimension_values(reward_json)
    return any(name in values for name in rubric.dimensions)


def read_rubric(verifier_dir: Path, cached: bytes | None = None
                ) -> tuple[Rubric | None, list[Finding]]:
    """verifier.md's rubric, if the file declares one. `cached`: its bytes, when the
    caller's walk already read them as a regular file."""
    path = verifier_dir / VERIFIER_MD
    if cached is None and not path.exists() and not path.is_symlink():
        return None, []
    try:
        text = read_text_file(path, MAX_YAML_BYTES, f"{verifier_dir.name}/{VERIFIER_MD}",
                              cached)
    except SpecError as exc:
        return None, list(exc.findings)
    return load_rubric(verifier_dir, text)
