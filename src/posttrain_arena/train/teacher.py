"""Teacher rollouts: verified trajectories in the model agent's exact message format.

* `oracle` teacher: for each training task, an agent runs the task's `oracle/solve.sh`
  *text* as one `bash` tool call, in a real trial, and writes the conversation the model
  agent would have had: system + user (`initial_messages`), an assistant `bash` call
  with the oracle's commands, the tool result (the real output, formatted as the agent
  formats it), and an assistant `submit`. The trial's verifier then scores it.
* `endpoint` teacher: the model agent itself, driven by an OpenAI-compatible model,
  with several attempts per task.

Only trajectories whose trial scored at least the acceptance threshold (1.0 by default)
are kept. Results are appended per task, so an interrupted stage resumes where it was.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain_arena.agents.base import Agent, AgentRun
from posttrain_arena.agents.model import TOOLS
from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.agents.teacher import OracleTeacherAgent, oracle_command
from posttrain_arena.agents.transcript import Transcript
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.train.recipe import TeacherSection
from posttrain_arena.trial.executor import TrialJob, TrialOutput
from posttrain_arena.trial.result import Outcome, TrialResult

__all__ = ["OracleTeacherAgent", "TeacherAttempt", "oracle_command", "run_teacher",
           "trajectory_messages"]


class TeacherAttempt(BaseModel):
    """One teacher attempt at one task (a line of attempts.jsonl)."""

    task: str = Field(description="Task name")
    attempt: int = Field(description="0-based attempt number")
    outcome: str = Field(description="Trial outcome")
    reward: float | None = Field(default=None, description="Verifier reward, when scored")
    accepted: bool = Field(description="Kept for SFT")
    reason: str | None = Field(default=None, description="Why not accepted")
    messages: list[dict[str, Any]] = Field(default_factory=list, description="The trajectory")


JobFn = Callable[[TrialJob], TrialOutput]
"""Runs one trial job (an executor's `run`, with the caller's journal around it)."""


def trajectory_messages(transcript: Transcript) -> list[dict[str, Any]]:
    """The conversation, ending at the last assistant message."""
    msgs = [m.model_dump(exclude_none=True) for m in transcript.messages]
    while msgs and msgs[-1]["role"] != "assistant":
        msgs.pop()
    return msgs


def run_teacher(
    tasks: Sequence[TaskPackage],
    cfg: TeacherSection,
    *,
    run_job: JobFn,
    make_agent: Callable[[TaskPackage], Agent | AgentSpec],
    work_dir: Path,
    concurrency: int,
    seed: int,
    on_step: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Teacher rollouts for every task; writes trajectories.jsonl and coverage.json.

    Attempts at one task run one after another (the next is needed only while too few
    were accepted); `concurrency` tasks are in flight at once, each trial on whatever
    executor `run_job` hands it to. attempts.jsonl is written here, on the driver."""
    log = work_dir / "attempts.jsonl"
    done: dict[str, list[TeacherAttempt]] = {}
    if log.is_file():
        for line in log.read_text().splitlines():
            try:
                a = TeacherAttempt.model_validate_json(line)
            except ValueError:
                continue  # a torn last line from a crash
            done.setdefault(a.task, []).append(a)
    lock = threading.Lock()
    finished = [0]

    def one(task: TaskPackage) -> list[TeacherAttempt]:
        attempts = list(done.get(task.name, []))
        accepted = sum(a.accepted for a in attempts)
        n = len(attempts)
        while n < cfg.attempts and accepted < cfg.max_per_task:
            out = run_job(TrialJob(task, make_agent(task), seed * 1000 + n, capture=True))
            result, run = out.result, out.run
            attempt = _judge(task.name, n, result, run, cfg.accept_threshold)
            with lock, log.open("a") as fh:
                fh.write(attempt.model_dump_json() + "\n")
            attempts.append(attempt)
            accepted += attempt.accepted
            n += 1
            if result.outcome.is_infrastructure and n >= cfg.attempts:
                break
        with lock:
            finished[0] += 1
            if on_step is not None:
                on_step(finished[0], len(tasks))
        return attempts

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        all_attempts = list(pool.map(one, tasks))

    kept = 0
    per_task: dict[str, dict[str, Any]] = {}
    with (work_dir / "trajectories.jsonl").open("w") as fh:
        for task, attempts in zip(tasks, all_attempts, strict=True):
            good = [a for a in attempts if a.accepted][: cfg.max_per_task]
            for a in good:
                fh.write(json.dumps({"task": task.name, "domain": str(task.domain),
                                     "reward": a.reward, "messages": a.messages,
                                     "tools": TOOLS}) + "\n")
            kept += len(good)
            last = attempts[-1] if attempts else None
            per_task[task.name] = {
                "accepted": len(good), "attempts": len(attempts),
                "reason": None if good else (last.reason if last else "no attempt"),
            }
    covered = sum(1 for v in per_task.values() if v["accepted"])
    coverage = {
        "kind": cfg.kind, "tasks": len(tasks), "covered": covered,
        "coverage": covered / len(tasks) if tasks else 0.0, "trajectories": kept,
        "uncovered": {k: v["reason"] for k, v in per_task.items() if not v["accepted"]},
    }
    (work_dir / "coverage.json").write_text(json.dumps(coverage, indent=2))
    return coverage


def _judge(task: str, n: int, result: TrialResult, run: AgentRun | None,
           threshold: float) -> TeacherAttempt:
    reward = result.reward if result.outcome is Outcome.SCORED else None
    reason = None
    if run is None or run.error:
        reason = f"agent failed: {run.error if run else 'no transcript'}"
    elif result.outcome is not Outcome.SCORED:
        reason = f"{result.outcome.value}: {result.reason or ''}".strip()
    elif (reward or 0.0) < threshold:
        reason = f"reward {reward} below the acceptance threshold {threshold}"
    messages = trajectory_messages(run.transcript) if run is not None and reason is None else []
    return TeacherAttempt(task=task, attempt=n, outcome=result.outcome.value, reward=reward,
                          accepted=reason is None, reason=reason, messages=messages)
