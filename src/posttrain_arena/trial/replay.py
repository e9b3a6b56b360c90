"""Replays for authors and collection owners: oracle and empty trials, with verdicts.

* oracle replay: the reference solution must score 1.0;
* empty trial: the verifier must reject an untouched environment (reward below 1.0);
* script probe (`script:PATH`): any script as the agent; reported as it scored.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from pydantic import BaseModel, Field

from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.task_format.findings import SpecError
from posttrain_arena.task_format.package import is_task_dir, load_task
from posttrain_arena.trial.executor import ThreadExecutor, TrialExecutor, TrialJob
from posttrain_arena.trial.result import Outcome, TrialResult
from posttrain_arena.trial.runner import TrialRunner


def agent_spec(spec: str) -> AgentSpec:
    """`oracle`, `empty` or `script:PATH` as an AgentSpec (any executor can run it)."""
    if spec in ("oracle", "empty"):
        return AgentSpec(kind=spec)  # type: ignore[arg-type]
    if spec.startswith("script:"):
        return AgentSpec(kind="script", script=spec.removeprefix("script:"))
    raise ValueError(f"unknown agent {spec!r}; use oracle, empty or script:PATH")


class ReplayCheck(BaseModel):
    """One replay trial and whether it behaved as a good task requires."""

    task: str = Field(description="task directory name")
    kind: str = Field(description="oracle, empty or script")
    ok: bool = Field(description="oracle scored 1.0 / empty scored below 1.0 / script scored")
    message: str = Field(description="the verdict in words")
    result: TrialResult | None = Field(default=None, description="the trial, when it ran")


def judge(kind: str, task: str, result: TrialResult) -> ReplayCheck:
    """Whether a replay trial's result is what its kind requires."""
    scored = result.outcome is Outcome.SCORED and result.reward is not None
    reward = result.reward if scored else None
    if not scored:
        message = f"{result.outcome.value}: {result.reason}"
        return ReplayCheck(task=task, kind=kind, ok=False, message=message, result=result)
    if kind == "oracle":
        ok = (reward or 0.0) >= 1.0
        message = f"reward: {reward}" if ok else (
            f"reward: {reward}; the oracle must score 1.0 "
            f"(see {result.record_dir or 'the record'})")
    elif kind == "empty":
        ok = (reward or 0.0) < 1.0
        message = f"reward: {reward}" if ok else (
            "reward: 1.0; the verifier accepts an untouched environment")
    else:
        ok, message = True, f"reward: {reward}"
    return ReplayCheck(task=task, kind=kind, ok=ok, message=message, result=result)


def replay_task(path: Path, runner: TrialRunner | None = None, *, agent: str = "oracle",
                executor: TrialExecutor | None = None) -> ReplayCheck:
    """One replay trial of the task at `path` (agent: oracle, empty or script:PATH), on
    `executor` or else in this process on `runner`."""
    kind = agent.split(":", 1)[0]
    try:
        task = load_task(path)
    except SpecError as exc:
        return ReplayCheck(task=Path(path).name, kind=kind, ok=False,
                           message=f"the package does not load: {exc}")
    ran = executor if executor is not None else ThreadExecutor(_need(runner))
    result = ran.run(TrialJob(task, agent_spec(agent))).result
    return judge(kind, task.name, result)


class CollectionReplay(BaseModel):
    """Oracle and empty trials of every package in a collection."""

    path: str = Field(description="the collection directory")
    backend: str = Field(description="sandbox backend used")
    checks: list[ReplayCheck] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)


def task_dirs(root: Path) -> list[Path]:
    """Package folders of a collection (envs/*), or of a plain folder of packages."""
    base = root / "envs" if (root / "envs").is_dir() else root
    if is_task_dir(root):
        return [root]
    return sorted(d for d in base.iterdir()
                  if d.is_dir() and not d.is_symlink() and not d.name.startswith(("_", ".")))


def replay_collection(
    root: Path, runner: TrialRunner | None = None, *, jobs: int = 1,
    on_done: Callable[[ReplayCheck], None] | None = None,
    executor: TrialExecutor | None = None,
) -> CollectionReplay:
    """Oracle and empty trials for every package, `jobs` at a time, on `executor` or
    else in this process on `runner`."""
    dirs = task_dirs(Path(root))
    ran = executor if executor is not None else ThreadExecutor(_need(runner), slots=jobs)
    report = CollectionReplay(path=str(root), backend=ran.backend_name)
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="replay") as pool:
        futures = [pool.submit(replay_task, d, agent=kind, executor=ran)
                   for d in dirs for kind in ("oracle", "empty")]
        for fut in as_completed(futures):
            check = fut.result()
            report.checks.append(check)
            if on_done is not None:
                on_done(check)
    report.checks.sort(key=lambda c: (c.task, c.kind != "oracle"))
    return report


def _need(runner: TrialRunner | None) -> TrialRunner:
    if runner is None:
        raise ValueError("a replay needs a runner or an executor")
    return runner


def replay_jobs(root: Path) -> int:
    """How many trials `replay_collection` runs for `root` (for progress bars)."""
    return 2 * len(task_dirs(Path(root)))
