"""Run every task of a suite k times with an agent, with bounded concurrency.

Resuming is by trial identity (task checksum + agent name + seed) through a Journal:
trials with a final result are read back, trials that never finished or failed on
infrastructure run again. Pass the journal to `evaluate` (it is read and written here,
on the driver, whatever executor runs the trials) or to the TrialRunner of a thread
executor (the runner then skips and records trials itself).

Where trials run is the executor's business (`trial.executor`): in this process by
default, or one Ray task per trial with `distributed.RayExecutor`. An agent factory may
return live agents (in-process only) or `AgentSpec`s (any executor).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

from posttrain_arena.agents.base import Agent
from posttrain_arena.agents.model import AgentSettings, ModelAgent
from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.evaluate.report import EvalReport, build_report
from posttrain_arena.evaluate.suite import Suite
from posttrain_arena.models.base import ChatModel
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.trial.executor import (
    ExecutorError,
    ThreadExecutor,
    TrialExecutor,
    TrialJob,
    infra_result,
)
from posttrain_arena.trial.journal import Journal
from posttrain_arena.trial.result import TrialResult
from posttrain_arena.trial.runner import TrialRunner

AgentFactory = Callable[[TaskPackage], Agent | AgentSpec]
"""Builds the agent (or the spec of the agent) for one task, so per-task limits apply."""

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


def model_agent_specs(model: str, settings: AgentSettings | None = None, *,
                      name: str | None = None, base_url: str | None = None,
                      device: str | None = None) -> AgentFactory:
    """A factory of model-agent specs (built where each trial runs; any executor)."""
    spec = AgentSpec(kind="model", model=model, name=name or f"model:{model}",
                     base_url=base_url, device=device, settings=settings or AgentSettings())
    return lambda task: spec


def evaluate(
    suite: Suite,
    agent_factory: AgentFactory,
    *,
    k: int = 1,
    jobs: int | None = None,
    runner: TrialRunner | None = None,
    executor: TrialExecutor | None = None,
    journal: Journal | None = None,
    progress: Progress | None = None,
    model: str | None = None,
    agent_timeout: float | None = None,
    first_seed: int = 0,
) -> EvalReport:
    """Run k trials (seeds first_seed..first_seed+k-1) of every task; return the report.

    The seed is the trial's identity and its sampling seed: a run that must measure
    afresh (another training seed's own baseline) gives another `first_seed`; two
    evaluations meant to be paired trial by trial give the same.

    Trials run on `executor`, or in this process on `runner` (one of the two is
    needed). At most `jobs` trials are in flight (default: the executor's slots). A
    trial that raises or is lost is recorded as an infrastructure error, never as
    reward 0.
    """
    if executor is None:
        if runner is None:
            raise ValueError("evaluate needs a runner or an executor")
        executor = ThreadExecutor(runner, slots=jobs or 1)
    ran: TrialExecutor = executor
    jobs = jobs or ran.slots
    if k < 1 or jobs < 1:
        raise ValueError(f"k and jobs must be at least 1 (got k={k}, jobs={jobs})")
    agents = {t.name: agent_factory(t) for t in suite.tasks}
    if first_seed < 0:
        raise ValueError(f"first_seed must be >= 0 (got {first_seed})")
    work = [TrialJob(task, agents[task.name], seed, agent_timeout)
            for seed in range(first_seed, first_seed + k) for task in suite.tasks]
    names = {job.agent_name for job in work}
    agent_name = names.pop() if len(names) == 1 else "mixed:" + ",".join(sorted(names))
    own_journal = journal if journal is not None and ran.journal is not journal else None
    results: list[TrialResult] = []
    start = time.monotonic()

    def one(job: TrialJob) -> TrialResult:
        if own_journal is not None:
            done = own_journal.done(job.trial_id)
            if done is not None:
                return done
        try:
            result = ran.run(job).result
        except ExecutorError:
            raise  # the executor cannot take such jobs at all: a usage error, not a trial
        except Exception as exc:  # the executor failed, not the model
            result = infra_result(job, ran.backend_name, f"{type(exc).__name__}: {exc}")
        if own_journal is not None:
            own_journal.append(result)
        return result

    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="eval") as pool:
        futures = [pool.submit(one, job) for job in work]
        for future in as_completed(futures):
            result = future.result()
            results.append(result)
            if progress is not None:
                progress(len(results), len(work), result)
    return build_report(
        [(t.name, t.checksum, t.domain.value) for t in suite.tasks], results,
        model=model or agent_name, agent=agent_name, suite=suite.source,
        suite_hash=suite.hash, k=k, backend=ran.backend_name,
        wall_sec=time.monotonic() - start,
    )
