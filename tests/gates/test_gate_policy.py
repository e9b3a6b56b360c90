"""GatePolicy on hand-made evidence: thresholds, which gates count, bad policies."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from posttrain_arena.evaluate.report import TrialSummary
from posttrain_arena.gates import GateName, GatePolicy, TaskEvidence, Verdict
from posttrain_arena.gates.evidence import BaseModelEvidence, BuildEvidence, ProbeEvidence


def _trial(seed: int, reward: float | None, outcome: str = "scored") -> TrialSummary:
    return TrialSummary(trial_id=f"t{seed}", task_name="t", seed=seed, outcome=outcome,
                        reward=reward, passed=outcome == "scored" and (reward or 0) >= 1.0)


def _evidence(oracle: list[float], empty: float = 0.0, probe: float = 0.0,
              solved: int = 1, k: int = 2) -> TaskEvidence:
    trials = [_trial(i, r) for i, r in enumerate(oracle)]
    bad = sum(not t.passed for t in trials)
    return TaskEvidence(
        key="k", task="t", task_checksum="sha256:x", harness_version="h", backend="local",
        model="m", k=k, reruns=len(oracle), created_at="now", verdict=Verdict(eligible=False),
        build=BuildEvidence(ok=True, seconds=0.0), oracle=trials,
        flake_rate=bad / len(trials), empty=_trial(0, empty),
        probes=[ProbeEvidence(kind="truncate", description="cut", applicable=True,
                              trial=_trial(0, probe))],
        base=BaseModelEvidence(model="m", k=k, n=k, solved=solved, pass_rate=solved / k,
                               pass_at_k=1.0 if solved else 0.0))


def test_the_default_policy_wants_every_gate_clean() -> None:
    assert GatePolicy().assess(_evidence([1.0, 1.0])).eligible
    flaky = GatePolicy().assess(_evidence([1.0, 0.0, 1.0, 1.0]))
    assert not flaky.eligible and "flake rate 0.25" in flaky.reasons[0]


def test_a_tolerated_flake_rate_passes_with_its_reason_kept() -> None:
    v = GatePolicy(max_flake_rate=0.25).assess(_evidence([1.0, 0.0, 1.0, 1.0]))
    assert v.eligible
    oracle = next(c for c in v.gates if c.gate is GateName.ORACLE)
    assert oracle.status.value == "pass" and "flaky" in (oracle.reason or "")
    assert not GatePolicy(max_flake_rate=0.2).assess(_evidence([1.0, 0.0, 1.0, 1.0])).eligible


@pytest.mark.parametrize(("reward", "limit", "eligible"), [
    (0.0, 0.0, True), (0.1, 0.0, False), (0.1, 0.2, True), (0.99, 0.5, False)])
def test_the_empty_trial_must_score_zero_unless_the_policy_allows_more(
        reward: float, limit: float, eligible: bool) -> None:
    v = GatePolicy(max_empty_reward=limit).assess(_evidence([1.0], empty=reward))
    assert v.eligible is eligible
    if not eligible:
        assert f"partial reward of {reward:g}" in v.reasons[0]


def test_probe_reward_at_or_above_the_accept_line_fails() -> None:
    assert not GatePolicy().assess(_evidence([1.0], probe=1.0)).eligible
    assert GatePolicy().assess(_evidence([1.0], probe=0.9)).eligible
    assert not GatePolicy(probe_accept_reward=0.5).assess(_evidence([1.0], probe=0.9)).eligible


@pytest.mark.parametrize(("solved", "eligible"), [(0, False), (1, True), (3, True), (4, False)])
def test_learnable_means_solved_sometimes(solved: int, eligible: bool) -> None:
    assert GatePolicy().assess(_evidence([1.0], solved=solved, k=4)).eligible is eligible


def test_a_narrower_learnable_band() -> None:
    policy = GatePolicy(learnable_min_rate=0.25, learnable_max_rate=0.75)
    assert [policy.assess(_evidence([1.0], solved=s, k=4)).eligible for s in range(5)] == \
        [False, False, True, False, False]


def test_gates_left_out_of_the_policy_do_not_count() -> None:
    ev = _evidence([1.0], solved=0)
    assert not GatePolicy().assess(ev).eligible
    v = GatePolicy(gates=[GateName.BUILD, GateName.ORACLE]).assess(ev)
    assert v.eligible and any(c.status.value == "fail" for c in v.gates)


def test_bad_policies_are_refused_with_the_field_named() -> None:
    with pytest.raises(ValidationError, match="learnable_min_rate"):
        GatePolicy(learnable_min_rate=0.6, learnable_max_rate=0.5)
    with pytest.raises(ValidationError, match="max_flake_rate"):
        GatePolicy(max_flake_rate=1.5)
    with pytest.raises(ValidationError, match="gates"):
        GatePolicy(gates=["build", "oracl"])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="twice"):
        GatePolicy(gates=[GateName.BUILD, GateName.BUILD])
