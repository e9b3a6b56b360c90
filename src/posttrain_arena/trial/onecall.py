"""Fresh verification in one exec: the agent's state in through stdin, then the verifier.

The plain path takes two engine round trips after the agent's state is fetched: copy
the state in (an archive upload, which costs the engine a helper process), then run the
verifier (an exec). Where the state is small, one exec does both with the pristine
image's own `/bin/sh` and `tar`:

    empty the roots and the output directory, tar -x < state  ──▶  exec the supervisor

The wrapper runs before any of the agent's code can (nothing from the state has run
yet) and ends by exec'ing the supervised verifier, so the verifier's output is read
exactly as on the plain path (verification.run: halt, then copy out). When the wrapper
cannot restore the state (no tar in the image) it exits with STATE_FAILED before the
supervisor starts; the caller then goes the plain way in a new pristine session.
"""

from __future__ import annotations

from posttrain_arena.trial.verifier import LOGS_DIR, PINNED_PATH

MAX_STATE_BYTES = 64 << 20
"""Larger state goes the plain way (the archive is held in memory)."""

STATE_FAILED = 86
"""The wrapper's exit status when the state could not be restored."""

_WRAP = "PATH=" + PINNED_PATH + r"""
logs=$1; n=$2; shift 2
while [ "$n" -gt 0 ]; do
  p=$1; shift; n=$((n - 1))
  if [ -d "$p" ] && [ ! -L "$p" ]; then
    find "$p" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} + || exit 86
  else rm -rf -- "$p" || exit 86; fi
done
rm -rf -- "$logs" && mkdir -p -m 0755 -- "$logs" || exit 86
tar --numeric-owner -xpf - -C / || exit 86
exec "$@"
"""


def wrapper(roots: list[str]) -> list[str]:
    """The argv prefix that empties `roots` and the output directory, restores the state
    from stdin, then execs the rest of the argv (the supervised verifier)."""
    return ["/bin/sh", "-c", _WRAP, "arena-verify", LOGS_DIR, str(len(roots)), *roots]
