"""One trial's phases, from a built image to a TrialResult.

    agent session ──agent phase (deadline)──▶ halt / kill_all ──▶ verifier phase ──▶ result

Fresh isolation (the default) starts the verifier's session from the pristine image
while the agent works (it is cheap then: nobody waits for it), with verifier/ and the
harness runtime mounted read-only; after the agent phase only the state roots travel
into it. Shared isolation verifies in the agent's own session after hardening it (see
`shared.py`). Both run the verifier through `verification.run`. Infrastructure failures
raise; the runner turns them into `infra_error`, never into a reward. What the agent
breaks (its session's PID 1, its workdir, its memory) is the agent's: a scored 0.
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
from posttrain_arena.sandbox.base import Mount, SandboxError, Session, TransferLimit
from posttrain_arena.task_format.package import VerifierKind
from posttrain_arena.trial import onecall, shared, verification
from posttrain_arena.trial.harness import HARNESS_DIR, harness_bundle
from posttrain_arena.trial.plan import TrialPlan
from posttrain_arena.trial.pristine import TaskRefused, probe_reason, static_reason
from posttrain_arena.trial.result import Outcome, TestDetail
from posttrain_arena.trial.shell import SessionShell
from posttrain_arena.trial.state import (
    SavedState,
    StateReport,
    StateTooLarge,
    clear_roots,
    fetch_state,
    put_state,
    state_archive,
    state_roots,
)
from posttrain_arena.trial.verification import Reading
from posttrain_arena.trial.verifier import (
    LOGS_DIR,
    VerifierCommand,
    build_command,
    script_shell,
)

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


def _check_trust(plan: TrialPlan, roots: list[str], pristine: Session) -> None:
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
    verifier_future = pool.submit(_start_verifier, plan, roots) if plan.fresh else None
    early: onecall.EarlyExec | None = None
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
            pristine = verifier_future.result() if verifier_future is not None else agent_session
            _check_trust(plan, roots, pristine)
        if verifier_future is not None:
            # after the probe, before the agent: the verifier's exec waits for the state
            # (its sandbox, shell and supervisor started while the agent works, on every
            # backend: on local too that is the bwrap and interpreter start it saves)
            early = onecall.EarlyExec(plan, verifier_future, roots, fresh_command(plan), pool)
        ended = _agent_phase(plan, agent_session)
        if ended is not None:
            return ended
        t0 = time.monotonic()
        if verifier_future is not None:
            vsession = verifier_future.result()
            plan.timings["verifier_wait"] = time.monotonic() - t0
            reading = _verify_fresh(plan, agent_session, vsession, roots, pool, sessions,
                                    early)
        else:
            if plan.keep_state is not None:
                _keep_shared(plan, agent_session, roots)
            reading = _verify_shared(plan, agent_session, roots)
        plan.timings["verify"] = time.monotonic() - t0
        outcome = Outcome.SCORED if reading.reward is not None else Outcome.VERIFIER_ERROR
        return PhaseOutcome(outcome, reading.reward, reading.reason, reading.details,
                            agent_info=plan.agent_info, verifier_exit_code=reading.exit_code)
    finally:
        if early is not None:
            early.withdraw()  # unless fed: the trial ended before verification
        if verifier_future is not None:
            with contextlib.suppress(Exception):  # when it never started, nothing to stop
                vsession = verifier_future.result()
                if plan.pool is not None:
                    plan.pool.discard(vsession)  # only the verifier ran in it
                else:
                    sessions.append(vsession)
        _stop_all(pool, sessions)


def _verifier_mounts(plan: TrialPlan) -> list[Mount]:
    return [
        Mount(source=plan.task.verifier_dir.resolve(), target=plan.task.verifier_mount,
              read_only=True),
        Mount(source=harness_bundle(), target=HARNESS_DIR, read_only=True),
    ]


def _start_verifier(plan: TrialPlan, roots: list[str]) -> Session:
    """The verifier's pristine session (from the warm pool when there is one). Where the
    backend copies files on the host, its state roots are emptied now, while the agent
    works; otherwise the exec that brings the agent's state in does it (`onecall`)."""
    t0 = time.monotonic()
    limits = plan.limits(network=False)
    prepare = (lambda s: clear_roots(s, roots, logs=LOGS_DIR)) \
        if plan.backend.host_copies else None
    if plan.pool is not None:
        session = plan.pool.take(plan.image, limits, plan.labels("verifier"),
                                 mounts=_verifier_mounts(plan), role="verifier",
                                 prepare=prepare, output_dir=LOGS_DIR)
    else:
        session = plan.backend.start(plan.image, limits=limits, mounts=_verifier_mounts(plan),
                                     labels=plan.labels("verifier"), output_dir=LOGS_DIR)
        if prepare is not None:
            try:
                prepare(session)
            except BaseException:
                session.stop()
                raise
    plan.timings["verifier_start"] = time.monotonic() - t0
    return session


def _agent_phase(plan: TrialPlan, session: Session) -> PhaseOutcome | None:
    """Run the agent until it returns or its deadline; end every agent process.
    Returns a final outcome when the trial ends here, else None (go verify)."""
    task, agent = plan.task, plan.agent
    assert agent is not None, "a trial without an agent has no agent phase"
    t0 = time.monotonic()
    deadline = t0 + plan.agent_timeout
    shell = SessionShell(session, plan.workdir, deadline,
                         env={"BENCHFLOW_WORKSPACE": plan.workdir},
                         host_copies=plan.backend.host_copies)
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


def fresh_command(plan: TrialPlan) -> VerifierCommand:
    """The verifier's command in a fresh session (the pristine image's environment)."""
    return build_command(plan.task.verifier_kind, verifier_dir=plan.task.verifier_mount,
                         harness_dir=HARNESS_DIR, workdir=plan.workdir,
                         base_env=dict(plan.image.env), isolate_site=False,
                         task_env=plan.task.frontmatter.verifier.env,
                         shell=script_shell(plan.task.verifier_dir / "test.sh"))


def _verify_fresh(plan: TrialPlan, agent_session: Session, vsession: Session,
                  roots: list[str], pool: ThreadPoolExecutor,
                  sessions: list[Session], early: onecall.EarlyExec | None) -> Reading:
    """Move the state roots into the verifier's pristine session and verify there: by
    host copies where the backend has them; else in one exec, started while the agent
    worked, when the state is small (`onecall`), else (or when the image cannot restore
    it that way) by plain copies into a new pristine session."""
    t0 = time.monotonic()
    storage_kb = plan.task.frontmatter.environment.storage_mb * 1024
    try:
        report = fetch_state(agent_session, roots, plan.scratch, max_kbytes=storage_kb)
    except (StateTooLarge, TransferLimit) as exc:
        return Reading(0.0, f"the agent's final state cannot be verified: {exc}")
    changed = agent_session.changed_paths() if plan.keep_state is not None else []
    # No longer needed: let it go while the verifier runs (execute's finally waits).
    pool.submit(agent_session.stop)
    if report.dropped_links:
        plan.record.write_text("dropped_links.txt", "\n".join(report.dropped_links) + "\n")
    reading = _verify_state(plan, report, vsession, roots, sessions, t0, early)
    if plan.keep_state is not None:
        SavedState.keep(report, changed, plan.keep_state)
    return reading


def _verify_state(plan: TrialPlan, report: StateReport, vsession: Session,
                  roots: list[str], sessions: list[Session], t0: float,
                  early: onecall.EarlyExec | None = None) -> Reading:
    """Verify fetched state roots in the verifier's pristine session (see _verify_fresh;
    without an early exec, as for a kept state verified again, a small state goes in the
    same one exec, started now)."""
    command = fresh_command(plan)
    if plan.backend.host_copies and early is None:  # emptied at start; host copies
        put_state(vsession, report)
        plan.timings["state_copy"] = time.monotonic() - t0
        reading = verification.run(plan, vsession, command)
        assert reading is not None  # no prefix: the verifier always ran
        return reading
    if report.kbytes * 1024 <= onecall.MAX_STATE_BYTES:
        plan.timings["state_copy"] = time.monotonic() - t0
        archive = state_archive(report)
        reading = (early.feed(archive) if early is not None  # the exec already waits
                   else onecall.verify_now(plan, vsession, roots, command, archive))
        if reading is not None:
            report.copied.extend(report.hosts)
            return reading
        # the image could not restore the state that way: a new pristine session
        vsession = plan.backend.start(plan.image, limits=plan.limits(network=False),
                                      mounts=_verifier_mounts(plan),
                                      labels=plan.labels("verifier"), output_dir=LOGS_DIR)
        sessions.append(vsession)
    elif early is not None:
        early.withdraw()  # too large to hold in memory: the plain way, in this session
    verification.empty_roots(vsession, command, roots)
    put_state(vsession, report)
    plan.timings["state_copy"] = time.monotonic() - t0
    reading = verification.run(plan, vsession, command)
    assert reading is not None  # no prefix: the verifier always ran
    return reading


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
    try:
        t0 = time.monotonic()
        if plan.fresh:
            session = _start_verifier(plan, roots)
        elif plan.pool is not None:
            session = plan.pool.take(plan.image, plan.limits(network=False),
                                     plan.labels("verifier"))
        else:
            session = plan.backend.start(plan.image, limits=plan.limits(network=False),
                                         labels=plan.labels("verifier"))
        sessions.append(session)
        _check_trust(plan, roots, session)
        report = saved.report()
        if plan.fresh:
            reading = _verify_state(plan, report, session, roots, sessions, t0)
        else:
            clear_roots(session, roots)
            put_state(session, report)
            plan.timings["state_copy"] = time.monotonic() - t0
            # no agent ran here: a session that cannot verify is the sandbox's failure
            reading = shared.verify_shared(plan, session, roots)
        plan.timings["verify"] = time.monotonic() - t0
    except TaskRefused as exc:
        return PhaseOutcome(Outcome.BUILD_FAILED, reason=str(exc))
    finally:
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
