"""TaskEvidence: what the gates measured about one task package, and where it is kept.

An evidence record holds the raw measurements (the build, every oracle rerun, the empty
trial, each probe, the base model's k samples) plus the assessment the default
`GatePolicy` makes of them. A recipe with other thresholds re-assesses the same
measurements (`GatePolicy.assess`); nothing needs to run again.

Records live beside the trial records, one JSON file per package and gate set-up:

    <records>/evidence/<key>.json

where `key` hashes the package's content hash, the harness version (which holds the
content hash of the code that measures, `codehash.code_hash`) and the set-up that
changes what is measured (backend, model, the agent's settings, k, reruns). A record is
reused while all of those are unchanged, so a second gate run of an unchanged collection
with unchanged code runs no trial.
"""

from __future__ import annotations

import hashlib
import json
import os
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from posttrain_arena import __version__
from posttrain_arena.codehash import code_hash
from posttrain_arena.evaluate.report import TrialSummary

SCHEMA_VERSION = 1


def harness_version() -> str:
    """The code that measures: the package version (for people) + the content hash of
    its source (what changes with every edit that could change a measurement)."""
    return f"{__version__}+code.{code_hash().removeprefix('sha256:')[:16]}"


class GateName(StrEnum):
    """The gates, in the order they run."""

    BUILD = "build"
    ORACLE = "oracle"
    EMPTY = "empty"
    PROBES = "probes"
    LEARNABLE = "learnable"


class GateStatus(StrEnum):
    """pass / fail (the task's fault) / error (could not be measured: infrastructure) /
    skipped (not run, because an earlier gate already failed)."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    SKIPPED = "skipped"


class GateCheck(BaseModel):
    """One gate's assessment under a policy."""

    gate: GateName = Field(description="Which gate")
    status: GateStatus = Field(description="pass, fail, error or skipped")
    reason: str | None = Field(default=None, description="Why, for every status but pass")


class Verdict(BaseModel):
    """Whether a task may be trained on, under one policy, and why not."""

    eligible: bool = Field(description="Every gate the policy requires passed")
    reasons: list[str] = Field(default_factory=list,
                               description="One line per required gate that did not pass")
    gates: list[GateCheck] = Field(default_factory=list, description="Every gate assessed")


class BuildEvidence(BaseModel):
    """Whether the environment built within task.md's build_timeout_sec."""

    ok: bool = Field(description="The image built")
    seconds: float = Field(description="Wall-clock of the build (0 when cached)")
    error: str | None = Field(default=None, description="The build's failure, when it failed")


class ProbeEvidence(BaseModel):
    """One known-bad probe: the oracle's kept final state perturbed on the host (or the
    empty trial's, with a cheat planted), then verified in a session from the pristine
    image (no agent phase)."""

    kind: str = Field(description="truncate, wrong or remove; or a cheat (gates/cheats.py)")
    start: Literal["oracle", "empty"] = Field(
        default="oracle", description="Whose kept state it starts from: the oracle's (a "
        "wrong answer: fails when scored 1.0) or the empty trial's (a cheat: fails when "
        "scored above the empty trial)")
    description: str = Field(description="What the perturbation does, in words")
    applicable: bool = Field(description="The oracle left a file this probe could perturb")
    perturbed: list[str] = Field(default_factory=list,
                                 description="The files it changed (session paths)")
    trial: TrialSummary | None = Field(default=None,
                                       description="The probe's verification (a trial "
                                                   "without an agent phase)")
    note: str | None = Field(default=None, description="Why the probe could not run")


class BaseModelEvidence(BaseModel):
    """The base model's k samples of the task."""

    model: str = Field(description="Model spec sampled")
    k: int = Field(description="Samples asked for")
    n: int = Field(description="Samples that count (all but infrastructure failures)")
    solved: int = Field(description="Samples scored with full reward")
    pass_rate: float | None = Field(description="solved / n; None when n is 0")
    pass_at_k: float | None = Field(description="Whether any of the k samples solved it "
                                                "(pass@k with n = k samples)")
    trials: list[TrialSummary] = Field(default_factory=list, description="Every sample")


class TaskEvidence(BaseModel):
    """The evidence record of one task package (one JSON file)."""

    schema_version: int = SCHEMA_VERSION
    key: str = Field(description="Hash of checksum + harness version + set-up (backend, "
                     "model, agent settings, k, reruns); the file name")
    task: str = Field(description="Task directory name")
    task_checksum: str = Field(description="Content hash of the package measured")
    domain: str | None = Field(default=None, description="Domain slug, when the package loads")
    harness_version: str = Field(description="posttrain-arena version + content hash of "
                                 "its source code")
    backend: str = Field(description="Sandbox backend the trials ran on")
    model: str = Field(description="Base model spec whose pass@k was measured")
    k: int = Field(description="Base model samples per task")
    reruns: int = Field(description="Oracle reruns")
    created_at: str = Field(description="UTC time the record was written")
    load_error: str | None = Field(default=None,
                                   description="Why the package did not load (nothing ran)")
    build: BuildEvidence | None = None
    oracle: list[TrialSummary] = Field(default_factory=list, description="The oracle reruns")
    oracle_note: str | None = Field(default=None,
                                    description="Why fewer than `reruns` oracle trials ran")
    flake_rate: float | None = Field(
        default=None, description="Share of oracle reruns that did not score 1.0 (counted "
                                  "over reruns that reached a verdict)")
    empty: TrialSummary | None = Field(default=None, description="The empty trial")
    probes: list[ProbeEvidence] = Field(default_factory=list)
    replay: TrialSummary | None = Field(
        default=None, description="Shared isolation only: the oracle's kept state, "
                                  "unperturbed, verified the way the probes are; unless it "
                                  "scores 1.0 the probes say nothing")
    base: BaseModelEvidence | None = None
    timings: dict[str, float] = Field(default_factory=dict,
                                      description="Seconds of trial time per gate")
    verdict: Verdict = Field(description="The assessment under the default policy")

    @property
    def eligible(self) -> bool:
        return self.verdict.eligible


def evidence_key(task_checksum: str, *, harness: str, backend: str, model: str, agent: str,
                 k: int, reruns: int) -> str:
    """The identity of a measurement: same package, harness and set-up, same key.
    `agent`: a hash of the settings the base model's samples run under."""
    text = "\0".join([task_checksum, harness, backend, model, agent, str(k), str(reruns)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class EvidenceStore:
    """The evidence records under `<records>/evidence/`."""

    def __init__(self, records_root: Path) -> None:
        self.dir = Path(records_root) / "evidence"

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.json"

    def get(self, key: str) -> TaskEvidence | None:
        """The record for `key`, or None when there is none (or it is unreadable, or
        from an older schema): then the package is measured again."""
        path = self.path(key)
        try:
            evidence = TaskEvidence.model_validate(json.loads(path.read_text("utf-8")))
        except (OSError, ValueError, ValidationError):
            return None
        if evidence.key != key or evidence.schema_version != SCHEMA_VERSION:
            return None
        return evidence

    def put(self, evidence: TaskEvidence) -> Path:
        """Write a record atomically; returns its path."""
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.path(evidence.key)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(evidence.model_dump_json(indent=2), encoding="utf-8")
        os.replace(tmp, path)
        return path
