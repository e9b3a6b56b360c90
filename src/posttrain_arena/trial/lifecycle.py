"""One trial's phases, from a built image to a TrialResult.

    agent session ──agent phase (deadline)──▶ halt / kill_all ──▶ verifier phase ──▶ result

Fresh isolation (the default) starts the verifier's session from the pristine image
while the agent works (it is cheap then: nobody waits for it), with verifier/ and the
harness runtime mounted read-only and a harness-owned, empty output directory; after
the agent phase only the state roots travel into it. Shared isolation verifies in the
agent's own session after hardening it (see `shared.py`). Infrastructure failures
raise; the runner turns them into `infra_error`, never into a reward.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from posttrain_arena.agents.base import Agent, AgentContext, AgentRun
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.agents.transcript import Message, Transcript
from posttrain_arena.sandbox.base import Backend, ExecResult, ImageRef, Limits, Mount, Session
from posttrain_arena.spec.package import TaskPackage
from posttrain_arena.trial import onecall, shared
from posttrain_arena.trial.harness import HARNESS_DIR, harness_bundle
from posttrain_arena.trial.pool import SessionPool
from posttrain_arena.trial.records import TrialRecord
from posttrain_arena.trial.result import Outcome, TestDetail
from posttrain_arena.trial.rubric import apply_rubric
from posttrain_arena.trial.shell import SessionShell
from posttrain_arena.trial.state import (
    StateTooLarge,
    clear_roots,
    fetch_state,
    put_state,
    state_roots,
)
from posttrain_arena.trial.verifier import (
    LOGS_DIR,
    VerifierCommand,
    VerifierReading,
    build_command,
    env_argv,
    read_outcome,
)

VERIFIER_MOUNT = "/verifier"
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


@dataclass
class Reading(VerifierReading):
    """A verifier reading plus the entry point's exit status."""

    exit_code: int | None = None


@dataclass
class TrialPlan:
    """Everything one trial needs, resolved."""

    task: TaskPackage
    agent: Agent
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
    keep_agent_session: bool = False
    """issue 14: a multi-step trial's agent session outlives a step (kill_all, no halt)."""

    @property
    def harness_cwd(self) -> str:
        """A directory the agent cannot remove, for the harness's own commands (the
        workdir may be gone; the local backend has no visible '/')."""
        return "/tmp" if self.backend.name == "local" else "/"

    @property
    def pooled_logs(self) -> bool:
        """Whether the verifier comes from the pool, its output fetched by copy (the
        local backend cannot create /logs in a session, so it keeps the mount)."""
        return self.pool is not None and self.backend.name != "local"

    @property
    def fresh(self) -> bool:
        """Whether the verifier runs in a fresh session (else in the agent's)."""
        return self.task.frontmatter.verifier.isolation.value == "fresh"

    @property
    def workdir(self) -> str:
        return self.task.frontmatter.environment.workdir

    def limits(self, *, network: bool) -> Limits:
        env = self.task.frontmatter.environment
        return Limits(cpus=env.cpus, memory_mb=env.memory_mb, storage_mb=env.storage_mb,
                      pids_limit=env.pids_limit, allow_internet=network)

    def labels(self, role: str) -> dict[str, str]:
        return {"posttrain-arena.trial": self.trial_id, "posttrain-arena.role": role,
                "posttrain-arena.task": self.task.name[:60]}


def execute(plan: TrialPlan) -> PhaseOutcome:
    """Run the agent and verifier phases; raise on infrastructure failure."""
    task = plan.task
    fresh = plan.fresh
    roots = state_roots(plan.workdir, list(task.frontmatter.verifier.state_paths))
    sessions: list[Session] = []
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="trial")
    verifier_future = pool.submit(_start_verifier, plan, roots) if fresh else None
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
        ended = _agent_phase(plan, agent_session)
        if ended is not None:
            return ended
        t0 = time.monotonic()
        if verifier_future is not None:
            vsession = verifier_future.result()
            plan.timings["verifier_wait"] = time.monotonic() - t0
            reading = _verify_fresh(plan, agent_session, vsession, roots, pool)
        else:
            reading = shared.verify_shared(plan, agent_session, roots)
        plan.timings["verify"] = time.monotonic() - t0
        outcome = Outcome.SCORED if reading.reward is not None else Outcome.VERIFIER_ERROR
        return PhaseOutcome(outcome, reading.reward, reading.reason, reading.details,
                            agent_info=plan.agent_info, verifier_exit_code=reading.exit_code)
    finally:
        if verifier_future is not None:
            with contextlib.suppress(Exception):  # when it never started, nothing to stop
                vsession = verifier_future.result()
                if plan.pool is not None:
                    plan.pool.discard(vsession)  # only the verifier ran in it
                else:
                    sessions.append(vsession)
        _stop_all(pool, sessions)


def _start_verifier(plan: TrialPlan, roots: list[str]) -> Session:
    """The verifier's pristine session, its state roots emptied. With a warm pool (and
    a backend whose sessions can hold /logs), it comes from the pool and the output
    directory is fetched by copy; otherwise the record's folder is mounted there."""
    t0 = time.monotonic()
    mounts = [
        # issue 14: the layout says where (Harbor's test.sh names /tests)
        Mount(source=plan.task.verifier_dir.resolve(), target=plan.task.verifier_mount,
              read_only=True),
        Mount(source=harness_bundle(), target=HARNESS_DIR, read_only=True),
    ]
    limits = plan.limits(network=False)
    if plan.pooled_logs:
        assert plan.pool is not None
        session = plan.pool.take(plan.image, limits, plan.labels("verifier"), mounts=mounts,
                                 role="verifier",
                                 prepare=lambda s: _prepare_pooled_verifier(s, roots))
    else:
        mounts.append(Mount(source=plan.record.verifier_dir.resolve(), target=LOGS_DIR,
                            read_only=False))
        session = plan.backend.start(plan.image, limits=limits, mounts=mounts,
                                     labels=plan.labels("verifier"))
        try:
            clear_roots(session, roots)
        except BaseException:
            session.stop()
            raise
    plan.timings["verifier_start"] = time.monotonic() - t0
    return session


def _prepare_pooled_verifier(session: Session, roots: list[str]) -> None:
    """Empty a pooled verifier session's state roots and create its output directory,
    unless its verification exec will do that itself (`onecall`)."""
    if not onecall.takes_stdin(session):
        clear_roots(session, roots, logs=LOGS_DIR)


def _agent_phase(plan: TrialPlan, session: Session) -> PhaseOutcome | None:
    """Run the agent until it returns or its deadline; end every agent process.
    Returns a final outcome when the trial ends here, else None (go verify)."""
    task, agent = plan.task, plan.agent
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
    plan.agent_info = info
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


def _end_agent_processes(plan: TrialPlan, session: Session) -> None:
    """End every process the agent started. With fresh verification the agent's session
    only has its state read from now on, so a backend that can halt it (docker: one
    SIGKILL of the container, its files kept readable) does so; otherwise, and for
    shared verification, which goes on in this session, kill_all."""
    halt = getattr(session, "halt", None)
    if plan.fresh and callable(halt) and not plan.keep_agent_session:
        halt()
    else:
        session.kill_all()


def _verify_fresh(plan: TrialPlan, agent_session: Session, vsession: Session,
                  roots: list[str], pool: ThreadPoolExecutor) -> Reading:
    """Move the state roots into the verifier's pristine session and verify there. Where
    that session takes stdin, one exec moves the state in, verifies and returns the
    output (`onecall`); otherwise, or when that cannot restore the state, plain copies."""
    t0 = time.monotonic()
    storage_kb = plan.task.frontmatter.environment.storage_mb * 1024
    try:
        report = fetch_state(agent_session, roots, plan.scratch, max_kbytes=storage_kb,
                             cwd=plan.harness_cwd)
    except StateTooLarge as exc:
        return Reading(None, str(exc))
    # No longer needed: let it go while the verifier runs (execute's finally waits).
    pool.submit(agent_session.stop)
    if report.dropped_links:
        plan.record.write_text("dropped_links.txt", "\n".join(report.dropped_links) + "\n")
    command = build_command(plan.task.verifier_kind, verifier_dir=plan.task.verifier_mount,
                            harness_dir=HARNESS_DIR, workdir=plan.workdir,
                            base_env=dict(plan.image.env), isolate_site=False)
    if plan.pooled_logs and onecall.takes_stdin(vsession):  # not prepared by the pool
        if onecall.supported(vsession, report):
            plan.timings["state_copy"] = time.monotonic() - t0
            reading = onecall.verify_with_state(plan, vsession, command, report, roots,
                                                plan.record.verifier_dir)
            if reading is not None:
                return reading
            # the verifier did not run: start over from emptied roots and output
            vsession.exec(["rm", "-rf", "--", LOGS_DIR], timeout=60, user="root",
                          workdir=plan.harness_cwd)
            report.copied.clear()
        clear_roots(vsession, roots, logs=LOGS_DIR)
    put_state(vsession, report)
    plan.timings["state_copy"] = time.monotonic() - t0
    return run_verifier(plan, vsession, command, plan.record.verifier_dir,
                        fetch_from=LOGS_DIR if plan.pooled_logs else None)


def run_verifier(plan: TrialPlan, session: Session, command: VerifierCommand, logs: Path,
                 fetch_from: str | None = None) -> Reading:
    """Run the verifier command in `session`, keep its output, read its reward.
    With `fetch_from`, that output directory is copied out of the session first."""
    timeout = plan.task.frontmatter.verifier.timeout_sec
    result = session.exec(env_argv(command), timeout=timeout, workdir=command.workdir,
                          user="root")
    if fetch_from is not None:
        shared.fetch_logs(session, fetch_from, logs, plan.scratch)
    return read_verifier(plan, command, logs, result)


def read_verifier(plan: TrialPlan, command: VerifierCommand, logs: Path,
                  result: ExecResult) -> Reading:
    """Keep a finished verifier's output in the record and read its reward from `logs`
    (on the host)."""
    timeout = plan.task.frontmatter.verifier.timeout_sec
    plan.record.write_text("stdout.txt", result.stdout)
    plan.record.write_text("stderr.txt", result.stderr)
    reading = read_outcome(logs, exit_code=result.exit_code, timed_out=result.timed_out,
                           timeout=timeout, pytest_only=command.pytest_only,
                           stderr_tail=result.stderr or result.stdout)
    # issue 14 hook: a verifier.md rubric makes the reward from reward.json's dimensions
    reading = apply_rubric(plan.task.rubric, logs, reading, exited_normally=(
        not result.timed_out and result.exit_code in ((0, 1) if command.pytest_only else (0,))))
    return Reading(reading.reward, reading.reason, reading.details,
                   exit_code=None if result.timed_out else result.exit_code)


def _stop_all(pool: ThreadPoolExecutor, sessions: list[Session]) -> None:
    """Stop every session at once (stopping never waits on a grace period), and wait
    for every stop submitted earlier too: when a trial returns, its sessions are gone."""
    futures: list[Future[None]] = [pool.submit(s.stop) for s in sessions]
    pool.shutdown(wait=True)
    for fut in futures:
        with contextlib.suppress(Exception):  # an orphan is the reaper's job
            fut.result(timeout=0)
