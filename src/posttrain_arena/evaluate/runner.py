"""Run every task of a suite k times with an agent, with bounded concurrency.

Resuming is by trial identity (task checksum + agent name + seed) through a Journal:
trials with a final result are read back, trials that never finished or failed on
infrastructure run again. Pass the journal to the TrialRunner (it skips and records
trials itself) or to `evaluate` when the runner has none.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

from posttrain_arena.agents.base import Agent
from posttrain_arena.agents.model import AgentSettings, ModelAgent
from posttrain_arena.evaluate.report import EvalReport, build_report
from posttrain_arena.evaluate.suite import Suite
from posttrain_arena.models.base import ChatModel
from posttrain_arena.spec.package import TaskPackage
from posttrain_arena.trial.journal import Journal
from posttrain_arena.trial.result import Outcome, TrialResult
from posttrain_arena.trial.runner import TrialRunner, trial_id

AgentFactory = Callable[[TaskPackage], Agent]
"""Builds the agent for one task (so per-task limits from task.md apply)."""

Progress = Callable[[int, int, TrialResult], None]
"""Called after each trial with (trials done, trials in all, that trial's result)."""


def model_agents(model: ChatModel, settings: AgentSettings | None = None,
                 name: str | None = None) -> AgentFactory:
    """A factory of model agents sharing one client, with each task's own limits."""
    base = settings or AgentSettings()
    agent_name = name or f"model:{model.name}"

    def make(task: TaskPackage) -> Agent:
        return ModelAgent(model, base.for_task(task.frontmatter.agent), name=agent_name)

    return make


def evaluate(
    suite: Suite,
    agent_factory: AgentFactory,
    *,
    k: int = 1,
    jobs: int = 1,
    runner: TrialRunner,
    journal: Journal | None = None,
    progress: Progress | None = None,
    model: str | None = None,
    agent_timeout: float | None = None,
) -> EvalReport:
    """Run k trials (seeds 0..k-1) of every task; return the report.

    At most `jobs` trials run at once. A trial that raises is recorded as an
    infrastructure error, never as reward 0.
    """
    if k < 1 or jobs < 1:
        raise ValueError(f"k and jobs must be at least 1 (got k={k}, jobs={jobs})")
    agents = {t.name: agent_factory(t) for t in suite.tasks}
    names = {a.name for a in agents.values()}
    agent_name = names.pop() if len(names) == 1 else "mixed:" + ",".join(sorted(names))
    own_journal = journal if journal is not None and runner.journal is not journal else None
    work = [(task, seed) for seed in range(k) for task in suite.tasks]
    results: list[TrialResult] = []
    start = time.monotonic()

    def one(task: TaskPackage, seed: int) -> TrialResult:
        agent = agents[task.name]
        if own_journal is not None:
            done = own_journal.done(trial_id(task.checksum, agent.name, seed))
            if done is not None:
                return done
        try:
            result = runner.run(task, agent, seed=seed, agent_timeout=agent_timeout)
        except Exception as exc:  # the runner failed, not the model
            result = _infra(task, agent.name, seed, runner, f"{type(exc).__name__}: {exc}")
        if own_journal is not None:
            own_journal.append(result)
        return result

    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="eval") as pool:
        futures = [pool.submit(one, task, seed) for task, seed in work]
        for future in as_completed(futures):
            result = future.result()
            results.append(result)
            if progress is not None:
                progress(len(results), len(work), result)
    return build_report(
        [(t.name, t.checksum, t.domain.value) for t in suite.tasks], results,
        model=model or agent_name, agent=agent_name, suite=suite.source,
        suite_hash=suite.hash, k=k, backend=runner.backend_name,
        wall_sec=time.monotonic() - start,
    )


def _infra(task: TaskPackage, agent: str, seed: int, runner: TrialRunner,
           reason: str) -> TrialResult:
    return TrialResult(
        trial_id=trial_id(task.checksum, agent, seed), task_name=task.name,
        task_checksum=task.checksum, domain=task.domain.value, agent=agent, seed=seed,
        backend=runner.backend_name, outcome=Outcome.INFRA_ERROR, reason=reason,
    )
