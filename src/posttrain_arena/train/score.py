"""score.json: what a run changed on the held-out suite, and everything needed to trust it.

The change and its statistics come from `evaluate.stats.compare` on the baseline and
final EvalReports: final minus base mean task pass rate in percentage points, over the
trials scored in both (a trial lost in either arm drops its partner; both are counted),
with the paired 95% interval, the p-value and the minimum detectable effect of one
estimate; `method` and `test` say which. A change smaller than the detectable effect is
"not distinguishable from 0". `instrument` states what the challenge as a whole can
detect, from its protocol of controls (`evaluate.instrument`), when one was measured on
the suite.

Every evaluation's coverage (trials attempted, scored, lost by cause, per task) is kept.
When an arm falls short of the recipe's completeness (`[eval.completeness]`) the status
is "incomplete": the counts and what fell short, and no pass rate and no change.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from posttrain_arena.evaluate.coverage import Coverage
from posttrain_arena.evaluate.instrument import NOT_DISTINGUISHABLE, Instrument
from posttrain_arena.evaluate.report import EvalReport
from posttrain_arena.evaluate.stats import Comparison, DomainChange, TaskChange
from posttrain_arena.train.leakage import Exclusion

SCHEMA_VERSION = 2


class PassRates(BaseModel):
    """One evaluation of the held-out suite."""

    pass_rate: float = Field(description="Mean per-task pass rate (0..1)")
    tasks: int = Field(description="Held-out tasks with a scored sample")
    samples_per_task: int = Field(description="k")
    infra_failures: int = Field(description="Samples excluded for infrastructure failures")
    per_domain: dict[str, float] = Field(description="Pass rate per domain")


class Change(BaseModel):
    """Final minus base, paired by task."""

    delta_pp: float = Field(description="Change in pass rate, percentage points")
    ci95_low_pp: float = Field(description="Lower end of the paired 95% bootstrap interval")
    ci95_high_pp: float = Field(description="Upper end of the paired 95% bootstrap interval")
    method: str = Field(default="", description="How the interval was computed")
    clusters: int = Field(default=0, description="Clusters the bootstrap resampled")
    p_value: float = Field(description="Two-sided p-value of no change")
    test: str = Field(description="Which test gave the p-value")
    paired_tasks: int = Field(description="Tasks with a trial scored in both evaluations")
    dropped_tasks: list[str] = Field(default_factory=list,
                                     description="Tasks left out (no seed scored in both)")
    paired_trials: int = Field(default=0, description="Trials scored in both (per arm)")
    dropped_trials: int = Field(default=0, description="Scored trials left out because "
                                "their partner in the other evaluation was lost")
    base_rate: float = Field(default=0.0, description="Base pass rate over the paired trials")
    final_rate: float = Field(default=0.0, description="Final pass rate over the paired trials")
    detectable_pp: float = Field(default=100.0, description="Minimum detectable effect at "
                                 "80% power for this suite, k and clustering (pp)")
    verdict: str = Field(default=NOT_DISTINGUISHABLE, description="'improved', 'regressed', "
                         "or 'not distinguishable from 0' (the interval holds 0, or the "
                         "change is smaller than the detectable effect)")


class GateExclusion(BaseModel):
    """One training task the organizer gates kept out of training, and why."""

    task: str = Field(description="Training task name")
    reasons: list[str] = Field(description="One line per required gate it did not pass")
    evidence: str = Field(description="Its evidence record (stages/eligibility/evidence/)")


class Provenance(BaseModel):
    """Exactly what produced this score."""

    model_id: str = Field(description="Base model hub id or path")
    model_revision: str | None = Field(description="Hub commit sha, when a hub model")
    model_content_hash: str | None = Field(description="Content hash of a local model folder")
    recipe_name: str
    recipe_hash: str = Field(description="Hash of the recipe's result-relevant sections")
    collection: str = Field(description="Collection location")
    collection_commit: str | None = Field(description="Git commit, for git collections")
    collection_hash: str = Field(description="Content hash of the training collection")
    suite: str = Field(description="Held-out suite location")
    suite_commit: str | None = Field(description="Git commit, for git suites")
    suite_hash: str = Field(description="Content hash of the held-out suite")
    suite_sealed: bool = Field(description="The suite hash matched the recipe's sealed hash")
    package_version: str = Field(description="posttrain-arena version")
    code_hash: str | None = Field(
        default=None, description="Content hash of the code that made the score "
        "(codehash.code_hash); the version string alone never changes")
    environment_hash: str | None = Field(
        default=None, description="Hash of the Python version and every installed "
        "distribution==version the score was made with (codehash.environment_hash): the "
        "resolved environment, as set-up's requirements.lock pins it")
    seeds: dict[str, int] = Field(description="Every seed the run used")
    sandbox_backend: str = Field(description="docker or local")
    created_at: str = Field(description="UTC time the score was written")


class Score(BaseModel):
    """The content of score.json."""

    schema_version: int = SCHEMA_VERSION
    status: str = Field(description="'scored'; 'incomplete' (an evaluation lost too many "
                        "trials: counts, no number); or 'dry-run' (nothing ran)")
    coverage: dict[str, Coverage] = Field(
        default_factory=dict, description="Per evaluation (base, after_sft, final): trials "
        "attempted, scored and lost, overall and per task")
    incomplete: list[str] = Field(default_factory=list, description="What fell short of "
                                  "the recipe's completeness, when the status is incomplete")
    run_dir: str = Field(description="Where the run's files are")
    base: PassRates | None = None
    final: PassRates | None = None
    change: Change | None = None
    after_sft: PassRates | None = Field(
        default=None, description="The SFT policy on the held-out suite (before GRPO)")
    grpo_change: Change | None = Field(
        default=None, description="GRPO's own change: final minus after-SFT, paired, with "
        "its clustered interval (None when GRPO or SFT did not run)")
    per_domain: list[DomainChange] = Field(default_factory=list, description="Per domain")
    regressed_tasks: list[TaskChange] = Field(default_factory=list,
                                              description="Tasks whose pass rate fell")
    improved_tasks: int = Field(default=0, description="Tasks whose pass rate went up")
    teacher: dict[str, Any] = Field(default_factory=dict, description="Teacher coverage")
    sft: dict[str, Any] = Field(default_factory=dict, description="SFT metrics")
    gate: dict[str, Any] = Field(default_factory=dict, description="Gate decision")
    grpo: dict[str, Any] = Field(default_factory=dict, description="GRPO metrics")
    exclusions: list[Exclusion] = Field(default_factory=list,
                                        description="Training tasks kept out, and why")
    gate_exclusions: list[GateExclusion] = Field(
        default_factory=list, description="Training tasks the organizer gates found "
                                          "ineligible ([task_gates]), and why")
    task_gates: dict[str, Any] = Field(default_factory=dict,
                                       description="The gate run: policy, counts")
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    provenance: Provenance | None = None
    instrument: Instrument | None = Field(
        default=None, description="What the challenge can detect, from its protocol of "
        "controls measured on this suite (controls.json stored with it): the known "
        "positive's change, the A/A noise floor and the minimum detectable effect at 80% "
        "power; None when no controls were measured on this suite")
    plan: dict[str, Any] | None = Field(default=None, description="The plan (dry runs)")
    blocking: list[str] = Field(default_factory=list,
                                description="What stops a scored run (dry runs)")


def pass_rates(report: EvalReport) -> PassRates:
    """The summary of one evaluation that score.json keeps."""
    return PassRates(pass_rate=report.overall.pass_rate or 0.0,
                     tasks=report.overall.scored_tasks, samples_per_task=report.k,
                     infra_failures=report.overall.infra_errors,
                     per_domain={d.name: d.pass_rate or 0.0 for d in report.domains})


def change_of(cmp: Comparison) -> Change:
    """The headline change from a paired comparison."""
    return Change(delta_pp=cmp.change_pp, ci95_low_pp=cmp.ci_low_pp, ci95_high_pp=cmp.ci_high_pp,
                  method=cmp.method, clusters=cmp.clusters, p_value=cmp.p_value, test=cmp.test,
                  paired_tasks=cmp.tasks, dropped_tasks=cmp.excluded,
                  paired_trials=cmp.paired_trials, dropped_trials=cmp.dropped_trials,
                  base_rate=cmp.before_rate, final_rate=cmp.after_rate,
                  detectable_pp=cmp.detectable_pp, verdict=verdict(cmp))


def verdict(cmp: Comparison) -> str:
    """What the change says: a direction only when the interval excludes 0 and the
    change is at least the smallest effect this design detects."""
    if cmp.ci_low_pp <= 0 <= cmp.ci_high_pp or abs(cmp.change_pp) < cmp.detectable_pp:
        return NOT_DISTINGUISHABLE
    return "improved" if cmp.change_pp > 0 else "regressed"

