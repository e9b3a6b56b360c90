"""Paired comparison of two eval reports on the same suite, and the statistics of it.

Trials are paired by task (id AND package checksum; reports on different suites are
refused) and seed: a task's pass rate in each arm is taken over the seeds that count in
*both* (evaluate.attribution), so a trial lost in one arm drops its partner too, and the
comparison says how many were dropped. The change is the difference of mean task pass
rates in percentage points.

What the interval covers: the change this pair of models shows on the suite's task
distribution, the suite's clusters (families) held as they are, fresh instances of its
tasks and fresh trials. Clusters are strata: a cluster's tasks are draws from it, and
the variance is the within-cluster spread of the task differences, weighted by cluster
size (tasks that are their own cluster, the default, form one stratum together). The
interval is change ± t(df) x se, df by Welch-Satterthwaite over the strata, and the
p-value is the two-sided t-test of the same (change, se, df): one computation, so the
interval excludes 0 exactly when p < 1 - confidence. tests/evaluate/test_eval_coverage.py
measures ~95% coverage on micro-like data (effects in a few families, k and family
counts varied). What one run cannot see, how much another training run would move each
family, is the noise floor's to measure (repeat-seed controls, `runs_interval`); an
interval that resampled whole clusters counted the difference between the families
that learned and those that did not as noise, and covered 99-100% there (87-90% when
which families learn is itself random), never 95%.

`runs_interval` combines n accepted runs of one collection for the leaderboard;
`detectable_effect` is the smallest change a design (suite, k, clustering) detects.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel, Field

from posttrain_arena.evaluate.attribution import counts
from posttrain_arena.evaluate.report import EvalReport, TaskStats

DETECTION_POWER = 0.8  # the power at which the minimum detectable effect is stated


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
    tasks: int = Field(description="Tasks paired (a trial counted in both reports)")
    excluded: list[str] = Field(description="Tasks left out: no seed counted in both reports")
    paired_trials: int = Field(description="Trials counted in both arms (per arm)")
    dropped_trials: int = Field(description="Counted trials left out because their partner "
                                "in the other arm was lost")
    before_rate: float = Field(description="Mean task pass rate before, 0..1")
    after_rate: float = Field(description="Mean task pass rate after, 0..1")
    change_pp: float = Field(description="Change of the mean pass rate, percentage points")
    se_pp: float = Field(description="Standard error of the change, pp")
    df: float = Field(description="Degrees of freedom of the interval and the test")
    detectable_pp: float = Field(description="Minimum detectable effect at 80% power, pp: "
                                 "a smaller change is not distinguishable from 0")
    ci_low_pp: float = Field(description="Lower end of the paired interval, pp")
    ci_high_pp: float = Field(description="Upper end of the paired interval, pp")
    confidence: float = Field(description="Coverage of the interval, e.g. 0.95")
    clusters: int = Field(description="Clusters (strata) of the paired tasks")
    method: str = Field(description="How the interval was computed")
    test: str = Field(description="Which test gave the p-value")
    improved: int = Field(description="Tasks whose pass rate rose")
    regressed: int = Field(description="Tasks whose pass rate fell")
    p_value: float = Field(description="Two-sided p-value of no change (same estimate)")
    domains: list[DomainChange] = Field(description="Per-domain changes")
    regressed_tasks: list[TaskChange] = Field(description="Tasks that got worse, worst first")
    improved_tasks: list[TaskChange] = Field(description="Tasks that got better, best first")


class Estimate(BaseModel):
    """A paired change and its spread: what the interval and the p-value both come from."""

    change: float = Field(description="Mean task difference, after - before (0..1 scale)")
    se: float = Field(description="Its standard error (0 when nothing varied; inf when "
                      "there is nothing to estimate it from)")
    df: float = Field(description="Degrees of freedom of the t distribution used")

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """change ± t(df) x se, clipped to [-1, 1] (a change of pass rate)."""
        if math.isinf(self.se):
            return -1.0, 1.0
        half = _t_quantile(1 - (1 - confidence) / 2, self.df) * self.se
        return max(-1.0, self.change - half), min(1.0, self.change + half)

    def detectable(self, power: float = 0.8, confidence: float = 0.95,
                   floor_se: float = 0.0) -> float:
        """The minimum detectable effect: the smallest true change this design (suite,
        k, clustering, and the spread it showed) finds at `power` with a two-sided test
        at 1 - `confidence`: (t(1 - alpha/2) + t(power)) x se, on df, with se at least
        `floor_se` (what k trials per task cannot resolve even when nothing varied in
        this sample). 1.0 (everything) when there is no estimate of spread."""
        if math.isinf(self.se):
            return 1.0
        return min(1.0, (_t_quantile(1 - (1 - confidence) / 2, self.df)
                         + _t_quantile(power, self.df)) * max(self.se, floor_se))

    def p_value(self) -> float:
        """Two-sided p-value of no change: 1 with no change or no estimate of spread,
        0 when the change is non-zero and nothing varied."""
        if self.change == 0 or math.isinf(self.se):
            return 1.0
        if self.se == 0:
            return 0.0
        from scipy.stats import t

        return float(2 * t.sf(abs(self.change) / self.se, self.df))


def paired_estimate(deltas: np.ndarray, groups: Sequence[str]) -> Estimate:
    """The mean of `deltas` with its stratified standard error (module docstring).

    Clusters of two or more tasks are strata; tasks alone in their cluster are pooled
    into one stratum. A stratum of one task takes the mean within-stratum variance of
    the others. Fewer than two tasks carry no estimate of spread (se = inf)."""
    deltas = np.asarray(deltas, dtype=float)
    if len(groups) != len(deltas):
        raise ValueError(f"{len(deltas)} differences but {len(groups)} cluster keys")
    n = len(deltas)
    if n == 0:
        return Estimate(change=0.0, se=math.inf, df=1.0)
    sizes: dict[str, int] = defaultdict(int)
    for g in groups:
        sizes[g] += 1
    strata: dict[str, list[float]] = defaultdict(list)
    for d, g in zip(deltas, groups, strict=True):
        strata[g if sizes[g] > 1 else "\0single"].append(float(d))
    change = float(deltas.mean())
    if n < 2:
        return Estimate(change=change, se=math.inf, df=1.0)
    spreads = {k: float(np.var(v, ddof=1)) for k, v in strata.items() if len(v) > 1}
    fallback = sum(spreads.values()) / len(spreads)
    parts = [(len(v) / n) ** 2 * spreads.get(k, fallback) / len(v) for k, v in strata.items()]
    var = sum(parts)
    estimable = [(p, len(v) - 1) for p, (k, v) in zip(parts, strata.items(), strict=True)
                 if len(v) > 1]
    denominator = sum(p ** 2 / dof for p, dof in estimable)
    df = var ** 2 / denominator if denominator > 0 else float(sum(d for _, d in estimable))
    return Estimate(change=change, se=math.sqrt(var), df=max(1.0, df))


def compare(before: EvalReport, after: EvalReport, *, clusters: Mapping[str, str] | None = None,
            confidence: float = 0.95) -> Comparison:
    """Pair the reports' trials and measure the change; SuiteMismatch when they differ.

    `clusters` maps task name -> cluster key (a task not in it is its own cluster)."""
    paired = pair_trials(before, after)
    kept = [p for p in paired if p.seeds]
    changes = [TaskChange(task_name=p.task_name, domain=p.domain, before=p.before,
                          after=p.after, change_pp=100 * (p.after - p.before)) for p in kept]
    deltas = np.array([c.after - c.before for c in changes], dtype=float)
    groups = [(clusters or {}).get(c.task_name, f"task:{c.task_name}") for c in changes]
    estimate = paired_estimate(deltas, groups)
    low, high = estimate.interval(confidence)
    by_domain: dict[str, list[TaskChange]] = defaultdict(list)
    for c in changes:
        by_domain[c.domain].append(c)
    return Comparison(
        before_model=before.model, after_model=after.model, suite_hash=before.suite_hash,
        tasks=len(changes), excluded=sorted(p.task_name for p in paired if not p.seeds),
        paired_trials=sum(len(p.seeds) for p in kept),
        dropped_trials=sum(p.dropped for p in paired),
        before_rate=_mean([c.before for c in changes]),
        after_rate=_mean([c.after for c in changes]),
        change_pp=100 * estimate.change, se_pp=100 * estimate.se, df=estimate.df,
        detectable_pp=100 * estimate.detectable(DETECTION_POWER, confidence,
                                                trial_noise(kept)),
        ci_low_pp=100 * low, ci_high_pp=100 * high, confidence=confidence,
        clusters=len(set(groups)),
        method="paired, trials matched by task and seed; clusters as strata: change ± "
        "t(df) x stratified standard error, df by Welch-Satterthwaite",
        test="two-sided t-test on the same change, standard error and df",
        improved=int(sum(d > 0 for d in deltas)), regressed=int(sum(d < 0 for d in deltas)),
        p_value=estimate.p_value(),
        domains=[DomainChange(domain=d, tasks=len(cs), before=_mean([c.before for c in cs]),
                              after=_mean([c.after for c in cs]),
                              change_pp=100 * _mean([c.after - c.before for c in cs]))
                 for d, cs in sorted(by_domain.items())],
        regressed_tasks=sorted((c for c in changes if c.change_pp < 0),
                               key=lambda c: (c.change_pp, c.task_name)),
        improved_tasks=sorted((c for c in changes if c.change_pp > 0),
                              key=lambda c: (-c.change_pp, c.task_name)),
    )


class PairedTask(BaseModel):
    """One task's trials that count in both arms."""

    task_name: str
    domain: str
    seeds: list[int] = Field(description="Seeds counted in both arms")
    before: float = Field(description="Pass rate over those seeds, before")
    after: float = Field(description="Pass rate over those seeds, after")
    dropped: int = Field(description="Counted trials of either arm whose partner did not count")


def trial_noise(paired: list[PairedTask]) -> float:
    """Standard error of the mean task difference that trial sampling alone gives, at
    the pooled pass rate (Jeffreys: 0 of n is not a rate of 0): the floor under the
    detectable effect, so that a sample in which nothing happened to vary does not
    claim to detect every change."""
    if not paired:
        return 0.0
    trials = sum(len(p.seeds) for p in paired)
    passes = sum((p.before + p.after) * len(p.seeds) for p in paired)
    rate = (passes + 0.5) / (2 * trials + 1)
    var = sum(rate * (1 - rate) * 2 / len(p.seeds) for p in paired)
    return math.sqrt(var) / len(paired)


def pair_trials(before: EvalReport, after: EvalReport) -> list[PairedTask]:
    """Every task of both reports with the seeds counted in both (pair_tasks first)."""
    pairs = pair_tasks(before, after)

    def counted(report: EvalReport) -> dict[str, dict[int, bool]]:
        out: dict[str, dict[int, bool]] = defaultdict(dict)
        for t in report.trials:
            if counts(t.outcome, t.reason):
                out[t.task_name][t.seed] = t.passed
        return out

    b, a = counted(before), counted(after)
    result = []
    for tb, _ in pairs:
        mine, theirs = b.get(tb.task_name, {}), a.get(tb.task_name, {})
        seeds = sorted(mine.keys() & theirs.keys())
        result.append(PairedTask(
            task_name=tb.task_name, domain=tb.domain, seeds=seeds,
            before=sum(mine[s] for s in seeds) / len(seeds) if seeds else 0.0,
            after=sum(theirs[s] for s in seeds) / len(seeds) if seeds else 0.0,
            dropped=len(mine) + len(theirs) - 2 * len(seeds)))
    return result


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


def _t_quantile(p: float, df: float) -> float:
    from scipy.stats import t

    return float(t.ppf(p, df))


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
