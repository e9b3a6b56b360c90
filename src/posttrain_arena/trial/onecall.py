"""Fresh verification in one exec: state in through stdin, the verifier, its output out.

The plain path takes three engine round trips after the agent's state is fetched: copy
the state in (an archive upload), run the verifier (an exec), copy its output directory
out (an archive download); each archive call costs the engine a helper process. Where
the verifier's session takes stdin (`accepts_stdin`, the docker backend), one exec does
all three with the pristine image's own `/bin/sh`, `tar` and `base64`:

    empty the roots, tar -x < state  ──▶  env -i ... verifier  ──▶  base64 tar of the output

The output archive follows the verifier's stdout between two lines carrying a random
token; it is unpacked on the host keeping only top-level regular files, as
`shared.fetch_logs` does. Whatever goes wrong on this path (no tar in the image, a
timeout, output truncated by the capture limit) falls back to the plain calls, so it
changes only the speed: the same state arrives (same archive, same filtering), the same
verifier runs in the same pristine session, its reward is read from the same files.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import io
import secrets
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from posttrain_arena.sandbox.base import Session
from posttrain_arena.trial import shared
from posttrain_arena.trial.state import StateReport, state_archive
from posttrain_arena.trial.verifier import LOGS_DIR, PINNED_PATH, VerifierCommand, env_argv

if TYPE_CHECKING:
    from posttrain_arena.trial.lifecycle import Reading, TrialPlan

MAX_STATE_BYTES = 64 << 20
"""Larger state goes the plain way (the archive is held in memory here)."""

MAX_LOG_FILE = 64 << 20

_WRAP = "PATH=" + PINNED_PATH + r"""
logs=$1; tok=$2; n=$3; shift 3
fail() { echo "$tok:state-failed"; exit 0; }
while [ "$n" -gt 0 ]; do
  p=$1; shift; n=$((n - 1))
  if [ -d "$p" ] && [ ! -L "$p" ]; then
    find "$p" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} + || fail
  else rm -rf -- "$p" || fail; fi
done
rm -rf -- "$logs" && mkdir -p -m 0755 -- "$logs" || fail
tar --numeric-owner -xpf - -C / || fail
"$@"; rc=$?
t=/tmp/.arena-logs-$tok.tar
if [ -d "$logs" ] && [ ! -L "$logs" ] && tar -cf "$t" -C "$logs" . 2>/dev/null; then
  printf '\n%s:logs\n' "$tok"; base64 "$t" && printf '%s:end\n' "$tok"
fi
rm -f -- "$t"
exit $rc
"""
"""The wrapper's own tools come from the system directories only (which never travel
with the state); the verifier's command (`env -i ...`) sets its own environment."""


def takes_stdin(session: Session) -> bool:
    """Whether `session` can take input through exec's stdin (then a pooled verifier
    session is not prepared ahead: the one exec empties its roots itself)."""
    return bool(getattr(session, "accepts_stdin", False))


def supported(session: Session, report: StateReport) -> bool:
    """Whether `session` can take the state through stdin, and the state is small."""
    return takes_stdin(session) and report.kbytes * 1024 <= MAX_STATE_BYTES


def verify_with_state(plan: TrialPlan, session: Session, command: VerifierCommand,
                      report: StateReport, roots: list[str], logs: Path) -> Reading | None:
    """Empty the state roots and the output directory of the pristine `session`, bring
    the state in, run the verifier and read its output, in one exec. None when the
    state could not be restored this way (the verifier did not run; the caller goes the
    plain way after clearing the roots again)."""
    from posttrain_arena.trial.lifecycle import read_verifier

    token = secrets.token_hex(12)
    timeout = plan.task.frontmatter.verifier.timeout_sec
    argv = ["/bin/sh", "-c", _WRAP, "arena-verify", LOGS_DIR, token, str(len(roots)), *roots,
            *env_argv(command)]
    runner: Any = session  # exec's stdin= is this backend's extension
    result = runner.exec(argv, timeout=timeout, workdir=command.workdir, user="root",
                         stdin=state_archive(report))
    if result.stdout == f"{token}:state-failed\n" and not result.timed_out:
        return None
    report.copied.extend(report.hosts)
    stdout, blob = split_output(result.stdout, token)
    if blob is None or not unpack_logs(blob, logs):
        shared.fetch_logs(session, LOGS_DIR, logs, plan.scratch)
    return read_verifier(plan, command, logs, dataclasses.replace(result, stdout=stdout))


def split_output(stdout: str, token: str) -> tuple[str, str | None]:
    """(the verifier's own stdout, the base64 output archive or None when absent or
    cut short)."""
    begin, end = f"\n{token}:logs\n", f"{token}:end\n"
    at = stdout.rfind(begin)
    if at < 0:
        return stdout, None
    rest = stdout[at + len(begin):]
    stop = rest.find(end)
    if stop < 0:
        return stdout[:at], None
    return stdout[:at], rest[:stop]


def unpack_logs(blob: str, dest: Path) -> bool:
    """Write the archive's top-level regular files (up to MAX_LOG_FILE each) to `dest`;
    False when the archive is unreadable."""
    try:
        data = base64.b64decode(blob)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            members = tar.getmembers()
            dest.mkdir(parents=True, exist_ok=True)
            for member in members:
                name = member.name[2:] if member.name.startswith("./") else member.name
                if not name or "/" in name or name in (".", "..") or not member.isreg():
                    continue
                if member.size > MAX_LOG_FILE:
                    continue
                source = tar.extractfile(member)
                if source is not None:
                    (dest / name).write_bytes(source.read())
    except (binascii.Error, ValueError, tarfile.TarError, EOFError):
        return False
    return True
