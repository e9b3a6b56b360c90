"""Who caused a trial's failure: the one classification evaluation, gates and GRPO use.

| outcome | cause | in pass rates and GRPO |
|---|---|---|
| scored | none | its reward |
| agent_timeout, verifier_error | agent | 0 |
| build_failed | task | left out |
| infra_error, the model provider failed | provider | left out |
| infra_error, anything else | harness | left out |

What the model or agent did is the agent's 0 everywhere: running out of time, leaving a
state the verifier cannot read, a conversation longer than the model's context, a
request the server refused for what the model wrote into it, malformed tool calls (the
last three end the episode or are answered inside it, agents/model.py, so the trial is
verified like any other). Only what the harness, host or provider did (transport
errors, 5xx and the server's timeouts, a sandbox that would not start, a task image that
would not build) leaves the trial out: counted as lost, re-run on resume, and reported
as lost in coverage (evaluate.coverage), never as a 0 and never silently.
"""

from __future__ import annotations

from enum import StrEnum

from posttrain_arena.agents.model import PROVIDER_FAILED
from posttrain_arena.trial.result import Outcome


class Cause(StrEnum):
    """Whose doing a failed trial was."""

    AGENT = "agent"  # the model or its agent: reward 0
    TASK = "task"  # the task package (its environment did not build)
    HARNESS = "harness"  # this system or its host (sandbox start, executor, a bug)
    PROVIDER = "provider"  # the model's server (unreachable, 5xx, its timeouts)


def failure_cause(outcome: Outcome | str, reason: str | None = None) -> Cause | None:
    """Who caused a trial to end as it did; None when it was scored.

    Takes a TrialResult's or a report's TrialSummary's outcome and reason alike."""
    outcome = Outcome(outcome)
    if outcome is Outcome.SCORED:
        return None
    if outcome in (Outcome.AGENT_TIMEOUT, Outcome.VERIFIER_ERROR):
        return Cause.AGENT
    if outcome is Outcome.BUILD_FAILED:
        return Cause.TASK
    return Cause.PROVIDER if reason and PROVIDER_FAILED in reason else Cause.HARNESS


def counts(outcome: Outcome | str, reason: str | None = None) -> bool:
    """Whether the trial counts (in pass rates, gates and GRPO): scored or the agent's 0."""
    return failure_cause(outcome, reason) in (None, Cause.AGENT)


def training_reward(outcome: Outcome | str, reward: float | None,
                    reason: str | None = None) -> float | None:
    """The reward GRPO trains on: the verifier's when scored, 0 when the agent failed,
    None (the episode is masked) when it was not the agent's doing."""
    if not counts(outcome, reason):
        return None
    return reward if Outcome(outcome) is Outcome.SCORED and reward is not None else 0.0
