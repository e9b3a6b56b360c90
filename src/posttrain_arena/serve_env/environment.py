"""One task package as an OpenEnv environment: an episode is a real trial.

`reset` starts a trial of the task with the TrialRunner (the task's image, limits, its
own sandbox session) whose agent is the remote client: every `step` with a bash
`command` runs in that session through the agent's shell, and a step with
`submit: true` ends the agent phase. The trial then goes on exactly as any other: every
agent process is ended, the verifier runs in a fresh session from the pristine image,
and its reward (with outcome, reason and per-test details) is the final observation's.
Nothing the client sends reaches the verifier or the oracle; a session that ends
without a submit (closed, reset again, the agent's deadline) gives no reward, or the
deadline's `agent_timeout`.

Each instance holds at most one trial, so each OpenEnv session (a WebSocket) has its
own sandbox; the stateless HTTP `/reset` and `/step` get a fresh instance per request,
as openenv-core defines them (a reset over HTTP starts and abandons a trial).
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell, ShellResult
from posttrain_arena.agents.transcript import Message, Transcript
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.trial.result import Outcome, TrialResult
from posttrain_arena.trial.runner import TrialRunner

START_TIMEOUT_SEC = 900.0
"""How long a reset waits for the image to build and the session to start."""
MAX_OUTPUT = 64_000


class BashAction(Action):
    """One bash command in the task's workspace, or the end of the attempt."""

    command: str = Field(default="", description="A bash command to run in the workspace")
    submit: bool = Field(default=False, description="End the attempt: verify and score it")
    timeout_s: float | None = Field(default=None, gt=0, description="Limit for the command")


class BashObservation(Observation):
    """What the client sees: the prompt after reset, a command's output after a step,
    the verifier's verdict (reward, outcome, reason, details) when done."""

    prompt: str | None = Field(default=None, description="The task's instruction (on reset)")
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    outcome: str | None = Field(default=None, description="The trial's outcome, when done")
    reason: str | None = Field(default=None, description="Why, for every outcome but scored")
    details: list[dict[str, Any]] = Field(default_factory=list, description="Verifier tests")


class TaskState(State):
    """The session's episode."""

    task: str = ""
    running: bool = False
    outcome: str | None = None
    reward: float | None = None


class _RemoteAgent:
    """The trial's agent: runs the commands the client sends until it submits."""

    name = "openenv"

    def __init__(self) -> None:
        self.commands: queue.Queue[BashAction | None] = queue.Queue()
        self.replies: queue.Queue[tuple[str, Any]] = queue.Queue()

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        transcript = Transcript(messages=[Message(role="user", content=ctx.prompt)])
        self.replies.put(("ready", ctx))
        n = 0
        while True:
            left = ctx.deadline - time.monotonic()
            try:
                action = self.commands.get(timeout=max(0.1, left))
            except queue.Empty:
                return AgentRun(transcript=transcript, info={"commands": n})  # deadline
            if action is None:  # closed without a submit: nothing to verify
                return AgentRun(transcript=transcript, error="the session ended without "
                                "a submit")
            if action.submit:
                return AgentRun(transcript=transcript, info={"commands": n})
            call = {"id": f"call-{n}", "type": "function",
                    "function": {"name": "bash", "arguments": action.model_dump_json(
                        include={"command"})}}
            result: ShellResult = shell.exec(action.command, timeout=action.timeout_s)
            transcript.messages += [
                Message(role="assistant", content="", tool_calls=[call]),
                Message(role="tool", tool_call_id=f"call-{n}",
                        content=(result.stdout + result.stderr)[-MAX_OUTPUT:])]
            n += 1
            self.replies.put(("result", result))


class ArenaEnvironment(Environment[BashAction, BashObservation, TaskState]):
    """A task package served as an OpenEnv environment (one trial per episode)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, task: TaskPackage, runner: TrialRunner) -> None:
        super().__init__()
        self.task = task
        self.runner = runner
        self._agent: _RemoteAgent | None = None
        self._thread: threading.Thread | None = None
        self._result: TrialResult | None = None
        self._state = TaskState(task=task.name)

    @property
    def state(self) -> TaskState:
        return self._state

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **kwargs: Any) -> BashObservation:
        """Abandon any running trial and start a new one; return the prompt."""
        self._abandon()
        agent = _RemoteAgent()
        self._agent, self._result = agent, None
        self._state = TaskState(task=self.task.name, episode_id=episode_id or uuid.uuid4().hex,
                                running=True)

        def trial() -> None:
            try:
                self._result = self.runner.run(self.task, agent, seed=seed or 0)
            finally:
                agent.replies.put(("done", None))

        self._thread = threading.Thread(target=trial, name=f"openenv-{self.task.name[:20]}",
                                        daemon=True)
        self._thread.start()
        kind, value = self._reply(START_TIMEOUT_SEC)
        if kind == "ready":
            return BashObservation(prompt=value.prompt)
        return self._finished()

    def step(self, action: BashAction, timeout_s: float | None = None,
             **kwargs: Any) -> BashObservation:
        """Run the command, or verify on submit."""
        if self._agent is None or not self._state.running:
            return BashObservation(done=True, outcome=self._state.outcome,
                                   reward=self._state.reward,
                                   reason="no running episode: reset first (over HTTP each "
                                   "request gets a new environment; use a WebSocket session)")
        self._state.step_count += 1
        self._agent.commands.put(action)
        limit = self.task.frontmatter.agent.timeout_sec + self.task.frontmatter.verifier \
            .timeout_sec + START_TIMEOUT_SEC
        kind, value = self._reply(limit)
        if kind == "result":
            return BashObservation(stdout=value.stdout[-MAX_OUTPUT:],
                                   stderr=value.stderr[-MAX_OUTPUT:], exit_code=value.exit_code,
                                   timed_out=value.timed_out)
        return self._finished()

    def close(self) -> None:
        """End the session's trial (unverified) and wait for its sandbox to stop."""
        self._abandon()

    def _reply(self, timeout: float) -> tuple[str, Any]:
        assert self._agent is not None
        try:
            return self._agent.replies.get(timeout=timeout)
        except queue.Empty:
            return "done", None

    def _finished(self) -> BashObservation:
        """The trial is over: wait for its result and report it."""
        if self._thread is not None:
            self._thread.join()
        result = self._result
        self._state.running = False
        if result is None:
            self._state.outcome = Outcome.INFRA_ERROR.value
            return BashObservation(done=True, outcome=Outcome.INFRA_ERROR.value,
                                   reason="the trial did not finish")
        # A scored trial's reward is the verifier's; timeouts and verifier errors score 0
        # (as in every pass rate here); infrastructure failures carry none.
        reward = None if result.outcome.is_infrastructure else result.score
        self._state.outcome, self._state.reward = result.outcome.value, reward
        return BashObservation(done=True, reward=reward, outcome=result.outcome.value,
                               reason=result.reason,
                               details=[d.model_dump() for d in result.details])

    def _abandon(self) -> None:
        if self._agent is not None and self._thread is not None and self._thread.is_alive():
            self._agent.commands.put(None)
            self._thread.join()
        self._state.running = False
