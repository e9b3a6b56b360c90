"""Paired comparison of two eval reports on the same suite, and the statistics of it.

Tasks are paired by id AND package checksum; reports on different suites are refused.
The change is the difference of mean task pass rates in percentage points.

Its interval is a *clustered* paired bootstrap: tasks that share a cluster (the suite
declares one per task, see `evaluate.suite.cluster_key`; each task alone by default)
succeed and fail together, so the bootstrap resamples whole clusters, not tasks. With G
clusters the interval is the change ± t(G-1) x sqrt(G/(G-1)) x the bootstrap standard
error: the percentile interval of a G-cluster bootstrap is too narrow for small G (its
variance is (G-1)/G of the cluster-robust one, and the t quantile pays for estimating
the spread from G values), and this form keeps ~95% coverage down to a handful of
clusters. The p-value is the matching two-sided t-test on the cluster-robust (CR1)
standard error with G-1 degrees of freedom; with equal cluster sizes it equals the
one-sample t-test on cluster mean changes.

`runs_interval` combines n accepted runs of one collection for the leaderboard.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

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
    bootstrap_samples: int = Field(description="Bootstrap resamples of the clusters")
    seed: int = Field(description="Seed of the bootstrap")
    clusters: int = Field(description="Clusters the bootstrap resampled (G)")
    method: str = Field(description="How the interval was computed")
    test: str = Field(description="Which test gave the p-value")
    improved: int = Field(description="Tasks whose pass rate rose")
    regressed: int = Field(description="Tasks whose pass rate fell")
    p_value: float = Field(description="Two-sided p-value of no change (cluster t-test)")
    domains: list[DomainChange] = Field(description="Per-domain changes")
    regressed_tasks: list[TaskChange] = Field(description="Tasks that got worse, worst first")
    improved_tasks: list[TaskChange] = Field(description="Tasks that got better, best first")


def compare(before: EvalReport, after: EvalReport, *, clusters: Mapping[str, str] | None = None,
            samples: int = 10_000, seed: int = 0, confidence: float = 0.95) -> Comparison:
    """Pair the reports' tasks and measure the change; SuiteMismatch when they differ.

    `clusters` maps task name -> cluster key (a task not in it is its own cluster)."""
    pairs = pair_tasks(before, after)
    kept = [(b, a) for b, a in pairs if b.pass_rate is not None and a.pass_rate is not None]
    excluded = sorted(b.task_name for b, a in pairs
                      if b.pass_rate is None or a.pass_rate is None)
    changes = [TaskChange(task_name=b.task_name, domain=b.domain, before=b.pass_rate or 0.0,
                          after=a.pass_rate or 0.0,
                          change_pp=100 * ((a.pass_rate or 0.0) - (b.pass_rate or 0.0)))
               for b, a in kept]
    deltas = np.array([c.after - c.before for c in changes], dtype=float)
    groups = [(clusters or {}).get(c.task_name, f"task:{c.task_name}") for c in changes]
    low, high = cluster_bootstrap(deltas, groups, samples=samples, seed=seed,
                                  confidence=confidence)
    n_clusters = len(set(groups))
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
        bootstrap_samples=samples, seed=seed, clusters=n_clusters,
        method=f"paired cluster bootstrap ({samples} resamples of {n_clusters} clusters): "
        "change ± t(G-1) x sqrt(G/(G-1)) x bootstrap standard error",
        test="two-sided t-test on the cluster-robust (CR1) standard error, df = clusters - 1",
        improved=int(improved), regressed=int(regressed),
        p_value=cluster_t_test(deltas, groups),
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


def _cluster_sums(deltas: np.ndarray, groups: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per cluster: the sum of the task differences and the number of tasks."""
    if len(groups) != len(deltas):
        raise ValueError(f"{len(deltas)} differences but {len(groups)} cluster keys")
    keys = sorted(set(groups))
    where = {k: i for i, k in enumerate(keys)}
    sums = np.zeros(len(keys))
    sizes = np.zeros(len(keys))
    for d, g in zip(deltas, groups, strict=True):
        sums[where[g]] += d
        sizes[where[g]] += 1
    return sums, sizes


def _t_quantile(p: float, df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(p, df))


def cluster_bootstrap(deltas: np.ndarray, groups: Sequence[str], *, samples: int = 10_000,
                      seed: int = 0, confidence: float = 0.95) -> tuple[float, float]:
    """Interval of the mean task difference, resampling whole clusters (module docstring).

    Fewer than two clusters carry no estimate of spread: the interval is the whole
    range [-1, 1]. The ends are clipped to [-1, 1] (a change of pass rate)."""
    if len(deltas) == 0:
        return 0.0, 0.0
    sums, sizes = _cluster_sums(deltas, groups)
    g = len(sums)
    if g < 2:
        return -1.0, 1.0
    estimate = float(sums.sum() / sizes.sum())
    rng = np.random.default_rng(seed)
    means = np.empty(samples)
    chunk = max(1, 2_000_000 // g)  # bounded memory at thousands of clusters
    for start in range(0, samples, chunk):
        idx = rng.integers(0, g, size=(min(chunk, samples - start), g))
        means[start:start + len(idx)] = sums[idx].sum(axis=1) / sizes[idx].sum(axis=1)
    se = float(means.std(ddof=1)) if samples > 1 else 0.0
    half = _t_quantile(1 - (1 - confidence) / 2, g - 1) * math.sqrt(g / (g - 1)) * se
    return max(-1.0, estimate - half), min(1.0, estimate + half)


def cluster_se(deltas: np.ndarray, groups: Sequence[str]) -> tuple[float, float, int]:
    """(mean difference, its cluster-robust CR1 standard error, clusters)."""
    sums, sizes = _cluster_sums(deltas, groups)
    g = len(sums)
    total = float(sizes.sum())
    estimate = float(sums.sum() / total) if total else 0.0
    if g < 2:
        return estimate, math.inf, g
    resid = sums - estimate * sizes
    var = g / (g - 1) * float((resid ** 2).sum()) / total ** 2
    return estimate, math.sqrt(var), g


def cluster_t_test(deltas: np.ndarray, groups: Sequence[str]) -> float:
    """Two-sided p-value of no change: t = mean / CR1 standard error, df = clusters - 1.

    1.0 with fewer than two clusters or no change; 0.0 when every cluster moved by the
    same non-zero amount (no spread at all)."""
    if len(deltas) == 0:
        return 1.0
    estimate, se, g = cluster_se(deltas, groups)
    if g < 2 or estimate == 0:
        return 1.0
    if se == 0:
        return 0.0
    from scipy.stats import t

    return float(2 * t.sf(abs(estimate) / se, g - 1))


def runs_interval(n: int, mean: float, seed_variance: float, mean_sq_halfwidth: float,
                  confidence: float = 0.95) -> tuple[float, float]:
    """The leaderboard's interval of a collection's mean change over n >= 2 runs.

    Two sources of error: which tasks the suite holds (each run's own paired interval;
    `mean_sq_halfwidth` is the mean of their squared half-widths) and the run's seed
    (`seed_variance`, the sample variance of the runs' changes). Every run is scored on
    the *same* suite, so task sampling does not average out over reruns: it enters as
    the runs' root-mean-square half-width, undivided. Seed variance does: t(n-1) x
    s / sqrt(n). The two add in quadrature, so near-deterministic reruns keep the
    suite's width instead of collapsing to zero. Units are the inputs' (pp)."""
    if n < 2:
        raise ValueError(f"runs_interval needs n >= 2 runs (got {n}); one run's interval "
                         "is its own paired interval")
    seed_half = _t_quantile(1 - (1 - confidence) / 2, n - 1) * math.sqrt(
        max(0.0, seed_variance) / n)
    half = math.hypot(seed_half, math.sqrt(max(0.0, mean_sq_halfwidth)))
    return mean - half, mean + half


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0
