"""Fresh verification: the agent's state roots verified in a new pristine session of
the task's image. One path, whatever the backend and whoever asks (a trial, each step
of a multi-step trial, a kept state verified again):

    FreshVerifier(plan, roots)  the verifier's pristine session starts (from the warm
                                pool when there is one), verifier/ and the harness
                                mounted read-only; nothing of the agent's reaches it
      .arm()                    after the pristine probe: the one exec starts; the
                                harness's static supervisor empties the state roots and
                                the output directory and waits for the state on stdin
    verify_agent(...)           the agent's session, halted (or idle between steps), is
                                read: its state roots within the state bounds, links that
                                leave them dropped (`state.fetch_state`)
      .verify(state)            the state, one tar, to that exec: the supervisor
                                restores it itself, then runs the verifier; the output
                                is read after the halt (`verification.run`)

A trial arms while its agent works, so that only the state's bytes stand between its
halted session and the verifier; a kept state arms when it is at hand: the same exec,
started later. One fallback, the same on every backend, for a state too large to hold
in memory (MAX_STATE_BYTES: the exec is withdrawn) or one the image cannot restore that
way (a root on a read-only path: the exec exits STATE_FAILED with no supervisor status):
a new pristine session, whose roots the supervisor empties (`verification.empty_roots`)
before `copy_in` brings the state. (A withdrawn exec may leave its session halted: the
docker backend cannot find the supervisor's tree to kill, as it is not dumpable, and
halts the session instead.) Nothing here asks which backend runs it: what differs
between backends is behind the `Session` protocol (`sandbox/base.py`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path

from posttrain_arena.sandbox.base import Mount, Session, TransferLimit
from posttrain_arena.trial import verification
from posttrain_arena.trial.harness import HARNESS_DIR, RESTORE_FAILED, harness_bundle
from posttrain_arena.trial.plan import TrialPlan
from posttrain_arena.trial.state import (
    SavedState,
    StateReport,
    StateTooLarge,
    fetch_state,
    put_state,
    state_archive,
)
from posttrain_arena.trial.verification import Reading
from posttrain_arena.trial.verifier import (
    LOGS_DIR,
    VerifierCommand,
    build_command,
    script_shell,
)

MAX_STATE_BYTES = 64 << 20
"""Larger state goes in by copy_in (the one exec's archive is held in memory)."""

STATE_FAILED = RESTORE_FAILED
"""The exit status of the one exec when the state could not be restored."""


class StateWithdrawn(Exception):
    """The agent's state does not come through the one exec (too large for it, or the
    trial ended before verification)."""


def fresh_command(plan: TrialPlan) -> VerifierCommand:
    """The verifier's command in a fresh session (the pristine image's environment)."""
    return build_command(plan.task.verifier_kind, verifier_dir=plan.task.verifier_mount,
                         harness_dir=HARNESS_DIR, workdir=plan.workdir,
                         base_env=dict(plan.image.env), isolate_site=False,
                         task_env=plan.task.frontmatter.verifier.env,
                         shell=script_shell(plan.task.verifier_dir / "test.sh"))


def _mounts(plan: TrialPlan) -> list[Mount]:
    return [
        Mount(source=plan.task.verifier_dir.resolve(), target=plan.task.verifier_mount,
              read_only=True),
        Mount(source=harness_bundle(), target=HARNESS_DIR, read_only=True),
    ]


def _pristine(plan: TrialPlan) -> Session:
    """A new pristine verifier session (the warm pool's when there is one); its output
    directory is LOGS_DIR (see Backend.start), its network none."""
    limits = plan.limits(network=False)
    if plan.pool is not None:
        return plan.pool.take(plan.image, limits, plan.labels("verifier"),
                              mounts=_mounts(plan), role="verifier", output_dir=LOGS_DIR)
    return plan.backend.start(plan.image, limits=limits, mounts=_mounts(plan),
                              labels=plan.labels("verifier"), output_dir=LOGS_DIR)


class FreshVerifier:
    """A verifier's pristine session, started in the background on creation, and its
    one exec. `arm` starts the exec (only after the pristine probe: the probe reads the
    session before anything of the harness's has run in it); `verify` sends the state
    (arming first when not yet armed); `close` must be called: it withdraws an exec
    that was never fed (killing its tree before its stdin closes) and hands back the
    sessions to stop."""

    def __init__(self, plan: TrialPlan, roots: list[str], executor: Executor) -> None:
        self.plan = plan
        self.roots = roots
        self.command = fresh_command(plan)
        self._executor = executor
        self._session: Future[Session] = executor.submit(self._start)
        self._state: Future[bytes] = Future()
        self._reading: Future[Reading | None] | None = None
        self._extra: list[Session] = []

    def _start(self) -> Session:
        t0 = time.monotonic()
        session = _pristine(self.plan)
        self.plan.timings["verifier_start"] = time.monotonic() - t0
        return session

    def session(self) -> Session:
        """The pristine session, once started (raises what its start raised)."""
        return self._session.result()

    def arm(self) -> None:
        """Start the one exec; it waits for the state on stdin. Idempotent."""
        if self._reading is None:
            self._reading = self._executor.submit(self._one_exec)

    def _one_exec(self) -> Reading | None:
        pristine = self._session.result()
        if self._state.done() and self._state.exception() is not None:
            raise StateWithdrawn()  # withdrawn before the session was up: start nothing
        return verification.run(self.plan, pristine, self.command, empty=self.roots,
                                stdin=lambda: self._state.result(), untar="/")

    def verify(self, report: StateReport) -> Reading:
        """Verify a fetched state (`report`'s host copies: bounded, escaping links
        dropped) in a pristine session: through the one exec when it is small enough
        to hold and the image can restore it so; else by copies into a new pristine
        session, after the supervisor emptied its roots. Records the roots copied in
        `report.copied`."""
        plan = self.plan
        t0 = time.monotonic()
        if report.kbytes * 1024 <= MAX_STATE_BYTES:
            self.arm()
            assert self._reading is not None
            self._state.set_result(state_archive(report))
            plan.timings["state_copy"] = time.monotonic() - t0
            reading = self._reading.result()
            if reading is not None:
                report.copied.extend(report.hosts)
                return reading
        else:
            self.withdraw()  # the exec (if armed) only emptied the roots and the output
        session = _pristine(plan)  # the first one is halted, or may be
        self._extra.append(session)
        verification.empty_roots(session, self.command, self.roots)
        put_state(session, report)
        plan.timings["state_copy"] = time.monotonic() - t0
        reading = verification.run(plan, session, self.command)
        assert reading is not None  # no `empty`/`untar`: the verifier always ran
        return reading

    def withdraw(self) -> None:
        """The state will not come through the one exec: end the exec (it only emptied
        the roots and the output directory) and wait until it has ended. Idempotent."""
        if not self._state.done():
            self._state.set_exception(StateWithdrawn())
        if self._reading is not None:
            with contextlib.suppress(Exception):  # whatever it raised, it is over
                self._reading.result()

    def close(self) -> list[Session]:
        """Withdraw an exec that was never fed, then: with a warm pool, discard the
        sessions (only the harness and the verifier ran in them) and return none; else
        return them for the caller to stop."""
        self.withdraw()
        sessions = list(self._extra)
        with contextlib.suppress(Exception):  # when it never started, nothing to stop
            sessions.insert(0, self._session.result())
        if self.plan.pool is not None:
            for session in sessions:
                self.plan.pool.discard(session)
            return []
        return sessions


def verify_agent(plan: TrialPlan, agent: Session, verifier: FreshVerifier, scratch: Path,
                 *, release: Callable[[], object] | None = None) -> Reading:
    """Read the state roots out of the agent's session (halted, or idle between the
    steps of a multi-step trial) within the state bounds, then `verifier.verify` them;
    a state past a bound is a scored 0. `release` is called once the agent's session
    is no longer needed (before the verifier runs). Keeps the state when the plan says
    so (`plan.keep_state`), with the paths the agent changed."""
    t0 = time.monotonic()
    verifier.session()  # up since the agent phase began (else its start's error)
    plan.timings["verifier_wait"] = time.monotonic() - t0
    storage_kb = plan.task.frontmatter.environment.storage_mb * 1024
    try:
        report = fetch_state(agent, verifier.roots, scratch, max_kbytes=storage_kb)
    except (StateTooLarge, TransferLimit) as exc:
        return Reading(0.0, f"the agent's final state cannot be verified: {exc}")
    changed = agent.changed_paths() if plan.keep_state is not None else []
    if release is not None:
        release()
    if report.dropped_links:
        plan.record.write_text("dropped_links.txt", "\n".join(report.dropped_links) + "\n")
    reading = verifier.verify(report)
    if plan.keep_state is not None:
        SavedState.keep(report, changed, plan.keep_state)
    return reading
