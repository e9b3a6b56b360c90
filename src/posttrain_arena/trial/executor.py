"""The executor seam: where trials run, behind one small protocol.

Evaluation, the teacher stage and GRPO rollouts hand each trial to a `TrialExecutor`
as a `TrialJob` (task, agent, seed) and get a `TrialOutput` back (the TrialResult and
the agent's run, whose transcript the teacher and GRPO need). They never know whether
the trial ran in this process or on another machine:

* `ThreadExecutor` (here): the trial runs in the calling thread on this process's
  TrialRunner; callers keep `slots` threads busy, as the thread pool always did.
* `distributed.RayExecutor`: the trial is one Ray task on some node of a cluster.

`run` blocks and is thread-safe; callers fan out with threads of their own (which only
wait, for a remote executor). Whatever the executor, the *caller* records results in
its journal, on the driver, so resume works the same everywhere; `journal` names the
one case where the executor records itself (a runner built with its own journal), so
callers never record a trial twice.

Agents: a job carries an `AgentSpec` (it can travel) or a live `Agent` (only an
in-process executor can run it: the policy being trained lives in this process).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from posttrain_arena.agents.base import Agent, AgentContext, AgentRun, Shell
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.trial.journal import Journal
from posttrain_arena.trial.records import trial_id
from posttrain_arena.trial.result import Outcome, TrialResult
from posttrain_arena.trial.runner import TrialRunner


class ExecutorError(RuntimeError):
    """An executor cannot take this job or cannot start (the message says what to do)."""


@dataclass(frozen=True)
class TrialJob:
    """One trial to run: a task, an agent (spec or live), a seed, an agent time limit."""

    task: TaskPackage
    agent: AgentSpec | Agent
    seed: int = 0
    agent_timeout: float | None = None
    capture: bool = False
    """Return the agent's run (transcript) too: the teacher and GRPO learn from it."""

    @property
    def agent_name(self) -> str:
        """The agent's name as trial ids use it."""
        if isinstance(self.agent, AgentSpec):
            return self.agent.agent_name()
        return self.agent.name

    @property
    def trial_id(self) -> str:
        """task checksum + agent + seed, hashed: the identity resume keys on."""
        return trial_id(self.task.checksum, self.agent_name, self.seed)


@dataclass(frozen=True)
class TrialOutput:
    """What came back: the result, and the agent phase's run when the agent ran."""

    result: TrialResult
    run: AgentRun | None = None
    node: str | None = None  # where it ran, for executors that know (Ray node id)


class TrialExecutor(Protocol):
    """Runs one trial at a time per call; safe to call from many threads."""

    @property
    def name(self) -> str:
        """`thread` or `ray`: recorded with the results."""
        ...

    @property
    def slots(self) -> int:
        """How many trials are worth keeping in flight at once (caller's thread count)."""
        ...

    @property
    def backend_name(self) -> str:
        """The sandbox backend the trials run on."""
        ...

    @property
    def journal(self) -> Journal | None:
        """The journal this executor records to itself, if any (callers then do not)."""
        ...

    def run(self, job: TrialJob) -> TrialOutput:
        """Run the job; never raises for a failed trial (that is an outcome)."""
        ...

    def close(self) -> None:
        """Release what the executor holds (warm sessions, cluster connection)."""
        ...


class _Capture:
    """Wraps an agent to keep its AgentRun (the trial result holds only a summary)."""

    def __init__(self, inner: Agent) -> None:
        self.inner = inner
        self.name = inner.name
        self.run_: AgentRun | None = None

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        self.run_ = self.inner.run(shell, ctx)
        return self.run_


def run_job(runner: TrialRunner, job: TrialJob) -> TrialOutput:
    """Build the job's agent here and run the trial on `runner` (what every executor
    does where the trial runs). A failure outside the trial is an infrastructure error."""
    try:
        agent = job.agent.build(job.task) if isinstance(job.agent, AgentSpec) else job.agent
        # The trial hands oracle/ only to an OracleAgent it recognises by type, so that
        # one is never wrapped (nobody learns from the oracle's own run).
        capture = _Capture(agent) if job.capture and not isinstance(agent, OracleAgent) \
            else None
        result = runner.run(job.task, capture or agent, seed=job.seed,
                            agent_timeout=job.agent_timeout)
    except Exception as exc:  # the agent could not be built, or the runner broke
        return TrialOutput(infra_result(job, runner.backend_name,
                                        f"{type(exc).__name__}: {exc}"))
    return TrialOutput(result, capture.run_ if capture is not None else None)


def infra_result(job: TrialJob, backend: str, reason: str) -> TrialResult:
    """The result of a trial lost to infrastructure: never a reward, always a reason."""
    task = job.task
    return TrialResult(
        trial_id=job.trial_id, task_name=task.name, task_checksum=task.checksum,
        domain=task.domain.value, agent=job.agent_name, seed=job.seed, backend=backend,
        outcome=Outcome.INFRA_ERROR, reason=reason,
    )


class ThreadExecutor:
    """Trials in this process, on one TrialRunner, `slots` at a time."""

    name = "thread"

    def __init__(self, runner: TrialRunner, *, slots: int = 1, own_runner: bool = False) -> None:
        """`own_runner`: close the runner with the executor."""
        if slots < 1:
            raise ValueError(f"slots must be at least 1 (got {slots})")
        self.runner = runner
        self.slots = slots
        self._own = own_runner

    @property
    def backend_name(self) -> str:
        return self.runner.backend_name

    @property
    def journal(self) -> Journal | None:
        return self.runner.journal

    def run(self, job: TrialJob) -> TrialOutput:
        """Run the trial in the calling thread."""
        return run_job(self.runner, job)

    def close(self) -> None:
        """Close the runner when this executor owns it."""
        if self._own:
            self.runner.close()
