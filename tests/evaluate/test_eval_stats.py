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
    compare,
    pair_trials,
    paired_estimate,
    runs_interval,
    trial_noise,
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


def test_the_comparison_is_a_function_of_the_reports() -> None:
    before = _report([[i % 2 == 0] for i in range(30)])
    after = _report([[i % 3 == 0] for i in range(30)])
    assert compare(before, after) == compare(before, after)


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
    ab = compare(before, after)
    ba = compare(after, before)
    assert ab.change_pp == pytest.approx(-ba.change_pp)
    assert ab.ci_low_pp == pytest.approx(-ba.ci_high_pp)
    assert ab.p_value == pytest.approx(ba.p_value)
    assert -100 <= ab.ci_low_pp <= ab.ci_high_pp <= 100


# ---------------------------------------------------------------- the estimate

@settings(max_examples=60, deadline=None)
@given(matrices)
def test_the_interval_excludes_zero_exactly_when_the_p_value_says_so(
        pair: tuple[list[list[bool]], list[list[bool]]]) -> None:
    """Interval and p-value are one computation: they cannot disagree at the boundary
    (the old interval used a bootstrap spread, the old test a CR1 one)."""
    c = compare(_report(list(pair[0])), _report(list(pair[1])),
                clusters={f"task-{i:03d}": f"fam{i % 3}" for i in range(len(pair[0]))})
    excludes = c.ci_low_pp > 0 or c.ci_high_pp < 0
    assert excludes == (c.p_value < 0.05), (c.ci_low_pp, c.ci_high_pp, c.p_value)


def test_tasks_alone_give_scipys_one_sample_t() -> None:
    rng = np.random.default_rng(5)
    deltas = rng.normal(0.05, 0.2, 40)
    est = paired_estimate(deltas, [f"t{i}" for i in range(40)])
    ref = ttest_1samp(deltas, 0)
    assert est.p_value() == pytest.approx(ref.pvalue, rel=1e-9)
    low, high = est.interval(0.95)
    ci = ref.confidence_interval(0.95)
    assert (low, high) == pytest.approx((ci.low, ci.high), rel=1e-9)


def test_clusters_are_strata_weighted_by_size() -> None:
    # Stratum a: 0.1, 0.3 (var 0.02); stratum b: 0.0, 0.0, 0.6 (var 0.12); n = 5.
    deltas = np.array([0.1, 0.3, 0.0, 0.0, 0.6])
    est = paired_estimate(deltas, ["a", "a", "b", "b", "b"])
    va, vb = (2 / 5) ** 2 * 0.02 / 2, (3 / 5) ** 2 * 0.12 / 3
    assert est.change == pytest.approx(0.2)
    assert est.se == pytest.approx(math.sqrt(va + vb))
    assert est.df == pytest.approx((va + vb) ** 2 / (va ** 2 / 1 + vb ** 2 / 2))


def test_one_task_carries_no_interval_and_no_evidence() -> None:
    est = paired_estimate(np.array([1.0]), ["x"])
    assert est.interval() == (-1.0, 1.0) and est.p_value() == 1.0 and est.detectable() == 1.0


def test_a_trial_lost_in_one_arm_drops_its_partner() -> None:
    """Failing trials lost only in the final evaluation made 'base 37.5% -> final 50%'
    stand beside 'change 0.0': the rates and the change must be of the same trials."""
    before = _report([[True, False], [False, False], [True, True], [False, False]])
    after = _report([[True, False], [None, None], [True, True], [False, None]])
    c = compare(before, after)
    assert c.excluded == ["task-001"] and c.tasks == 3
    assert c.paired_trials == 5 and c.dropped_trials == 3  # 2 of task-001, 1 of task-003
    assert c.before_rate == c.after_rate and c.change_pp == 0


def test_compare_names_the_method_and_the_detectable_effect() -> None:
    before = _report([[i % 2 == 0, i % 3 == 0] for i in range(24)])
    after = _report([[i % 2 == 0, i % 4 != 0] for i in range(24)])
    c = compare(before, after, clusters={f"task-{i:03d}": f"fam{i // 6}" for i in range(24)})
    assert c.clusters == 4 and "strata" in c.method and "same" in c.test
    # At 80% power and 5% two-sided: (t(0.975) + t(0.8)) standard errors.
    from scipy.stats import t

    # At least what k = 2 trials per task cannot resolve (the binomial floor).
    floor = 100 * trial_noise(pair_trials(before, after))
    assert c.detectable_pp == pytest.approx((t.ppf(0.975, c.df) + t.ppf(0.8, c.df))
                                            * max(c.se_pp, floor))
    # Nothing varied (every trial failed in both): that is not a design that detects all.
    flat = _report([[False, False]] * 24)
    nothing = compare(flat, flat)
    assert nothing.se_pp == 0 and nothing.detectable_pp > 1


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
