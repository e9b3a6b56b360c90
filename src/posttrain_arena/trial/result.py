"""TrialResult: what one attempt at one task produced. Written to result.json."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Outcome(StrEnum):
    """How a trial ended. Only SCORED carries a reward that training may use."""

    SCORED = "scored"
    VERIFIER_ERROR = "verifier_error"
    AGENT_TIMEOUT = "agent_timeout"
    BUILD_FAILED = "build_failed"
    INFRA_ERROR = "infra_error"

    @property
    def is_infrastructure(self) -> bool:
        """Not the model's doing: excluded from pass rates and retried on resume."""
        return self in (Outcome.BUILD_FAILED, Outcome.INFRA_ERROR)


class TestDetail(BaseModel):
    """One verifier check (a pytest test, from CTRF details)."""

    model_config = ConfigDict(frozen=True)

    name: str
    status: str = Field(description="passed, failed, skipped, error")
    message: str | None = None


class TrialResult(BaseModel):
    """The record of one trial."""

    model_config = ConfigDict(frozen=True)

    trial_id: str = Field(description="task checksum + agent + seed, hashed")
    task_name: str
    task_checksum: str
    domain: str
    agent: str = Field(description="agent spec, e.g. 'oracle', 'empty', 'model:hf:PATH'")
    seed: int = 0
    backend: str
    outcome: Outcome
    reward: float | None = Field(
        default=None, description="verifier reward in [0, 1]; set only when scored"
    )
    reason: str | None = Field(default=None, description="why, for every outcome but scored")
    details: list[TestDetail] = Field(default_factory=list)
    timings: dict[str, float] = Field(default_factory=dict, description="seconds per phase")
    image_id: str | None = None
    agent_info: dict[str, Any] = Field(
        default_factory=dict, description="agent's own summary (turns, tokens, exit)"
    )
    record_dir: str | None = Field(default=None, description="where the trial's files are")
    isolation: str | None = Field(
        default=None, description="verification mode used: 'fresh' or 'shared'"
    )
    network: bool = Field(default=False, description="whether the agent phase had network")
    started_at: str | None = Field(default=None, description="UTC start time, ISO 8601")
    verifier_exit_code: int | None = Field(
        default=None, description="exit status of the verifier's entry point, when it ran"
    )

    @property
    def passed(self) -> bool:
        """Counts as a pass: scored with full reward."""
        return self.outcome is Outcome.SCORED and (self.reward or 0.0) >= 1.0

    @property
    def score(self) -> float:
        """Reward for rates: the reward when scored, 0 for timeouts and verifier errors."""
        return self.reward if self.outcome is Outcome.SCORED and self.reward is not None else 0.0
