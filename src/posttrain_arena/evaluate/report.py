"""EvalReport: pass rates of one agent on one suite, per task, per domain and overall.

Trials lost to what the harness, host, task image or provider did (evaluate.attribution)
are counted as lost but excluded from every rate: they say nothing about the model;
whatever the agent caused is its 0. A task's pass rate is passes / scored trials;
domain and overall rates are means over tasks, so each task weighs the same.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from posttrain_arena.evaluate.attribution import counts
from posttrain_arena.trial.result import TrialResult

REPORT_FORMAT = "arena-eval-report/1"


class TrialSummary(BaseModel):
    """One trial, as the report keeps it."""

    trial_id: str = Field(description="Identity: task checksum + agent + seed, hashed")
    task_name: str = Field(description="Task id within the suite")
    seed: int = Field(description="Attempt number (0..k-1)")
    outcome: str = Field(description="scored, verifier_error, agent_timeout, build_failed, "
                         "infra_error")
    reward: float | None = Field(description="Verifier reward when scored")
    passed: bool = Field(description="Scored with full reward")
    reason: str | None = Field(default=None, description="Why, for any outcome but scored")
    seconds: float = Field(default=0.0, description="Wall-clock of the whole trial")
    prompt_tokens: int = Field(default=0, description="Prompt tokens over all turns")
    completion_tokens: int = Field(default=0, description="Generated tokens over all turns")


class TaskStats(BaseModel):
    """One task's results."""

    task_name: str = Field(description="Task id (package directory name)")
    checksum: str = Field(description="Package content hash; pairs tasks across reports")
    domain: str = Field(description="Domain slug")
    trials: int = Field(description="Trials attempted")
    n: int = Field(description="Trials that count: all but infrastructure failures")
    passes: int = Field(description="Trials scored with full reward")
    pass_rate: float | None = Field(description="passes / n; None when n is 0")
    mean_reward: float | None = Field(description="Mean reward over counted trials")
    infra_errors: int = Field(description="Trials lost to infrastructure (not counted)")


class RateStats(BaseModel):
    """Rates over a group of tasks (a domain, or the whole suite)."""

    name: str = Field(description="Domain slug, or 'overall'")
    tasks: int = Field(description="Tasks in the group")
    scored_tasks: int = Field(description="Tasks with at least one counted trial")
    n: int = Field(description="Counted trials")
    passes: int = Field(description="Passing trials")
    pass_rate: float | None = Field(description="Mean of task pass rates over scored tasks")
    mean_reward: float | None = Field(description="Mean of task mean rewards")
    infra_errors: int = Field(description="Trials lost to infrastructure")


class EvalReport(BaseModel):
    """What `arena eval` writes."""

    format: str = Field(default=REPORT_FORMAT, description="Report format version")
    model: str = Field(description="Model spec the agent ran (or the agent name)")
    agent: str = Field(description="Agent name, part of every trial's identity")
    suite: str = Field(description="Where the suite was read from")
    suite_hash: str = Field(description="Content hash of the suite's tasks")
    k: int = Field(description="Trials per task")
    backend: str = Field(description="Sandbox backend")
    created_at: str = Field(description="UTC time the report was written")
    package_version: str = Field(description="posttrain-arena version")
    wall_sec: float = Field(description="Wall-clock of the evaluation")
    trial_sec: float = Field(description="Sum of trial durations")
    prompt_tokens: int = Field(description="Prompt tokens over all trials")
    completion_tokens: int = Field(description="Generated tokens over all trials")
    overall: RateStats = Field(description="Rates over the whole suite")
    domains: list[RateStats] = Field(description="Rates per domain")
    tasks: list[TaskStats] = Field(description="Per-task results, by task name")
    trials: list[TrialSummary] = Field(description="Every trial")

    @property
    def infra_errors(self) -> int:
        return self.overall.infra_errors

    def save(self, path: Path | str) -> None:
        """Write the report as JSON (atomically)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(self.model_dump_json(indent=2), encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path | str) -> EvalReport:
        """Read a report; ValueError names the file when it is not one."""
        path = Path(path)
        try:
            return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable eval report ({exc})") from None


def summarise(result: TrialResult) -> TrialSummary:
    """A trial result reduced to what reports keep."""
    info = result.agent_info or {}
    return TrialSummary(
        trial_id=result.trial_id, task_name=result.task_name, seed=result.seed,
        outcome=result.outcome.value, reward=result.reward, passed=result.passed,
        reason=result.reason, seconds=float(result.timings.get("total", 0.0)),
        prompt_tokens=int(info.get("prompt_tokens", 0) or 0),
        completion_tokens=int(info.get("completion_tokens", 0) or 0),
    )


def task_stats(name: str, checksum: str, domain: str, results: Iterable[TrialResult]
               ) -> TaskStats:
    """Counts and rates of one task's trials."""
    results = list(results)
    counted = [r for r in results if counts(r.outcome, r.reason)]
    passes = sum(r.passed for r in counted)
    n = len(counted)
    return TaskStats(
        task_name=name, checksum=checksum, domain=domain, trials=len(results), n=n,
        passes=passes, pass_rate=passes / n if n else None,
        mean_reward=sum(r.score for r in counted) / n if n else None,
        infra_errors=len(results) - n,
    )


def rate_stats(name: str, tasks: list[TaskStats]) -> RateStats:
    """Macro rates over tasks that have counted trials."""
    scored = [t for t in tasks if t.n > 0]
    return RateStats(
        name=name, tasks=len(tasks), scored_tasks=len(scored), n=sum(t.n for t in tasks),
        passes=sum(t.passes for t in tasks),
        pass_rate=sum(t.pass_rate or 0.0 for t in scored) / len(scored) if scored else None,
        mean_reward=sum(t.mean_reward or 0.0 for t in scored) / len(scored) if scored else None,
        infra_errors=sum(t.infra_errors for t in tasks),
    )


def build_report(
    tasks: Iterable[tuple[str, str, str]],
    results: Iterable[TrialResult],
    *,
    model: str,
    agent: str,
    suite: str,
    suite_hash: str,
    k: int,
    backend: str,
    wall_sec: float,
) -> EvalReport:
    """The report for `tasks` (name, checksum, domain) from their trial results."""
    from posttrain_arena import __version__

    by_task: dict[str, list[TrialResult]] = defaultdict(list)
    all_results = list(results)
    for r in all_results:
        by_task[r.task_name].append(r)
    stats = [task_stats(name, checksum, domain, by_task.get(name, []))
             for name, checksum, domain in sorted(tasks)]
    by_domain: dict[str, list[TaskStats]] = defaultdict(list)
    for t in stats:
        by_domain[t.domain].append(t)
    summaries = sorted((summarise(r) for r in all_results), key=lambda s: (s.task_name, s.seed))
    return EvalReport(
        model=model, agent=agent, suite=suite, suite_hash=suite_hash, k=k, backend=backend,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        package_version=__version__, wall_sec=round(wall_sec, 3),
        trial_sec=round(sum(s.seconds for s in summaries), 3),
        prompt_tokens=sum(s.prompt_tokens for s in summaries),
        completion_tokens=sum(s.completion_tokens for s in summaries),
        overall=rate_stats("overall", stats),
        domains=[rate_stats(d, ts) for d, ts in sorted(by_domain.items())],
        tasks=stats, trials=summaries,
    )
