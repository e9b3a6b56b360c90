"""Coverage: trials attempted, scored and lost per task and by cause; the completeness a
score needs."""

from __future__ import annotations

from posttrain_arena.evaluate.coverage import MISSING, Completeness, coverage_of
from posttrain_arena.evaluate.report import build_report
from posttrain_arena.trial.result import Outcome, TrialResult


def _result(task: str, seed: int, outcome: Outcome, reason: str | None = None) -> TrialResult:
    return TrialResult(trial_id=f"{task}-{seed}", task_name=task, task_checksum=f"c-{task}",
                       domain="software-engineering", agent="m", seed=seed, backend="local",
                       outcome=outcome, reason=reason,
                       reward=0.0 if outcome is Outcome.SCORED else None)


def _report(results: list[TrialResult], tasks: tuple[str, ...] = ("a", "b", "c"), k: int = 4):
    return build_report([(t, f"c-{t}", "software-engineering") for t in tasks], results,
                        model="m", agent="m", suite="s", suite_hash="h", k=k, backend="local",
                        wall_sec=0)


def test_counts_per_task_and_by_cause() -> None:
    results = [_result("a", s, Outcome.SCORED) for s in range(4)]
    results += [_result("b", 0, Outcome.AGENT_TIMEOUT), _result("b", 1, Outcome.VERIFIER_ERROR),
                _result("b", 2, Outcome.INFRA_ERROR, "agent failure: the model provider "
                                                     "failed (m, turn 1): 503"),
                _result("b", 3, Outcome.BUILD_FAILED, "image did not build")]
    results += [_result("c", 0, Outcome.INFRA_ERROR, "sandbox did not start")]  # 3 never ran
    cov = coverage_of(_report(results))
    assert (cov.attempted, cov.scored, cov.lost) == (12, 6, 6)
    assert cov.lost_by_cause == {"harness": 1, MISSING: 3, "provider": 1, "task": 1}
    assert [(t.task_name, t.attempted, t.scored, t.lost) for t in cov.tasks] == [
        ("a", 4, 4, 0), ("b", 4, 2, 2), ("c", 4, 0, 4)]


def test_an_arm_lost_to_infrastructure_is_incomplete_and_says_why() -> None:
    """All trials lost was written as change 0.0 [0.0, 0.0], p = 1."""
    lost = _report([_result(t, s, Outcome.INFRA_ERROR, "sandbox did not start")
                    for t in "abc" for s in range(4)])
    short = coverage_of(lost).shortfalls(Completeness())
    assert len(short) == 2
    assert short[0].startswith("0 of 12 trials scored") and "12 harness" in short[0]
    assert "3 task(s) below 50%" in short[1]


def test_completeness_thresholds_overall_and_per_task() -> None:
    results = [_result(t, s, Outcome.SCORED) for t in "abc" for s in range(4)]
    assert coverage_of(_report(results)).shortfalls(Completeness()) == []
    # One task lost 3 of its 4: 9 of 12 overall.
    partial = [r for r in results if not (r.task_name == "c" and r.seed > 0)]
    cov = coverage_of(_report(partial))
    assert cov.shortfalls(Completeness(min_scored_share=0.75, min_task_scored_share=0.25)) == []
    short = cov.shortfalls(Completeness(min_scored_share=0.75, min_task_scored_share=0.5))
    assert short == ["1 task(s) below 50% of their trials scored: c 1/4"]
    assert cov.shortfalls(Completeness(min_scored_share=0.8, min_task_scored_share=0.25))[0] \
        .startswith("9 of 12 trials scored, below the 80% required")
