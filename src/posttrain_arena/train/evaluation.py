"""Evaluation inside the pipeline: a policy on a task list, k samples per task.

The trials run through the shared TrialRunner with a journal in the stage's folder, so
an interrupted evaluation resumes with the trials it has not finished. Sample j of every
task uses seed `seed * 1000 + j`, for the base and the post-trained model alike, which
is what makes the before/after comparison paired.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain_arena.spec.package import TaskPackage
from posttrain_arena.trial.result import TrialResult


class TaskEval(BaseModel):
    """One task's samples."""

    task: str = Field(description="Task name")
    domain: str = Field(description="Domain slug")
    passes: list[bool | None] = Field(
        description="Per sample: passed, failed, or None (infrastructure failure, excluded)"
    )
    rewards: list[float | None] = Field(description="Per sample reward (None: not scored)")

    @property
    def rate(self) -> float | None:
        """Share of scored samples that passed (None when no sample was scored)."""
        scored = [p for p in self.passes if p is not None]
        return sum(scored) / len(scored) if scored else None


class EvalSummary(BaseModel):
    """A policy's results on a task list."""

    policy: str = Field(description="What was evaluated (model location)")
    samples_per_task: int = Field(description="k")
    tasks: list[TaskEval] = Field(description="Per task")
    seconds: float = Field(default=0.0, description="Wall-clock of the evaluation")
    model_sec: float = Field(default=0.0, description="Summed time in the model")
    env_sec: float = Field(default=0.0, description="Summed time outside the model")

    @property
    def pass_rate(self) -> float:
        """Mean per-task pass rate over tasks with a scored sample."""
        rates = [t.rate for t in self.tasks if t.rate is not None]
        return sum(rates) / len(rates) if rates else 0.0

    @property
    def infra_failures(self) -> int:
        return sum(p is None for t in self.tasks for p in t.passes)

    def per_domain(self) -> dict[str, float]:
        by: dict[str, list[float]] = defaultdict(list)
        for t in self.tasks:
            if t.rate is not None:
                by[t.domain].append(t.rate)
        return {d: sum(v) / len(v) for d, v in sorted(by.items())}

    def rates(self) -> dict[str, float | None]:
        return {t.task: t.rate for t in self.tasks}


RunTrial = Callable[[TaskPackage, Any, int], TrialResult]


def evaluate_policy(
    tasks: Sequence[TaskPackage],
    agent: Any,
    *,
    run_trial: RunTrial,
    k: int,
    seed: int,
    concurrency: int,
    policy: str,
    on_step: Callable[[int, int], None] | None = None,
) -> EvalSummary:
    """Run k samples of `agent` on every task; infrastructure failures are excluded."""
    jobs = [(t, j) for t in tasks for j in range(k)]
    done = [0]
    t0 = time.monotonic()

    def one(job: tuple[TaskPackage, int]) -> TrialResult:
        task, j = job
        result = run_trial(task, agent, seed * 1000 + j)
        done[0] += 1
        if on_step is not None:
            on_step(done[0], len(jobs))
        return result

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        results = list(pool.map(one, jobs))
    by_task: dict[str, list[TrialResult]] = defaultdict(list)
    for (task, _), r in zip(jobs, results, strict=True):
        by_task[task.name].append(r)
    out = []
    model_sec = 0.0
    wall = 0.0
    for task in tasks:
        rs = by_task[task.name]
        passes: list[bool | None] = [None if r.outcome.is_infrastructure else r.passed
                                     for r in rs]
        rewards = [None if r.outcome.is_infrastructure else r.score for r in rs]
        out.append(TaskEval(task=task.name, domain=task.domain.value, passes=passes,
                            rewards=rewards))
        for r in rs:
            model_sec += float(r.agent_info.get("model_sec", 0.0) or 0.0)
            wall += float(r.timings.get("total", 0.0) or 0.0)
    return EvalSummary(policy=policy, samples_per_task=k, tasks=out,
                       seconds=time.monotonic() - t0, model_sec=model_sec,
                       env_sec=max(0.0, wall - model_sec))


def save_summary(summary: EvalSummary, path: Path) -> None:
    path.write_text(summary.model_dump_json(indent=1))


def load_summary(path: Path) -> EvalSummary:
    return EvalSummary.model_validate_json(path.read_text())
