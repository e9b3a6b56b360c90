"""Multi-step trials (issue 14): one agent session across the steps, each step verified.

    agent session ─step 1 agent phase─▶ kill_all ─▶ fresh verifier (step 1) ─▶ reward 1
                  ─step 2 agent phase─▶ kill_all ─▶ fresh verifier (step 2) ─▶ reward 2 ...

The agent keeps its session (its files, its installed tools) from one step to the next;
after each step every agent process is ended, the state roots are copied into a fresh
session from the pristine image, and the step's verifier folder (the task's, with the
step's files layered over it) scores them there, exactly as a one-step trial's
verifier would. The phases are a one-step trial's own (`lifecycle.agent_phase`; the
step's `fresh.FreshVerifier` started while its agent works, `fresh.verify_agent`), so
isolation, limits, deadlines and reward reading are the same code.
A step that times out ends the trial (`agent_timeout`); a step without a reward makes
it a verifier error naming the step. The reward is the steps' mean, or the last one's.
The trial's transcript holds every step's messages, in order.

With `keep_state` the state after the last step is kept (as a one-step trial keeps its
final state), with every path the agent changed over all the steps; `verify_saved`
verifies such a state (perturbed, for the gates' probes) as the last step's verifier
would: the last step's verifier folder, on the pristine image.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from posttrain_arena.agents.transcript import Transcript
from posttrain_arena.sandbox.base import Session
from posttrain_arena.task_format.body import Section, TaskBody
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.task_format.steps import Step, aggregate
from posttrain_arena.task_format.task import Isolation
from posttrain_arena.trial import lifecycle, verification
from posttrain_arena.trial.fresh import FreshVerifier, verify_agent
from posttrain_arena.trial.pristine import TaskRefused
from posttrain_arena.trial.result import Outcome, TestDetail
from posttrain_arena.trial.state import SavedState, state_roots

NO_SOLUTION = "#!/bin/bash\n# this step has no reference solution: nothing to do\n"


def execute(plan: lifecycle.TrialPlan) -> lifecycle.PhaseOutcome:
    """Run every step of `plan.task`; raise on infrastructure failure (as lifecycle)."""
    task = plan.task
    roots = state_roots(plan.workdir, list(task.frontmatter.verifier.state_paths))
    t0 = time.monotonic()
    session = plan.backend.start(plan.image, limits=plan.limits(network=plan.network),
                                 labels=plan.labels("agent"))
    plan.timings["agent_start"] = time.monotonic() - t0
    try:  # the same refusal as a one-step trial: the session is pristine until step 1
        lifecycle.check_trust(plan, roots, session)
    except TaskRefused as exc:
        with contextlib.suppress(Exception):
            session.stop()
        return lifecycle.PhaseOutcome(Outcome.BUILD_FAILED, reason=str(exc))
    rewards: list[float] = []
    details: list[TestDetail] = []
    combined = Transcript()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="steps")
    try:
        for i, step in enumerate(task.steps):
            last = i == len(task.steps) - 1
            step_plan = dataclasses.replace(
                plan, task=_step_task(task, step, plan.scratch / f"step-{i}"), pool=None,
                agent_timeout=step.agent_timeout_sec or plan.agent_timeout,
                keep_agent_session=not last, timings={},
                keep_state=plan.keep_state if last else None)
            verifier = FreshVerifier(step_plan, roots, pool)
            try:
                verifier.arm()  # probed before step 1; waits for the state meanwhile
                ended = lifecycle.agent_phase(step_plan, session)
                plan.agent_info = step_plan.agent_info
                _keep_transcript(plan, combined)
                if ended is not None:
                    reason = f"step {step.name!r}: {ended.reason}"
                    return dataclasses.replace(ended, reason=reason, details=details)
                reading = _verify_step(step_plan, session, verifier, i)
            finally:
                for vsession in verifier.close():  # unless fed, its exec is withdrawn
                    with contextlib.suppress(Exception):  # an orphan is the reaper's job
                        vsession.stop()
            if reading.reward is None:
                return lifecycle.PhaseOutcome(
                    Outcome.VERIFIER_ERROR, reason=f"step {step.name!r}: {reading.reason}",
                    details=details + reading.details, agent_info=plan.agent_info,
                    verifier_exit_code=reading.exit_code)
            rewards.append(reading.reward)
            details.append(TestDetail(name=f"step:{step.name}", status="scored",
                                      message=f"reward {reading.reward:g}"))
            details += [d.model_copy(update={"name": f"{step.name}/{d.name}"})
                        for d in reading.details]
        plan.timings["total_steps"] = time.monotonic() - t0
        return lifecycle.PhaseOutcome(Outcome.SCORED, aggregate(rewards, task.step_strategy),
                                      details=details, agent_info=plan.agent_info)
    finally:
        if combined.messages:
            plan.record.write_transcript(combined)
        with contextlib.suppress(Exception):  # an orphan is the reaper's job
            session.stop()
        pool.shutdown(wait=True)


def _keep_transcript(plan: lifecycle.TrialPlan, combined: Transcript) -> None:
    """Add the step's transcript (each agent phase writes its own) to the trial's."""
    path = plan.record.dir / "transcript.json"
    with contextlib.suppress(OSError, ValueError):
        step = Transcript.model_validate_json(path.read_text(encoding="utf-8"))
        combined.messages += step.messages
        combined.turns += step.turns


def _verify_step(plan: lifecycle.TrialPlan, session: Session, verifier: FreshVerifier,
                 index: int) -> verification.Reading:
    """The step's verifier in its fresh session, on a copy of the agent's state."""
    logs = plan.record.verifier_dir
    for stale in logs.iterdir() if logs.is_dir() else []:  # the last step's reward
        if stale.is_file() or stale.is_symlink():
            stale.unlink()
    scratch = plan.scratch / f"state-{index}"
    scratch.mkdir(parents=True, exist_ok=True)
    return verify_agent(plan, session, verifier, scratch)


def verify_saved(plan: lifecycle.TrialPlan, saved: SavedState) -> lifecycle.PhaseOutcome:
    """Verify a kept final state of a multi-step task as its last step's verifier judged
    the state it was kept from: that step's verifier folder, in a fresh session (every
    step is verified fresh, whatever the task's isolation); as `lifecycle.verify_saved`."""
    last = _step_task(plan.task, plan.task.steps[-1], plan.scratch / "last-step")
    fm = last.frontmatter
    fresh = fm.model_copy(update={"verifier": fm.verifier.model_copy(
        update={"isolation": Isolation.FRESH})})
    return lifecycle.verify_saved(
        dataclasses.replace(plan, task=last.model_copy(update={"frontmatter": fresh})), saved)


def _step_task(task: TaskPackage, step: Step, scratch: Path) -> TaskPackage:
    """The task as one step sees it: its prompt, its layered verifier folder, its oracle."""
    scratch.mkdir(parents=True, exist_ok=True)
    verifier = scratch / "verifier"
    base = task.root / ("tests" if task.layout.value == "harbor" else "verifier")
    if base.is_dir():
        shutil.copytree(base, verifier, symlinks=True)
    if step.verifier_dir is not None:
        shutil.copytree(step.verifier_dir, verifier, symlinks=True, dirs_exist_ok=True)
    verifier.mkdir(exist_ok=True)
    oracle = step.oracle_dir
    if oracle is None:
        oracle = scratch / "oracle"
        oracle.mkdir()
        (oracle / "solve.sh").write_text(NO_SOLUTION)
    fm = task.frontmatter
    if step.verifier_timeout_sec is not None:
        fm = fm.model_copy(update={"verifier": fm.verifier.model_copy(
            update={"timeout_sec": step.verifier_timeout_sec})})
    body = TaskBody(sections=[Section(kind="prompt", name="prompt", text=step.prompt,
                                      line=1)], text=step.prompt)
    return task.model_copy(update={"frontmatter": fm, "body": body, "steps": [],
                                   "verifier_path": verifier, "oracle_path": oracle})
