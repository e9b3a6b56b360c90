"""score.json: what a run changed on the held-out suite, and everything needed to trust it.

The change is final minus base pass rate in percentage points, over held-out tasks
scored in both evaluations (a task whose samples all failed on infrastructure in
either is left out and counted). Its 95% interval is a paired bootstrap over tasks and
its p-value an exact McNemar test on discordant tasks (sign test on per-task rate
changes when k > 1).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field

from posttrain_arena.train.evaluation import EvalSummary
from posttrain_arena.train.leakage import Exclusion

SCHEMA_VERSION = 1
BOOTSTRAP_RESAMPLES = 10_000


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
    p_value: float = Field(description="Two-sided p-value of no change")
    test: str = Field(description="Which test gave the p-value")
    paired_tasks: int = Field(description="Tasks scored in both evaluations")
    dropped_tasks: list[str] = Field(default_factory=list,
                                     description="Tasks left out (unscored in one evaluation)")


class DomainChange(BaseModel):
    """Per-domain breakdown."""

    domain: str
    tasks: int
    base: float
    final: float
    delta_pp: float


class TaskChange(BaseModel):
    """A task whose pass rate went down."""

    task: str
    domain: str
    base: float
    final: float


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
    seeds: dict[str, int] = Field(description="Every seed the run used")
    sandbox_backend: str = Field(description="docker or local")
    created_at: str = Field(description="UTC time the score was written")


class Score(BaseModel):
    """The content of score.json."""

    schema_version: int = SCHEMA_VERSION
    status: str = Field(description="'scored', or 'dry-run' (nothing ran)")
    run_dir: str = Field(description="Where the run's files are")
    base: PassRates | None = None
    final: PassRates | None = None
    change: Change | None = None
    per_domain: list[DomainChange] = Field(default_factory=list)
    regressed_tasks: list[TaskChange] = Field(default_factory=list)
    improved_tasks: int = Field(default=0, description="Tasks whose pass rate went up")
    teacher: dict[str, Any] = Field(default_factory=dict, description="Teacher coverage")
    sft: dict[str, Any] = Field(default_factory=dict, description="SFT metrics")
    gate: dict[str, Any] = Field(default_factory=dict, description="Gate decision")
    grpo: dict[str, Any] = Field(default_factory=dict, description="GRPO metrics")
    exclusions: list[Exclusion] = Field(default_factory=list,
                                        description="Training tasks kept out, and why")
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    provenance: Provenance | None = None
    plan: dict[str, Any] | None = Field(default=None, description="The plan (dry runs)")
    blocking: list[str] = Field(default_factory=list,
                                description="What stops a scored run (dry runs)")


def pass_rates(summary: EvalSummary) -> PassRates:
    return PassRates(pass_rate=summary.pass_rate,
                     tasks=sum(t.rate is not None for t in summary.tasks),
                     samples_per_task=summary.samples_per_task,
                     infra_failures=summary.infra_failures, per_domain=summary.per_domain())


def paired_change(base: EvalSummary, final: EvalSummary, *, seed: int) -> Change:
    """Paired change over tasks scored in both evaluations."""
    b, f = base.rates(), final.rates()
    names = [n for n in b if b[n] is not None and f.get(n) is not None]
    dropped = sorted(set(b) - set(names))
    xs = [float(b[n]) for n in names]  # type: ignore[arg-type]
    ys = [float(f[n]) for n in names]  # type: ignore[arg-type]
    if not names:
        return Change(delta_pp=0.0, ci95_low_pp=0.0, ci95_high_pp=0.0, p_value=1.0,
                      test="none (no task scored in both)", paired_tasks=0,
                      dropped_tasks=dropped)
    diffs = [y - x for x, y in zip(xs, ys, strict=True)]
    delta = sum(diffs) / len(diffs)
    low, high = _bootstrap_ci(diffs, seed)
    binary = all(v in (0.0, 1.0) for v in xs + ys)
    up = sum(d > 0 for d in diffs)
    down = sum(d < 0 for d in diffs)
    p = _exact_binomial_two_sided(up, up + down)
    return Change(delta_pp=100 * delta, ci95_low_pp=100 * low, ci95_high_pp=100 * high,
                  p_value=p, test="exact McNemar" if binary else "sign test (per-task rates)",
                  paired_tasks=len(names), dropped_tasks=dropped)


def _bootstrap_ci(diffs: list[float], seed: int) -> tuple[float, float]:
    import numpy as np

    arr = np.asarray(diffs, dtype=float)
    if len(arr) == 1 or float(arr.std()) == 0.0:
        m = float(arr.mean())
        return m, m
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(arr), size=(BOOTSTRAP_RESAMPLES, len(arr)))
    means = arr[idx].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def _exact_binomial_two_sided(k: int, n: int) -> float:
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(k, n - k) + 1)) / 2**n
    return min(1.0, 2 * tail)


def domain_changes(base: EvalSummary, final: EvalSummary) -> list[DomainChange]:
    b, f = base.rates(), final.rates()
    domain = {t.task: t.domain for t in base.tasks}
    rows: dict[str, list[tuple[float, float]]] = {}
    for name, rb in b.items():
        rf = f.get(name)
        if rb is not None and rf is not None:
            rows.setdefault(domain[name], []).append((rb, rf))
    out = []
    for d, pairs in sorted(rows.items()):
        mb = sum(p[0] for p in pairs) / len(pairs)
        mf = sum(p[1] for p in pairs) / len(pairs)
        out.append(DomainChange(domain=d, tasks=len(pairs), base=mb, final=mf,
                                delta_pp=100 * (mf - mb)))
    return out


def regressions(base: EvalSummary, final: EvalSummary) -> tuple[list[TaskChange], int]:
    """Tasks whose rate went down, and how many went up."""
    b, f = base.rates(), final.rates()
    domain = {t.task: t.domain for t in base.tasks}
    down, up = [], 0
    for name, rb in sorted(b.items()):
        rf = f.get(name)
        if rb is None or rf is None:
            continue
        if rf < rb:
            down.append(TaskChange(task=name, domain=domain[name], base=rb, final=rf))
        elif rf > rb:
            up += 1
    return down, up
