"""Paired comparison of two eval reports on the same suite.

Tasks are paired by id AND package checksum; reports on different suites are refused.
The change is the difference of mean task pass rates in percentage points, with a
seeded paired bootstrap interval over tasks and an exact sign test (McNemar's exact
test when k = 1) on the tasks whose pass rate moved.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from pydantic import BaseModel, Field

from posttrain_arena.evaluate.report import EvalReport, TaskStats


class SuiteMismatch(ValueError):
    """The two reports were not made on the same suite; they cannot be paired."""


class TaskChange(BaseModel):
    """One task's pass rate before and after."""

    task_name: str = Field(description="Task id")
    domain: str = Field(description="Domain slug")
    before: float = Field(description="Pass rate before, 0..1")
    after: float = Field(description="Pass rate after, 0..1")
    change_pp: float = Field(description="after - before, percentage points")


class DomainChange(BaseModel):
    """Change of a domain's mean pass rate."""

    domain: str = Field(description="Domain slug")
    tasks: int = Field(description="Paired tasks in the domain")
    before: float = Field(description="Mean pass rate before, 0..1")
    after: float = Field(description="Mean pass rate after, 0..1")
    change_pp: float = Field(description="Change in percentage points")


class Comparison(BaseModel):
    """What `arena compare` reports."""

    before_model: str = Field(description="Model of the first report")
    after_model: str = Field(description="Model of the second report")
    suite_hash: str = Field(description="The suite both reports ran")
    tasks: int = Field(description="Tasks paired (scored in both reports)")
    excluded: list[str] = Field(description="Tasks left out: no counted trial in a report")
    before_rate: float = Field(description="Mean task pass rate before, 0..1")
    after_rate: float = Field(description="Mean task pass rate after, 0..1")
    change_pp: float = Field(description="Change of the mean pass rate, percentage points")
    ci_low_pp: float = Field(description="Lower end of the paired bootstrap interval, pp")
    ci_high_pp: float = Field(description="Upper end of the paired bootstrap interval, pp")
    confidence: float = Field(description="Coverage of the interval, e.g. 0.95")
    bootstrap_samples: int = Field(description="Bootstrap resamples of the task set")
    seed: int = Field(description="Seed of the bootstrap")
    improved: int = Field(description="Tasks whose pass rate rose")
    regressed: int = Field(description="Tasks whose pass rate fell")
    p_value: float = Field(description="Exact two-sided sign test on improved vs regressed")
    domains: list[DomainChange] = Field(description="Per-domain changes")
    regressed_tasks: list[TaskChange] = Field(description="Tasks that got worse, worst first")
    improved_tasks: list[TaskChange] = Field(description="Tasks that got better, best first")


def compare(before: EvalReport, after: EvalReport, *, samples: int = 10_000, seed: int = 0,
            confidence: float = 0.95) -> Comparison:
    """Pair the reports' tasks and measure the change; SuiteMismatch when they differ."""
    pairs = pair_tasks(before, after)
    kept = [(b, a) for b, a in pairs if b.pass_rate is not None and a.pass_rate is not None]
    excluded = sorted(b.task_name for b, a in pairs
                      if b.pass_rate is None or a.pass_rate is None)
    changes = [TaskChange(task_name=b.task_name, domain=b.domain, before=b.pass_rate or 0.0,
                          after=a.pass_rate or 0.0,
                          change_pp=100 * ((a.pass_rate or 0.0) - (b.pass_rate or 0.0)))
               for b, a in kept]
    deltas = np.array([c.after - c.before for c in changes], dtype=float)
    low, high = paired_bootstrap(deltas, samples=samples, seed=seed, confidence=confidence)
    improved = sum(d > 0 for d in deltas)
    regressed = sum(d < 0 for d in deltas)
    by_domain: dict[str, list[TaskChange]] = defaultdict(list)
    for c in changes:
        by_domain[c.domain].append(c)
    return Comparison(
        before_model=before.model, after_model=after.model, suite_hash=before.suite_hash,
        tasks=len(changes), excluded=excluded,
        before_rate=_mean([c.before for c in changes]),
        after_rate=_mean([c.after for c in changes]),
        change_pp=100 * float(deltas.mean()) if len(deltas) else 0.0,
        ci_low_pp=100 * low, ci_high_pp=100 * high, confidence=confidence,
        bootstrap_samples=samples, seed=seed, improved=int(improved), regressed=int(regressed),
        p_value=sign_test(int(improved), int(regressed)),
        domains=[DomainChange(domain=d, tasks=len(cs), before=_mean([c.before for c in cs]),
                              after=_mean([c.after for c in cs]),
                              change_pp=100 * _mean([c.after - c.before for c in cs]))
                 for d, cs in sorted(by_domain.items())],
        regressed_tasks=sorted((c for c in changes if c.change_pp < 0),
                               key=lambda c: (c.change_pp, c.task_name)),
        improved_tasks=sorted((c for c in changes if c.change_pp > 0),
                              key=lambda c: (-c.change_pp, c.task_name)),
    )


def pair_tasks(before: EvalReport, after: EvalReport) -> list[tuple[TaskStats, TaskStats]]:
    """Tasks of both reports paired by name; SuiteMismatch unless names and checksums
    agree exactly."""
    b = {t.task_name: t for t in before.tasks}
    a = {t.task_name: t for t in after.tasks}
    problems = [f"{n}: only in the first report" for n in sorted(b.keys() - a.keys())]
    problems += [f"{n}: only in the second report" for n in sorted(a.keys() - b.keys())]
    problems += [f"{n}: package changed ({b[n].checksum[:19]} vs {a[n].checksum[:19]})"
                 for n in sorted(b.keys() & a.keys()) if b[n].checksum != a[n].checksum]
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more"
                                           if len(problems) > 5 else "")
        raise SuiteMismatch(f"the reports were made on different suites ({before.suite_hash[:19]}"
                            f" vs {after.suite_hash[:19]}): {shown}. Evaluate both models on "
                            "the same suite to compare them")
    return [(b[n], a[n]) for n in sorted(b)]


def paired_bootstrap(deltas: np.ndarray, *, samples: int = 10_000, seed: int = 0,
                     confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean of per-task differences, resampling tasks."""
    if len(deltas) == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(deltas), size=(samples, len(deltas)))
    means = deltas[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def sign_test(improved: int, regressed: int) -> float:
    """Exact two-sided binomial test of improved vs regressed tasks (1.0 when none moved)."""
    if improved + regressed == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(improved, improved + regressed, 0.5).pvalue)


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0
