"""GatePolicy: which gates a task must pass, with which thresholds, to be trained on.

The policy reads a TaskEvidence's raw measurements and says, per gate, pass / fail /
error / skipped, and whether the task is eligible. It is the one place where the
thresholds are applied: the gate run records the default policy's verdict, and a
recipe re-assesses the same evidence with its own policy.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from posttrain_arena.evaluate.attribution import counts
from posttrain_arena.evaluate.report import TrialSummary
from posttrain_arena.gates.evidence import (
    GateCheck,
    GateName,
    GateStatus,
    TaskEvidence,
    Verdict,
)
from posttrain_arena.trial.result import Outcome

# Outcomes that leave a trial out, as evaluation and GRPO decide (evaluate.attribution).
INFRA_OUTCOMES = tuple(o.value for o in Outcome if not counts(o))


class GatePolicy(BaseModel):
    """Which gates are required and their thresholds (every field is checked)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gates: list[GateName] = Field(
        default_factory=lambda: list(GateName),
        description="Gates a task must pass to be eligible: build, oracle, empty, probes, "
                    "learnable")
    max_flake_rate: float = Field(
        default=0.0, ge=0.0, lt=1.0,
        description="Largest share of oracle reruns allowed not to score 1.0")
    max_empty_reward: float = Field(
        default=0.0, ge=0.0, lt=1.0,
        description="Largest reward the empty trial may get (0: doing nothing scores 0)")
    probe_accept_reward: float = Field(
        default=1.0, gt=0.0, le=1.0,
        description="A probe scoring at least this was accepted by the verifier (a fail)")
    learnable_min_rate: float = Field(
        default=0.0, ge=0.0, lt=1.0,
        description="The base model's pass rate must be above this (0: solved at least once)")
    learnable_max_rate: float = Field(
        default=1.0, gt=0.0, le=1.0,
        description="The base model's pass rate must be below this (1: failed at least once)")

    @model_validator(mode="after")
    def _band(self) -> GatePolicy:
        if self.learnable_min_rate >= self.learnable_max_rate:
            raise ValueError(f"learnable_min_rate ({self.learnable_min_rate}) must be below "
                             f"learnable_max_rate ({self.learnable_max_rate})")
        if len(set(self.gates)) != len(self.gates):
            raise ValueError("gates lists a gate twice")
        return self

    def assess(self, evidence: TaskEvidence) -> Verdict:
        """Every gate's status for this evidence, and the verdict."""
        checks: list[GateCheck] = []
        blocked: str | None = None
        if evidence.load_error is not None:
            blocked = f"the package did not load: {evidence.load_error}"
        judges: dict[GateName, Callable[[TaskEvidence], GateCheck]] = {
            GateName.BUILD: self._build, GateName.ORACLE: self._oracle,
            GateName.EMPTY: self._empty, GateName.PROBES: self._probes,
            GateName.LEARNABLE: self._learnable,
        }
        oracle_failed = False
        for gate in GateName:
            # Without an image nothing else ran; without a passing oracle, the probes and
            # the base model were not run (their results would mean nothing).
            if blocked is None and oracle_failed and (
                    (gate is GateName.PROBES and not evidence.probes)
                    or (gate is GateName.LEARNABLE and evidence.base is None)):
                checks.append(GateCheck(gate=gate, status=GateStatus.SKIPPED,
                                        reason="the oracle gate did not pass"))
                continue
            if blocked is not None:
                checks.append(GateCheck(gate=gate, status=GateStatus.SKIPPED, reason=blocked))
                continue
            check = judges[gate](evidence)
            checks.append(check)
            if gate is GateName.BUILD and check.status is not GateStatus.PASS:
                blocked = "the environment did not build"
            if gate is GateName.ORACLE:
                oracle_failed = check.status is not GateStatus.PASS
        required = set(self.gates)
        reasons = [f"{c.gate.value}: {c.reason}" for c in checks
                   if c.gate in required and c.status is not GateStatus.PASS]
        return Verdict(eligible=not reasons, reasons=reasons, gates=checks)

    # -- one judge per gate ------------------------------------------------------------

    def _build(self, ev: TaskEvidence) -> GateCheck:
        b = ev.build
        if b is None:
            return _check(GateName.BUILD, GateStatus.ERROR, "the build did not run")
        if not b.ok:
            return _check(GateName.BUILD, GateStatus.FAIL, b.error or "the build failed")
        return _check(GateName.BUILD, GateStatus.PASS)

    def _oracle(self, ev: TaskEvidence) -> GateCheck:
        g = GateName.ORACLE
        if not ev.oracle:
            return _check(g, GateStatus.ERROR, ev.oracle_note or "no oracle trial ran")
        infra = [t for t in ev.oracle if t.outcome in INFRA_OUTCOMES]
        if infra:
            return _check(g, GateStatus.ERROR, f"{len(infra)} oracle rerun(s) failed on "
                                               f"infrastructure: {infra[0].reason}")
        bad = [t for t in ev.oracle if not t.passed]
        if not bad:
            if ev.oracle_note:
                return _check(g, GateStatus.ERROR, ev.oracle_note)
            return _check(g, GateStatus.PASS)
        first = _trial_words(bad[0])
        if len(bad) == len(ev.oracle):
            note = f" ({ev.oracle_note})" if ev.oracle_note else ""
            return _check(g, GateStatus.FAIL, f"the oracle never scores 1.0 in "
                                              f"{len(ev.oracle)} rerun(s): {first}{note}")
        rate = ev.flake_rate or 0.0
        words = (f"flaky: {len(bad)} of {len(ev.oracle)} oracle reruns did not score 1.0 "
                 f"(flake rate {rate:.2f}): {first}")
        if rate <= self.max_flake_rate:
            return _check(g, GateStatus.PASS, words)
        return _check(g, GateStatus.FAIL, words)

    def _empty(self, ev: TaskEvidence) -> GateCheck:
        g = GateName.EMPTY
        t = ev.empty
        if t is None:
            return _check(g, GateStatus.ERROR, "the empty trial did not run")
        if t.outcome in INFRA_OUTCOMES:
            return _check(g, GateStatus.ERROR, f"the empty trial failed on infrastructure: "
                                               f"{t.reason}")
        if t.outcome == "agent_timeout":
            return _check(g, GateStatus.ERROR, f"the empty trial timed out: {t.reason}")
        if t.outcome == "verifier_error":  # reward 0 by the trial contract
            return _check(g, GateStatus.PASS, f"the verifier crashed on the untouched "
                                              f"environment (reward 0): {t.reason}")
        reward = t.reward if t.outcome == "scored" else 0.0
        if (reward or 0.0) >= 1.0:
            return _check(g, GateStatus.FAIL, "doing nothing scores 1.0: the verifier "
                                              "accepts an untouched environment")
        if (reward or 0.0) > self.max_empty_reward:
            return _check(g, GateStatus.FAIL, f"doing nothing earns a partial reward of "
                                              f"{reward:g} (at most {self.max_empty_reward:g} "
                                              "allowed)")
        return _check(g, GateStatus.PASS)

    def _probes(self, ev: TaskEvidence) -> GateCheck:
        g = GateName.PROBES
        if not ev.probes:
            return _check(g, GateStatus.SKIPPED, "no probe ran")
        accepted, errors, ran = [], [], 0
        if ev.replay is not None and not ev.replay.passed:
            # The kept state does not score outside the oracle's session, so a probe's
            # rejection may come from the replay, not from its perturbation.
            return _check(g, GateStatus.ERROR, (
                "the oracle's final state, verified outside its session, did not score "
                f"1.0 ({ev.replay.outcome}, reward {ev.replay.reward}: "
                f"{ev.replay.reason or 'no reason'}), so the probes cannot tell what "
                "the verifier rejects (does the verifier read files outside the state "
                "roots? declare them in verifier.state_paths; a multi-step task's probes "
                "are judged by its last step's verifier, which must accept the final "
                "state)"))
        for p in ev.probes:
            if not p.applicable:
                continue
            ran += 1
            t = p.trial
            if t is None or t.outcome in (*INFRA_OUTCOMES, "agent_timeout"):
                errors.append(f"{p.kind}: {t.reason if t else p.note or 'did not run'}")
            elif p.start == "empty":
                floor = (ev.empty.reward or 0.0) if ev.empty is not None else 0.0
                if t.outcome == "scored" and (t.reward or 0.0) > floor:
                    accepted.append(f"{p.kind} ({p.description}; reward {t.reward:g}, "
                                    f"above the empty trial's {floor:g})")
            elif t.outcome == "scored" and (t.reward or 0.0) >= self.probe_accept_reward:
                accepted.append(f"{p.kind} ({p.description}; reward {t.reward:g})")
        if accepted:
            return _check(g, GateStatus.FAIL, "the verifier accepts known-bad states: "
                                              + "; ".join(accepted))
        if errors:
            return _check(g, GateStatus.ERROR, "probe(s) could not be measured: "
                                               + "; ".join(errors))
        if ran == 0:
            # Not the task's fault (an oracle that only deletes, say); the empty trial
            # still shows the verifier rejects an untouched environment.
            return _check(g, GateStatus.PASS, "no probe applies: the oracle created or "
                                              "changed no file to perturb")
        return _check(g, GateStatus.PASS)

    def _learnable(self, ev: TaskEvidence) -> GateCheck:
        g = GateName.LEARNABLE
        b = ev.base
        if b is None:
            return _check(g, GateStatus.SKIPPED, "the base model was not sampled")
        if b.n < b.k:
            return _check(g, GateStatus.ERROR, f"{b.k - b.n} of {b.k} base-model samples "
                                               "failed on infrastructure")
        rate = b.pass_rate or 0.0
        if b.k < 2:
            return _check(g, GateStatus.SKIPPED, "with k = 1 no task is solved only "
                                                 "sometimes; sample k of at least 2")
        if rate <= self.learnable_min_rate:
            return _check(g, GateStatus.FAIL, f"not learnable: the base model solved it "
                                              f"{b.solved}/{b.n} times (never, or too rarely "
                                              "for a training signal)")
        if rate >= self.learnable_max_rate:
            return _check(g, GateStatus.FAIL, f"not learnable: the base model solved it "
                                              f"{b.solved}/{b.n} times (always: nothing to "
                                              "learn)")
        return _check(g, GateStatus.PASS)


def _check(gate: GateName, status: GateStatus, reason: str | None = None) -> GateCheck:
    return GateCheck(gate=gate, status=status, reason=reason)


def _trial_words(t: TrialSummary) -> str:
    if t.outcome == "scored":
        return f"rerun {t.seed} scored {t.reward:g}"
    return f"rerun {t.seed} ended in {t.outcome}: {t.reason}"


DEFAULT_POLICY = GatePolicy()
