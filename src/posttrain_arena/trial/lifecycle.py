"""One trial's phases, from a built image to a TrialResult.

    agent session ──agent phase (deadline)──▶ halt / kill_all ──▶ verifier phase ──▶ result

Fresh isolation (the default) starts the verifier's session from the pristine image
while the agent works (it is cheap then: nobody waits for it), with verifier/ and the
harness runtime mounted read-only; after the agent phase only the state roots travel
into it, by one path on every backend (`fresh.py`). Shared isolation verifies in the
agent's own session after hardening it (see `shared.py`). Both run the verifier through
`verification.run`. Infrastructure failures raise; the runner turns them into
`infra_error`, never into a reward. What the agent breaks (its session's PID 1, its
workdir, its memory) is the agent's: a scored 0. `multistep.py` runs these phases once
per step.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from posttrain_arena.agents.base import AgentContext, AgentRun
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.agents.transcript import Message, Transcript
from posttrain_arena.sandbox.base import SandboxError, Session, TransferLimit
from posttrain_arena.task_format.package import VerifierKind
from posttrain_arena.trial import shared
from posttrain_arena.trial.fresh import FreshVerifier, fresh_command, verify_agent
from posttrain_arena.trial.plan import TrialPlan
from posttrain_arena.trial.pristine import TaskRefused, probe_reason, static_reason
from posttrain_arena.trial.result import Outcome, TestDetail
from posttrain_arena.trial.shell import SessionShell
from posttrain_arena.trial.state import (
    SavedState,
    StateTooLarge,
    clear_roots,
    fetch_state,
    put_state,
    state_roots,
)
from posttrain_arena.trial.verification import Reading
from posttrain_arena.trial.verifier import build_command

AGENT_GRACE_SEC = 5.0
"""How long past its deadline an agent's own code may take to return."""


@dataclass
class PhaseOutcome:
    """What the phases decided (the runner adds identity and writes the record)."""

    outcome: Outcome
    reward: float | None = None
    reason: str | None = None
    details: list[TestDetail] = field(default_factory=list)
    agent_info: dict[str, object] = field(default_factory=dict)
    verifier_exit_code: int | None = None


def execute(plan: TrialPlan) -> PhaseOutcome:
    """Run the agent and verifier phases; raise on infrastructure failure. A task whose
    image lets the agent's state stand in for the verifier's programs is refused
    (build_failed, with the fix) before the agent starts."""
    roots = state_roots(plan.workdir, list(plan.task.frontmatter.verifier.state_paths))
    try:
        return _execute(plan, roots)
    except TaskRefused as exc:
        return PhaseOutcome(Outcome.BUILD_FAILED, reason=str(exc))


def check_trust(plan: TrialPlan, roots: list[str], pristine: Session) -> None:
    """TaskRefused when the pristine session's programs resolve inside a state root."""
    known, reason = plan.trust.get(plan.image, roots)
    if not known:
        reason = static_reason(plan.image, roots) if plan.fresh else None
        if reason is None:
            command = fresh_command(plan) if plan.fresh else build_command(
                plan.task.verifier_kind, verifier_dir="/", harness_dir="/",
                workdir=plan.workdir, base_env=None)
            reason = probe_reason(
                pristine, plan.image, roots, env=command.env, cwd=command.workdir,
                shell_verifier=plan.task.verifier_kind is VerifierKind.TEST_SH)
        plan.trust.put(plan.image, roots, reason)
    if reason is not None:
        raise TaskRefused(reason)


def _execute(plan: TrialPlan, roots: list[str]) -> PhaseOutcome:
    sessions: list[Session] = []
    pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="trial")
    verifier = FreshVerifier(plan, roots, pool) if plan.fresh else None
    try:
        t0 = time.monotonic()
        limits = plan.limits(network=plan.network)
        if plan.pool is not None:
            agent_session = plan.pool.take(plan.image, limits, plan.labels("agent"))
        else:
            agent_session = plan.backend.start(plan.image, limits=limits,
                                               labels=plan.labels("agent"))
        sessions.append(agent_session)
        plan.timings["agent_start"] = time.monotonic() - t0
        known, reason = plan.trust.get(plan.image, roots)
        if not known or reason is not None:  # once per image: before the agent starts
            pristine = verifier.session() if verifier is not None else agent_session
            check_trust(plan, roots, pristine)
        if verifier is not None:
            # after the probe, before the agent: the verifier's exec waits for the state
            # (its sandbox, shell and supervisor started while the agent works)
            verifier.arm()
        ended = agent_phase(plan, agent_session)
        if ended is not None:
            return ended
        t0 = time.monotonic()
        if verifier is not None:
            # the agent's session is let go while the verifier runs (the finally waits)
            reading = verify_agent(plan, agent_session, verifier, plan.scratch,
                                   release=lambda: pool.submit(agent_session.stop))
        else:
            if plan.keep_state is not None:
                _keep_shared(plan, agent_session, roots)
            reading = _verify_shared(plan, agent_session, roots)
        plan.timings["verify"] = time.monotonic() - t0
        outcome = Outcome.SCORED if reading.reward is not None else Outcome.VERIFIER_ERROR
        return PhaseOutcome(outcome, reading.reward, reading.reason, reading.details,
                            agent_info=plan.agent_info, verifier_exit_code=reading.exit_code)
    finally:
        if verifier is not None:  # unless fed, its exec is withdrawn: the trial ended
            sessions += verifier.close()
        _stop_all(pool, sessions)


def agent_phase(plan: TrialPlan, session: Session) -> PhaseOutcome | None:
    """Run the agent until it returns or its deadline; end every agent process.
    Returns a final outcome when the trial ends here, else None (go verify)."""
    task, agent = plan.task, plan.agent
    assert agent is not None, "a trial without an agent has no agent phase"
    t0 = time.monotonic()
    deadline = t0 + plan.agent_timeout
    shell = SessionShell(session, plan.workdir, deadline,
                         env={"BENCHFLOW_WORKSPACE": plan.workdir})
    ctx = AgentContext(
        task_name=task.name, prompt=task.prompt, deadline=deadline, seed=plan.seed,
        oracle_dir=task.oracle_dir if isinstance(agent, OracleAgent) else None,
        scenes=[s.text for s in task.body.scenes],
    )
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["run"] = agent.run(shell, ctx)
        except BaseException as exc:  # reported below; an agent bug is not a reward
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"agent-{plan.trial_id[:8]}", daemon=True)
    thread.start()
    thread.join(plan.agent_timeout + AGENT_GRACE_SEC)
    shell.close()
    _end_agent_processes(plan, session)
    plan.timings["agent"] = time.monotonic() - t0
    run = box.get("run")
    transcript = run.transcript if isinstance(run, AgentRun) else Transcript(
        messages=[Message(role="user", content=task.prompt)])
    plan.record.write_transcript(transcript)
    info = dict(run.info) if isinstance(run, AgentRun) else {}
    info["commands"] = info.get("commands", shell.commands)
    if shell.broken is not None:
        info["sandbox_broken"] = shell.broken
    plan.agent_info = info
    if shell.broken is not None:
        _raise_unless_healthy(plan, shell.broken)
    timed_out = thread.is_alive() or shell.deadline_hit or time.monotonic() > deadline + 1.0
    if timed_out:
        return PhaseOutcome(Outcome.AGENT_TIMEOUT, reason=(
            f"the agent phase ran past its {plan.agent_timeout:g} s deadline; "
            "timeouts are not verified and carry no reward"), agent_info=info)
    if "error" in box:
        exc = box["error"]
        return PhaseOutcome(Outcome.INFRA_ERROR, reason=(
            f"the agent raised {type(exc).__name__}: {exc}"), agent_info=info)
    if isinstance(run, AgentRun) and run.error:
        return PhaseOutcome(Outcome.INFRA_ERROR, reason=f"agent failure: {run.error}",
                            agent_info=info)
    return None


def _raise_unless_healthy(plan: TrialPlan, what: str) -> None:
    """A session stopped running commands: the agent's doing when the backend itself
    still works (then the trial goes on and is scored), else the host's (SandboxError:
    infra_error)."""
    works, why = plan.backend.available()
    if not works:
        raise SandboxError(f"the sandbox backend stopped working ({why}); {what}")


def _end_agent_processes(plan: TrialPlan, session: Session) -> None:
    """End every process the agent started. With fresh verification the agent's session
    only has its state read from now on, so it is halted (every process ended for
    good, its files kept); for shared verification, which goes on in this session,
    kill_all. A multi-step trial's session outlives each step but the last (kill_all)."""
    if plan.fresh and not plan.keep_agent_session:
        session.halt()
    else:
        session.kill_all()


def _keep_shared(plan: TrialPlan, session: Session, roots: list[str]) -> None:
    """Keep the agent's state roots before shared verification changes the session
    (kept as fresh verification would fetch them; nothing kept when too large)."""
    storage_kb = plan.task.frontmatter.environment.storage_mb * 1024
    scratch = plan.scratch / "kept"
    scratch.mkdir()
    try:
        report = fetch_state(session, roots, scratch, max_kbytes=storage_kb)
    except (StateTooLarge, TransferLimit):
        return
    assert plan.keep_state is not None
    SavedState.keep(report, session.changed_paths(), plan.keep_state)


def verify_saved(plan: TrialPlan, saved: SavedState) -> PhaseOutcome:
    """Verify a kept final state with no agent phase: the state roots restored into a
    session from the pristine image, then the task's verifier as a trial's would run it
    (fresh: the verifier's own session; shared: a pristine agent session, hardened).
    Raises on infrastructure failure, as `execute`."""
    roots = state_roots(plan.workdir, list(plan.task.frontmatter.verifier.state_paths))
    sessions: list[Session] = []
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="replay")
    verifier: FreshVerifier | None = None
    try:
        t0 = time.monotonic()
        if plan.fresh:
            verifier = FreshVerifier(plan, roots, pool)
            session = verifier.session()
        else:
            if plan.pool is not None:
                session = plan.pool.take(plan.image, plan.limits(network=False),
                                         plan.labels("verifier"))
            else:
                session = plan.backend.start(plan.image, limits=plan.limits(network=False),
                                             labels=plan.labels("verifier"))
            sessions.append(session)
        check_trust(plan, roots, session)
        if verifier is not None:  # the same path as a trial's, its exec started now
            reading = verifier.verify(saved.report())
        else:
            clear_roots(session, roots)
            put_state(session, saved.report())
            plan.timings["state_copy"] = time.monotonic() - t0
            # no agent ran here: a session that cannot verify is the sandbox's failure
            reading = shared.verify_shared(plan, session, roots)
        plan.timings["verify"] = time.monotonic() - t0
    except TaskRefused as exc:
        return PhaseOutcome(Outcome.BUILD_FAILED, reason=str(exc))
    finally:
        if verifier is not None:
            sessions += verifier.close()
        if plan.pool is not None:  # only the harness and the verifier ran in them
            for s in sessions:
                plan.pool.discard(s)
            sessions = []
        _stop_all(pool, sessions)
    outcome = Outcome.SCORED if reading.reward is not None else Outcome.VERIFIER_ERROR
    return PhaseOutcome(outcome, reading.reward, reading.reason, reading.details,
                        verifier_exit_code=reading.exit_code)


def _verify_shared(plan: TrialPlan, session: Session, roots: list[str]) -> Reading:
    """Shared-mode verification; a session the agent wrecked is the agent's 0."""
    try:
        return shared.verify_shared(plan, session, roots)
    except SandboxError as exc:
        _raise_unless_healthy(plan, str(exc))
        return Reading(0.0, f"the agent left its session unable to run the verifier: {exc}")


def _stop_all(pool: ThreadPoolExecutor, sessions: list[Session]) -> None:
    """Stop every session at once (stopping never waits on a grace period), and wait
    for every stop submitted earlier too: when a trial returns, its sessions are gone."""
    futures: list[Future[None]] = [pool.submit(s.stop) for s in sessions]
    pool.shutdown(wait=True)
    for fut in futures:
        with contextlib.suppress(Exception):  # an orphan is the reaper's job
            fut.result(timeout=0)
