"""Fresh verification in one exec: the agent's state in through stdin, then the verifier.

The plain path takes two engine round trips after the agent's state is fetched: copy
the state in (an archive upload, which costs the engine a helper process), then run the
verifier (an exec). Where the state is small, one exec of the harness's own static
supervisor does both, with nothing of the image's (no shell, no tar):

    the supervisor empties the roots and the output directory  ──▶  restores the state
    from stdin (before any of it runs)  ──▶  runs the verifier under its supervision

The emptying and the restore run before any of the agent's code can, and the verifier's
output is read exactly as on the plain path (verification.run: halt, then copy out).
When the state cannot be restored that way (a root on a read-only path of the image)
the exec exits with STATE_FAILED and no supervisor status; the caller then goes the
plain way in a new pristine session.

`EarlyExec` starts that exec before the state exists, while the agent works: the
supervisor is up, waiting on stdin, when the agent's session has been halted and read.
Both backends take it: on local, where a copy in is a plain host copy, what it saves is
the sandbox's start (bwrap, its mounts).
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Executor, Future

from posttrain_arena.sandbox.base import Session
from posttrain_arena.trial import verification
from posttrain_arena.trial.harness import RESTORE_FAILED
from posttrain_arena.trial.plan import TrialPlan
from posttrain_arena.trial.verification import Reading
from posttrain_arena.trial.verifier import VerifierCommand

MAX_STATE_BYTES = 64 << 20
"""Larger state goes the plain way (the archive is held in memory)."""

STATE_FAILED = RESTORE_FAILED
"""The exit status of the exec when the state could not be restored."""


def verify_now(plan: TrialPlan, session: Session, roots: list[str],
               command: VerifierCommand, archive: bytes) -> Reading | None:
    """The same one exec for a state already at hand (a kept state verified again, with
    no agent phase to overlap): empty the roots, restore `archive`, verify. None when
    the image could not restore it (as `EarlyExec.feed`)."""
    return verification.run(plan, session, command, empty=roots, stdin=archive, untar="/")


class StateWithdrawn(Exception):
    """The agent's state does not come through the early exec (too large for it, or the
    trial ended before verification)."""


class EarlyExec:
    """The one exec, started in the verifier's pristine session while the agent works:
    the supervisor empties the roots and the output directory, then waits for the state
    on its stdin; the verifier's timeout counts from when it arrives. So after the agent
    phase only the state's bytes stand between reading the agent's halted session and
    the verifier, not an exec's start.

    Started only after the pristine probe (the probe reads the session before anything
    of the harness's has run in it) and in a session no agent can reach. `feed` or
    `withdraw` must be called: until then the exec waits."""

    def __init__(self, plan: TrialPlan, session: Future[Session], roots: list[str],
                 command: VerifierCommand, executor: Executor) -> None:
        self._state: Future[bytes] = Future()
        self._reading = executor.submit(self._run, plan, session, roots, command)

    def _run(self, plan: TrialPlan, session: Future[Session], roots: list[str],
             command: VerifierCommand) -> Reading | None:
        pristine = session.result()
        if self._state.done() and self._state.exception() is not None:
            raise StateWithdrawn()  # withdrawn before the session was up: start nothing
        return verification.run(plan, pristine, command, empty=roots,
                                stdin=lambda: self._state.result(), untar="/")

    def feed(self, archive: bytes) -> Reading | None:
        """Send the state (an uncompressed tar named from '/'); the verifier's reading,
        or None when the image could not restore it (see verification.run)."""
        self._state.set_result(archive)
        return self._reading.result()

    def withdraw(self) -> None:
        """The state will not come: end the exec (it only emptied the roots and the
        output directory) and wait until it has ended. Idempotent."""
        if not self._state.done():
            self._state.set_exception(StateWithdrawn())
        with contextlib.suppress(Exception):  # whatever it raised, it is over
            self._reading.result()
