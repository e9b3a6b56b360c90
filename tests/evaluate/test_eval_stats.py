"""Paired comparison: properties of the change, its clustered interval and p-value."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ttest_1samp

from posttrain_arena.evaluate.report import EvalReport, build_report
from posttrain_arena.evaluate.stats import (
    SuiteMismatch,
    cluster_bootstrap,
    cluster_t_test,
    compare,
    runs_interval,
)
from posttrain_arena.trial.result import Outcome, TrialResult

DOMAINS = ["software-engineering", "cybersecurity", "finance-economics"]


def _report(outcomes: list[list[bool | None]], model: str = "m",
            checksum: str = "sha256:c") -> EvalReport:
    """Task i has trials outcomes[i] (True pass, False fail, None infrastructure error)."""
    tasks, results = [], []
    for i, trials in enumerate(outcomes):
        name, domain = f"task-{i:03d}", DOMAINS[i % len(DOMAINS)]
        tasks.append((name, f"{checksum}{i}", domain))
        for seed, ok in enumerate(trials):
            results.append(TrialResult(
                trial_id=f"{name}-{seed}", task_name=name, task_checksum=f"{checksum}{i}",
                domain=domain, agent=model, seed=seed, backend="local",
                outcome=Outcome.INFRA_ERROR if ok is None else Outcome.SCORED,
                reward=None if ok is None else float(ok)))
    k = max((len(t) for t in outcomes), default=1)
    return build_report(tasks, results, model=model, agent=model, suite="s",
                        suite_hash="sha256:s", k=k, backend="local", wall_sec=1.0)


def test_report_rates_exclude_infrastructure() -> None:
    report = _report([[True, None], [False, False], [None, None]])
    assert [t.pass_rate for t in report.tasks] == [1.0, 0.0, None]
    assert report.overall.pass_rate == 0.5 and report.overall.infra_errors == 3
    assert report.overall.scored_tasks == 2


def test_identical_reports_change_nothing() -> None:
    r = _report([[True], [False], [True], [False]] * 5)
    c = compare(r, r)
    assert c.change_pp == 0 and c.ci_low_pp <= 0 <= c.ci_high_pp
    assert c.p_value == 1.0 and not c.regressed_tasks


def test_all_flipped_to_pass_is_a_clear_gain() -> None:
    before = _report([[False]] * 20, model="base")
    after = _report([[True]] * 20, model="tuned")
    c = compare(before, after)
    assert c.change_pp == 100 and c.ci_low_pp > 0
    assert c.improved == 20 and c.p_value < 1e-5
    assert all(d.change_pp == 100 for d in c.domains)


def test_regressions_listed_worst_first() -> None:
    before = _report([[True, True], [True, False], [False, False]])
    after = _report([[False, False], [True, True], [False, True]])
    c = compare(before, after)
    assert [t.task_name for t in c.regressed_tasks] == ["task-000"]
    assert c.regressed_tasks[0].change_pp == -100
    assert [t.task_name for t in c.improved_tasks] == ["task-001", "task-002"]


def test_mismatched_suites_are_refused() -> None:
    a = _report([[True]] * 3, checksum="sha256:a")
    b = _report([[True]] * 3, checksum="sha256:b")
    with pytest.raises(SuiteMismatch, match="package changed"):
        compare(a, b)
    with pytest.raises(SuiteMismatch, match="only in the first"):
        compare(_report([[True]] * 4), _report([[True]] * 3))


def test_same_seed_same_interval() -> None:
    before = _report([[i % 2 == 0] for i in range(30)])
    after = _report([[i % 3 == 0] for i in range(30)])
    assert compare(before, after, seed=7) == compare(before, after, seed=7)


matrices = st.integers(min_value=1, max_value=25).flatmap(
    lambda n: st.tuples(st.lists(st.lists(st.booleans(), min_size=2, max_size=2), min_size=n,
                                 max_size=n),
                        st.lists(st.lists(st.booleans(), min_size=2, max_size=2), min_size=n,
                                 max_size=n)))


@settings(max_examples=40, deadline=None)
@given(matrices)
def test_swapping_reports_mirrors_the_result(pair: tuple[list[list[bool]], list[list[bool]]]
                                             ) -> None:
    before, after = _report(list(pair[0])), _report(list(pair[1]))
    ab = compare(before, after, samples=500)
    ba = compare(after, before, samples=500)
    assert ab.change_pp == pytest.approx(-ba.change_pp)
    assert ab.ci_low_pp == pytest.approx(-ba.ci_high_pp)
    assert ab.p_value == pytest.approx(ba.p_value)
    assert -100 <= ab.ci_low_pp <= ab.ci_high_pp <= 100


# ---------------------------------------------------------------- clustered intervals

def _simulate(n_clusters: int, per_cluster: int, reps: int, *, cluster_sd: float,
              task_sd: float, effect: float, seed: int, clustered: bool) -> float:
    """Share of `reps` simulated suites whose 95% interval covers the true effect."""
    rng = np.random.default_rng(seed)
    groups = [f"c{g}" for g in range(n_clusters) for _ in range(per_cluster)]
    keys = groups if clustered else [f"t{i}" for i in range(len(groups))]
    covered = 0
    for rep in range(reps):
        shared = np.repeat(rng.normal(0, cluster_sd, n_clusters), per_cluster)
        deltas = effect + shared + rng.normal(0, task_sd, len(groups))
        low, high = cluster_bootstrap(deltas, keys, samples=2000, seed=rep)
        covered += low <= effect <= high
    return covered / reps


def test_cluster_interval_covers_a_known_effect_about_95_percent_of_the_time() -> None:
    # 8 families of 5 near-clones, as in the micro suite: most variance is the family's.
    kw = dict(n_clusters=8, per_cluster=5, reps=400, cluster_sd=0.15, task_sd=0.05,
              effect=0.1, seed=11)
    clustered = _simulate(**kw, clustered=True)
    naive = _simulate(**kw, clustered=False)
    # 400 reps: the standard error of a coverage near 0.95 is 0.011.
    assert 0.92 <= clustered <= 0.98, clustered
    # Treating the 40 tasks as independent is what made the old interval too narrow.
    assert naive < 0.75, naive


def test_interval_over_independent_tasks_keeps_its_coverage() -> None:
    coverage = _simulate(40, 1, 400, cluster_sd=0.2, task_sd=0.0, effect=-0.05, seed=3,
                         clustered=True)
    assert 0.92 <= coverage <= 0.98, coverage


def test_cluster_t_test_p_value_known_values() -> None:
    # Three equal clusters with mean changes 0.1, 0.2, 0.3: t = 0.2 / (0.1 / sqrt 3)
    # = 2 sqrt 3 on 2 degrees of freedom, whose two-sided p is 1 - t / sqrt(2 + t^2).
    deltas = np.array([0.1, 0.1, 0.2, 0.2, 0.3, 0.3])
    groups = ["a", "a", "b", "b", "c", "c"]
    assert cluster_t_test(deltas, groups) == pytest.approx(1 - math.sqrt(6 / 7), rel=1e-12)
    # Equal cluster sizes: the one-sample t-test on the cluster means, from scipy.
    rng = np.random.default_rng(5)
    deltas = rng.normal(0.05, 0.2, 8 * 5)
    groups = [f"g{i // 5}" for i in range(40)]
    means = deltas.reshape(8, 5).mean(axis=1)
    assert cluster_t_test(deltas, groups) == pytest.approx(ttest_1samp(means, 0).pvalue,
                                                           rel=1e-9)
    # and the bootstrap interval converges on scipy's t interval of the cluster means
    low, high = cluster_bootstrap(deltas, groups, samples=200_000, seed=0)
    ref = ttest_1samp(means, 0).confidence_interval(0.95)
    assert low == pytest.approx(ref.low, abs=0.004) and high == pytest.approx(ref.high,
                                                                             abs=0.004)


def test_one_cluster_carries_no_interval_and_no_evidence() -> None:
    deltas = np.array([1.0, 1.0, 0.0])
    assert cluster_bootstrap(deltas, ["x"] * 3) == (-1.0, 1.0)
    assert cluster_t_test(deltas, ["x"] * 3) == 1.0


def test_compare_resamples_the_declared_clusters_and_names_the_method() -> None:
    # Two families of ten tasks: one all gained, one all lost nothing.
    before = _report([[False]] * 20)
    after = _report([[i < 10] for i in range(20)])
    tasks = [t.task_name for t in before.tasks]
    by_task = compare(before, after)
    by_family = compare(before, after, clusters={n: f"fam{i // 10}" for i, n in
                                                 enumerate(tasks)})
    assert by_task.change_pp == by_family.change_pp == 50
    assert (by_task.clusters, by_family.clusters) == (20, 2)
    assert "2 clusters" in by_family.method and "bootstrap" in by_family.method
    # Two clusters are far less evidence than twenty tasks.
    assert by_family.ci_high_pp - by_family.ci_low_pp > 2 * (by_task.ci_high_pp
                                                             - by_task.ci_low_pp)
    assert by_family.p_value > by_task.p_value


def test_runs_interval_combines_seed_and_task_variance() -> None:
    # Near-deterministic reruns: no seed spread, the suite's own width remains.
    low, high = runs_interval(3, 10.0, 0.0, 8.0 ** 2)
    assert (low, high) == pytest.approx((2.0, 18.0))
    # Spread only (zero-width run intervals): Student's t interval of the mean.
    changes = [4.0, 10.0]
    low, high = runs_interval(2, 7.0, float(np.var(changes, ddof=1)), 0.0)
    ref = ttest_1samp(changes, 0).confidence_interval(0.95)
    assert (low, high) == pytest.approx((ref.low, ref.high))
    # Both: in quadrature.
    low, high = runs_interval(2, 7.0, float(np.var(changes, ddof=1)), 5.0 ** 2)
    assert high - 7.0 == pytest.approx(math.hypot(ref.high - 7.0, 5.0))
    with pytest.raises(ValueError, match="n >= 2"):
        runs_interval(1, 0.0, 0.0, 0.0)
