"""Whether a pristine session's programs can be trusted with the agent's state in it.

The verifier resolves programs through its PATH and loads Python from its interpreter's
sys.path. In fresh mode those come from the pristine image, unless the image resolves
them inside a state root, where the agent's files arrive (spec/trust.py). Two checks,
both before any of the agent's files reach the session that is probed:

* the image's environment (PATH, PYTHONPATH, LD_*, VIRTUAL_ENV, ...), statically;
* a probe run in the pristine session with the verifier's own environment, from its
  working directory: where `python3`, `bash`, `sh`, `env`, `tar` and `find` resolve
  (links followed), and the sys.path of `python3` started as a test.sh would start it
  (no -I: PYTHONSAFEPATH, .pth files and sitecustomize as the verifier gets them). An
  entry in a state root, or the current directory (a Python older than 3.11 ignores
  PYTHONSAFEPATH), refuses the task.

A task that fails either is refused (`TaskRefused`, reported as build_failed with the
fix), never verified. Results are cached per image and state roots.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from posttrain_arena.sandbox.base import ImageRef, SandboxError, Session
from posttrain_arena.task_format.trust import DEFAULT_PATH, FIX, root_of, untrusted_entries

PROGRAMS = ("python3", "python", "bash", "sh", "env", "tar", "find", "pytest")

_PROBE = r"""
for p in "$@"; do
  w=$(command -v -- "$p" 2>/dev/null) || continue
  case "$w" in /*) printf 'prog\t%s\t%s\n' "$p" "$(readlink -f -- "$w")";; esac
done
cd -- "$ARENA_PROBE_CWD" 2>/dev/null || cd /
py=$(command -v python3 2>/dev/null) && "$py" -c '
import sys
for p in sys.path:
    print("syspath\t-\t" + (p or "."))' 2>/dev/null
printf 'end\n'
exit 0
"""


class TaskRefused(Exception):
    """The task cannot be verified soundly as written; the message has the fix."""


class TrustCache:
    """Refusal reasons (or None) per (image, state roots), shared by a runner's trials."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, tuple[str, ...]], str | None] = {}

    def get(self, image: ImageRef, roots: list[str]) -> tuple[bool, str | None]:
        with self._lock:
            key = (image.tag, tuple(roots))
            return (key in self._known, self._known.get(key))

    def put(self, image: ImageRef, roots: list[str], reason: str | None) -> None:
        with self._lock:
            self._known[(image.tag, tuple(roots))] = reason


def static_reason(image: ImageRef, roots: list[str]) -> str | None:
    """Why the image's environment makes the state roots untrustworthy, or None."""
    found = untrusted_entries(image.env, roots)
    return _refusal(found) if found else None


def probe_reason(session: Session, image: ImageRef, roots: list[str], *,
                 env: Mapping[str, str], cwd: str, shell_verifier: bool) -> str | None:
    """Run the probe in a pristine `session` (before any agent file is in it) with the
    verifier's environment `env`, python3 from the verifier's working directory `cwd`;
    why the programs and modules it resolves are untrustworthy, or None.
    `shell_verifier`: the verifier is a test.sh, which may start python3 any way (the
    harness starts verifier.py and pytest with -I and a script, never from the cwd)."""
    result = session.exec(["/bin/sh", "-c", _PROBE, "arena-probe", *PROGRAMS], timeout=60,
                          user="root", workdir="/",
                          env={"PATH": DEFAULT_PATH, **env, "ARENA_PROBE_CWD": cwd})
    if result.timed_out or result.exit_code != 0 or not result.stdout.endswith("end\n"):
        # Fail closed: a probe cut short (a timeout on an overloaded host, a crash) says
        # nothing about the lines it did not print, so the task is not trusted on it.
        # A harness failure, not the task's: not cached, the trial is an infra error.
        raise SandboxError(
            f"the pristine probe of {image.tag} did not finish (exit {result.exit_code}"
            f"{', timed out' if result.timed_out else ''}): cannot tell whether its "
            f"programs resolve inside a state root; run the trial again")
    found: list[str] = []
    for line in result.stdout.splitlines():
        kind, _, rest = line.partition("\t")
        name, _, where = rest.partition("\t")
        if kind == "syspath" and not where.startswith("/") and shell_verifier:
            found.append(f"python3 imports from its current directory ({where!r}), which a "
                         "verifier that `cd`s into the workdir makes the agent's (Python "
                         "before 3.11 ignores PYTHONSAFEPATH; use a newer one)")
            continue
        root = root_of(where, roots) if where.startswith("/") else None
        if root is None:
            continue
        if kind == "prog":
            found.append(f"`{name}` resolves to {where}, inside the state root {root}")
        elif kind == "syspath":
            found.append(f"python3 imports from {where}, inside the state root {root}")
    return _refusal(found) if found else None


def _refusal(found: list[str]) -> str:
    shown = "; ".join(found[:4]) + (" ..." if len(found) > 4 else "")
    return (f"the task's image lets the agent's files stand in for the verifier's programs "
            f"({shown}): the agent could plant a program or a .pth file that the "
            f"verifier then runs; {FIX}")
