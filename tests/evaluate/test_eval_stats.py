"""Paired comparison: properties of the change, its interval and the sign test."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrain_arena.evaluate.report import EvalReport, build_report
from posttrain_arena.evaluate.stats import SuiteMismatch, compare
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
