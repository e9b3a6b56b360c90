"""kill_all ends the agent's processes as a whole before anything is copied (issue 24,
item 4), with nothing from the agent's files: a command still running when the agent
phase ends, which rewrites a file without pause, forks on and on, holds every pid it
may and has replaced /bin/sh (what a kill run inside the session would start), changes
nothing once kill_all has returned, on both backends."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

from posttrain_arena.sandbox.base import Session

# /bin/sh made `true` where the system paths are writable (docker; local binds them
# read-only), a writer that appends to /root/answer.txt without pause (shell builtins only:
# it needs no pid of its own), children that fork on and on (each forks its successor
# and exits), and sleepers up to the pid limit.
ATTACK = r"""
cp /bin/true /bin/sh.new 2>/dev/null && mv -f /bin/sh.new /bin/sh 2>/dev/null
( n=0; while :; do n=$((n+1)); echo $n >> /root/answer.txt; done ) &
( chain() { ( chain & ) ; }; chain ) &
( while :; do sleep 600 & done ) &
wait
"""


def _snapshot(session: Session, tmp: Path, name: str) -> str:
    dest = tmp / name
    session.copy_out("/root/answer.txt", dest)
    return dest.read_text()


def _running(session: Session, tmp: Path) -> None:
    """Returns once the writer has rewritten the file (raises after 20 s without)."""
    seen: set[str] = set()
    for i in range(200):
        with contextlib.suppress(Exception):  # not written yet
            seen.add(_snapshot(session, tmp, f"w{i}"))
        if len(seen) > 1:
            return
        time.sleep(0.1)
    raise AssertionError("the attack never rewrote /root/answer.txt")


def test_no_process_writes_after_kill_all(session: Session, tmp_path: Path) -> None:
    attack = threading.Thread(
        target=lambda: session.exec(["/bin/dash", "-c", ATTACK], timeout=60), daemon=True)
    attack.start()  # the agent's last command, still running at its deadline
    _running(session, tmp_path)
    session.kill_all()
    first = _snapshot(session, tmp_path, "a")
    time.sleep(1.0)  # time enough for a surviving writer to rewrite it many times
    assert _snapshot(session, tmp_path, "b") == first
    attack.join(30)
    assert not attack.is_alive()
