"""GRPO episodes: one rollout is one real trial of the model agent, scored by its verifier.

Who caused a failed episode decides its reward, as in evaluation and the gates
(evaluate.attribution): what the agent did (a timeout, a state the verifier cannot
read, a conversation past the model's context) is its 0; only what the harness, host or
provider did carries no reward (None, so TRL zeroes its advantage) and is masked out of
the loss (`rollout.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from posttrain_arena.agents.transcript import Transcript
from posttrain_arena.evaluate.attribution import training_reward
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.trial.executor import TrialJob, TrialOutput


@dataclass
class Episode:
    """One rollout: its transcript and the verifier's reward (None: not scorable)."""

    task: str
    transcript: Transcript | None
    reward: float | None
    reason: str | None = None
    model_sec: float = 0.0
    env_sec: float = 0.0
    wall_sec: float = 0.0


EpisodeFn = Callable[[TaskPackage, Any, int], Episode]


def trial_episodes(run_job: Callable[[TrialJob], TrialOutput]) -> EpisodeFn:
    """Episodes as real trials (on whatever executor `run_job` uses): the verifier's
    reward; infrastructure failures -> None."""

    def episode(task: TaskPackage, agent: Any, seed: int) -> Episode:
        t0 = time.monotonic()
        out = run_job(TrialJob(task, agent, seed, capture=True))
        wall = time.monotonic() - t0
        result, run = out.result, out.run
        info = run.info if run is not None else {}
        # Who caused a failure decides (evaluate.attribution): the agent's doing (a
        # timeout, a state the verifier cannot read, an outgrown context) is its 0;
        # only what the harness or provider did is masked.
        reward = training_reward(result.outcome, result.reward, result.reason)
        reason = result.reason
        if run is None:
            reward, reason = None, reason or "the agent never ran"
        return Episode(task=task.name, transcript=run.transcript if run else None,
                       reward=reward, reason=reason, model_sec=float(info.get("model_sec", 0)),
                       env_sec=wall - float(info.get("model_sec", 0)), wall_sec=wall)

    return episode

