"""TrialPlan: everything one trial needs, resolved (what the phases and the verifier's
isolation modes share)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from posttrain_arena.agents.base import Agent
from posttrain_arena.sandbox.base import Backend, ImageRef, Limits
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.trial.pool import SessionPool
from posttrain_arena.trial.pristine import TrustCache
from posttrain_arena.trial.records import TrialRecord

HARNESS_CWD = "/"
"""Where the harness's own commands run: a directory no agent can remove."""


@dataclass
class TrialPlan:
    """Everything one trial needs, resolved."""

    task: TaskPackage
    agent: Agent | None
    """None for a trial without an agent phase (a kept state verified again)."""
    backend: Backend
    image: ImageRef
    trial_id: str
    seed: int
    agent_timeout: float
    network: bool
    record: TrialRecord
    scratch: Path
    timings: dict[str, float]
    agent_info: dict[str, object] = field(default_factory=dict)
    pool: SessionPool | None = None
    trust: TrustCache = field(default_factory=TrustCache)
    keep_state: Path | None = None
    """Where to keep the agent's final state (a SavedState) once its phase ended well."""
    keep_agent_session: bool = False
    """A multi-step trial's agent session outlives each step but the last: its agent
    processes are ended with kill_all, the session is not halted."""

    @property
    def fresh(self) -> bool:
        """Whether the verifier runs in a fresh session (else in the agent's)."""
        return self.task.frontmatter.verifier.isolation.value == "fresh"

    @property
    def workdir(self) -> str:
        """The agent's workspace in the session."""
        return self.task.frontmatter.environment.workdir

    @property
    def verifier_timeout(self) -> float:
        """The verifier's time limit, seconds."""
        return float(self.task.frontmatter.verifier.timeout_sec)

    def limits(self, *, network: bool) -> Limits:
        """The task's resource limits, with or without network."""
        env = self.task.frontmatter.environment
        return Limits(cpus=env.cpus, memory_mb=env.memory_mb, storage_mb=env.storage_mb,
                      pids_limit=env.pids_limit, allow_internet=network)

    def labels(self, role: str) -> dict[str, str]:
        """Labels of a session started for `role` (agent or verifier)."""
        return {"posttrain-arena.trial": self.trial_id, "posttrain-arena.role": role,
                "posttrain-arena.task": self.task.name[:60]}
