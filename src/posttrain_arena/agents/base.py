"""The Agent protocol: who acts during a trial's agent phase.

An agent gets a `Shell` (a narrow view of the sandbox session: it cannot see the
verifier or the oracle), the task's prompt and a deadline, and returns an AgentRun.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from posttrain_arena.agents.transcript import Transcript


class ShellResult(Protocol):
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool


class Shell(Protocol):
    """What an agent may do to its environment."""

    workdir: str

    def exec(
        self, command: str, *, timeout: float | None = None, env: Mapping[str, str] | None = None
    ) -> ShellResult: ...

    def copy_in(self, src: Path, dest: str) -> None: ...

    def run_with(
        self, src: Path, dest: str, command: str, *, env: Mapping[str, str] | None = None
    ) -> ShellResult:
        """copy_in(src, dest), then exec(command): in one step where the session allows
        (one round trip instead of two), else as those two calls."""
        ...


@dataclass(frozen=True)
class AgentContext:
    """What the agent is told about its task."""

    task_name: str
    prompt: str
    deadline: float  # time.monotonic() value by which the agent must be done
    oracle_dir: Path | None = None  # only the oracle agent is handed this
    seed: int = 0
    scenes: list[str] = field(default_factory=list)


@dataclass
class AgentRun:
    """What the agent phase produced."""

    transcript: Transcript
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # infrastructure failure (model provider down, ...)


class Agent(Protocol):
    name: str

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun: ...
