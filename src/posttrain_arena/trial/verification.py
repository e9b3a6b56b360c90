"""Running a verifier and reading its verdict: the one room both isolation modes use.

    exec under the supervisor ──▶ halt the session ──▶ copy its output directory out
    (bounded) ──▶ keep the regular files in the record ──▶ supervisor status ──▶ reward

The order is the defence. The verifier's command runs under the harness's static
supervisor (`supervise.c`, mounted from the host: nothing of the task's image starts
it), which kills
every process the verifier started before it exits and records any that outlived its
parent. Then the whole session is halted (docker: the container's PID 1 is killed, so
the kernel ends its pid namespace; local: the session's cgroup is killed), so no
process that ever ran there, in either phase, can still write. Only then is the output
directory copied to the host, regular files only, never through a link, into the
record. Nothing the session printed is parsed: stdout and stderr are kept as text.

A verdict is taken only when the supervisor finished (its status file names the exit
status the engine reported for the exec), no process outlived its parent, and the
reward files agree (see verifier.read_reward).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrain_arena.sandbox.base import (
    ExecResult,
    MissingPath,
    SandboxError,
    Session,
    Stdin,
    TransferBounds,
    TransferLimit,
)
from posttrain_arena.trial.harness import RESTORE_FAILED
from posttrain_arena.trial.hostfiles import keep_regular_files, read_regular
from posttrain_arena.trial.plan import HARNESS_CWD, TrialPlan
from posttrain_arena.trial.result import TestDetail
from posttrain_arena.trial.rubric import apply_rubric
from posttrain_arena.trial.verifier import VerifierCommand, read_outcome, supervised_argv

STATUS_FILE = "supervisor.json"
REWARD_FILES = ("reward.txt", "reward.json")
"""Where a reward may be: anything there but a regular file voids the verdict (the CTRF
report is details, or for a pytest-only verifier a report that must be there)."""
OUTPUT_BOUNDS = TransferBounds(max_entries=2_000, max_bytes=256 << 20)
OUTPUT_COPY_SEC = 120.0


@dataclass
class Reading:
    """What the verifier's output says: a reward, or why there is none."""

    reward: float | None
    reason: str | None = None
    details: list[TestDetail] = field(default_factory=list)
    exit_code: int | None = None


def run(plan: TrialPlan, session: Session, command: VerifierCommand, *,
        empty: list[str] | None = None, stdin: Stdin | None = None,
        untar: str | None = None) -> Reading | None:
    """Run `command` in `session` under the supervisor, halt the session, keep its
    output, read it. `empty`: state roots the supervisor first empties (with the output
    directory); `untar`: it then restores a tar from `stdin` under that directory.
    None when it did one of those and exited RESTORE_FAILED with no status: the state
    could not be put in place, the verifier did not run (the session is halted either
    way)."""
    result = session.exec(supervised_argv(command, empty=empty, untar=untar),
                          timeout=plan.verifier_timeout, workdir=HARNESS_CWD,
                          user="root", stdin=stdin)
    session.halt()  # before anything is read: nothing may write after this
    problem = collect_output(plan, session, command.logs_dir)
    plan.record.write_text("stdout.txt", result.stdout)
    plan.record.write_text("stderr.txt", result.stderr)
    if ((empty is not None or untar is not None) and result.exit_code == RESTORE_FAILED
            and not result.timed_out and read_status(plan.record.verifier_dir) is None):
        return None
    if problem is not None:
        return Reading(None, problem)
    return judge(plan, command, result)


def empty_roots(session: Session, command: VerifierCommand, roots: list[str]) -> None:
    """Empty the state roots and the output directory of a pristine verifier session
    with the harness's supervisor (nothing of the image runs), before a state is
    copied in by other means. SandboxError when it cannot."""
    result = session.exec(supervised_argv(command, empty=roots, run=False), timeout=120,
                          user="root", workdir=HARNESS_CWD)
    if result.exit_code != 0 or result.timed_out:
        raise SandboxError(f"cannot prepare the verifier's session {session.id}: "
                           f"{(result.stderr or result.stdout).strip()[-300:]}")


def collect_output(plan: TrialPlan, session: Session, logs_dir: str) -> str | None:
    """Copy the (halted) session's output directory into the record; why not, or None."""
    staging = plan.scratch / "verifier-output"
    bounds = TransferBounds(max_entries=OUTPUT_BOUNDS.max_entries,
                            max_bytes=OUTPUT_BOUNDS.max_bytes,
                            deadline=time.monotonic() + OUTPUT_COPY_SEC)
    try:
        session.copy_out(logs_dir, staging, bounds=bounds)
    except MissingPath:
        return None  # no output at all: the reading says what is missing
    except TransferLimit as exc:
        return f"the verifier's output directory is too large to keep: {exc}"
    left_out = keep_regular_files(staging, plan.record.verifier_dir)
    if left_out:
        plan.record.write_text("left_out.txt", "\n".join(left_out) + "\n")
    return None


def judge(plan: TrialPlan, command: VerifierCommand, result: ExecResult) -> Reading:
    """The verdict of a finished, supervised verifier whose output is in the record."""
    logs = plan.record.verifier_dir
    timeout = plan.verifier_timeout
    exit_code = None if result.timed_out else result.exit_code
    if result.timed_out:
        return Reading(None, f"the verifier ran past its {timeout:g} s limit")
    status = read_status(logs)
    if status is None or status.get("exit_code") != result.exit_code:
        tail = (result.stderr or result.stdout).strip()[-300:]
        return Reading(None, (
            f"the verifier's supervisor did not finish (exec exit {result.exit_code}); "
            "something ended it or removed its output, so no reward is taken"
            + (f": {tail}" if tail else "")), exit_code=exit_code)
    orphans = status.get("orphan_count", 0)
    if orphans:
        shown = "; ".join(str(o.get("command") or o.get("pid"))[:120]
                          for o in status.get("orphans", [])[:3])
        return Reading(None, (
            f"{orphans} process(es) started during verification outlived their parent "
            f"({shown}); what they may have written cannot be told apart from the "
            "verifier's output, so no reward is taken"), exit_code=exit_code)
    outputs = status.get("outputs")
    for name, kind in (outputs.items() if isinstance(outputs, dict) else []):
        if name in REWARD_FILES and kind != "regular file":
            # never "absent", so that the other reward file would be read instead
            return Reading(None, f"{command.logs_dir}/{name} is a {kind}, not a regular "
                                 "file; the reward is read from regular files only",
                           exit_code=exit_code)
    reading = read_outcome(logs, exit_code=result.exit_code, timed_out=False,
                           timeout=timeout, pytest_only=command.pytest_only,
                           stderr_tail=result.stderr or result.stdout)
    # a verifier.md rubric makes the reward from reward.json's dimension scores
    reading = apply_rubric(plan.task.rubric, logs, reading, exited_normally=(
        result.exit_code in ((0, 1) if command.pytest_only else (0,))))
    return Reading(reading.reward, reading.reason, reading.details, exit_code=exit_code)


def read_status(logs: Path) -> dict[str, Any] | None:
    """The supervisor's status from the record's copy of the output, or None."""
    try:
        data = json.loads(read_regular(logs / STATUS_FILE, limit=1 << 20))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
