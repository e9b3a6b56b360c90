"""Coverage: of the trials an evaluation set out to run, how many were scored and lost.

A trial is attempted for every task and seed (k per task); it is scored when it counts
(evaluate.attribution: scored, or the agent's 0) and lost otherwise, by cause (task,
harness, provider) or because no result came back at all ("missing"). An evaluation
that lost too much says nothing reliable: a score is computed only when each arm meets
the recipe's `Completeness` (overall and per task), and a run that does not says
"incomplete" with these counts and no number. A loss that is uneven between the arms
(long failing episodes lost only after training) would otherwise move the change.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from pydantic import BaseModel, ConfigDict, Field

from posttrain_arena.evaluate.attribution import counts, failure_cause
from posttrain_arena.evaluate.report import EvalReport

MISSING = "missing"  # attempted, but no result was recorded


class Completeness(BaseModel):
    """How much of an evaluation must be scored for a score to be computed from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_scored_share: float = Field(
        default=0.95, gt=0.0, le=1.0,
        description="Share of all attempted trials of an arm that must be scored")
    min_task_scored_share: float = Field(
        default=0.5, gt=0.0, le=1.0,
        description="Share of each task's attempted trials that must be scored")


class TaskCoverage(BaseModel):
    """One task's trials."""

    task_name: str = Field(description="Task id")
    attempted: int = Field(description="Trials set out to run (k)")
    scored: int = Field(description="Trials that count (scored or the agent's 0)")
    lost: int = Field(description="attempted - scored")


class Coverage(BaseModel):
    """One evaluation's trials: attempted, scored and lost, overall and per task."""

    attempted: int = Field(description="Trials set out to run (tasks x k)")
    scored: int = Field(description="Trials that count")
    lost: int = Field(description="attempted - scored")
    lost_by_cause: dict[str, int] = Field(
        description="Lost trials by cause: task, harness, provider, missing")
    tasks: list[TaskCoverage] = Field(description="Per task, by name")

    def shortfalls(self, need: Completeness) -> list[str]:
        """What falls short of `need`, one line each (empty when complete)."""
        out = []
        if self.attempted == 0 or self.scored < need.min_scored_share * self.attempted:
            out.append(f"{self.scored} of {self.attempted} trials scored, below the "
                       f"{need.min_scored_share:.0%} required (lost: "
                       + (", ".join(f"{n} {c}" for c, n in sorted(self.lost_by_cause.items()))
                          or "none") + ")")
        short = [t for t in self.tasks if t.scored < need.min_task_scored_share * t.attempted]
        if short:
            shown = ", ".join(f"{t.task_name} {t.scored}/{t.attempted}" for t in short[:5])
            more = f" and {len(short) - 5} more" if len(short) > 5 else ""
            out.append(f"{len(short)} task(s) below {need.min_task_scored_share:.0%} of their "
                       f"trials scored: {shown}{more}")
        return out


def coverage_of(report: EvalReport) -> Coverage:
    """The coverage of a report: k trials attempted per task of its suite."""
    scored: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    causes: defaultdict[str, int] = defaultdict(int)
    for t in report.trials:
        seen[t.task_name] += 1
        if counts(t.outcome, t.reason):
            scored[t.task_name] += 1
        else:
            causes[str(failure_cause(t.outcome, t.reason))] += 1
    tasks = []
    for task in report.tasks:
        attempted = max(report.k, seen[task.task_name])
        if attempted > seen[task.task_name]:
            causes[MISSING] += attempted - seen[task.task_name]
        tasks.append(TaskCoverage(task_name=task.task_name, attempted=attempted,
                                  scored=scored[task.task_name],
                                  lost=attempted - scored[task.task_name]))
    attempted = sum(t.attempted for t in tasks)
    total = sum(t.scored for t in tasks)
    return Coverage(attempted=attempted, scored=total, lost=attempted - total,
                    lost_by_cause=dict(sorted(causes.items())), tasks=tasks)
