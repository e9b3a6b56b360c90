"""PID 1 of a docker session (the anchor), and how every other process is ended.

The anchor is the image's /bin/sh, started before any agent runs, so what it runs is
in memory by the time the agent could replace a file. It waits forever, reaps orphans
(dash's wait collects any child), and restarts its sleep when a kill takes it. Its sleep
is found once, by absolute path, before any agent runs: never by PATH lookup, so no
program planted on a PATH directory is what PID 1 restarts between phases (a change to
those paths voids shared verification: shared.runtime_changes).

`end_all_but_anchor` ends every other process without starting anything from the
session's files (an agent may have replaced /bin/sh, which a kill run as an exec would
start): the engine sends PID 1 SIGUSR1 and its trap runs the shell's own `kill -9 -1`,
which the kernel delivers to every process of the pid namespace but PID 1 as one step
(a fork either ends before it, and its child is killed too, or fails). It returns once
the engine lists no live process but PID 1 and its sleep, so nothing the agent started
can still write while the state is copied.
"""

from __future__ import annotations

import time
from typing import Any

from posttrain_arena.sandbox.base import SandboxError

SLEEP_ARG = "2147483647"
ANCHOR = ("trap 'exit 0' TERM INT; trap 'kill -9 -1' USR1; "
          "for s in /bin/sleep /usr/bin/sleep /usr/local/bin/sleep; do "
          "[ -x \"$s\" ] && break; done; "
          f"while :; do \"$s\" {SLEEP_ARG} & wait $!; done")

END_WAIT_SEC = 10.0
"""How long the session's other processes may take to die (a SIGKILL is seconds at most
even for a process with gigabytes mapped); past it the session is a SandboxError."""


def end_all_but_anchor(api: Any, container: str, sid: str) -> None:
    """SIGKILL every process of the container but PID 1, by PID 1 (see the module), and
    wait until they are gone. A container that is no longer running has none left."""
    import docker.errors

    try:
        anchor = int(api.inspect_container(container)["State"]["Pid"])
        deadline = time.monotonic() + END_WAIT_SEC
        while True:
            api.kill(container, signal="SIGUSR1")  # again each round: one trap is enough
            time.sleep(0.005)
            left = _others(api.top(container, ps_args="-o pid,ppid,stat,args"), anchor)
            if not left:
                return
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"session {sid}: processes outlived {END_WAIT_SEC:g} s of SIGKILL from "
                    f"its PID 1 ({'; '.join(left[:5])}); the session cannot be trusted, "
                    "stop it")
            time.sleep(0.02)
    except docker.errors.APIError as exc:
        if "is not running" in str(exc) or "No such container" in str(exc):
            return  # PID 1 ended, and with it every process of its namespace
        raise SandboxError(f"cannot end the processes of session {sid}: {exc}") from exc


def _others(top: dict[str, Any], anchor: int) -> list[str]:
    """The live processes of a `top` listing other than PID 1 and one sleep of its own
    (zombies are dead: PID 1 reaps them)."""
    rows = [dict(zip(top["Titles"], row, strict=False)) for row in top["Processes"]]
    live = [r for r in rows if not str(r.get("STAT", "")).startswith("Z")
            and int(r["PID"]) != anchor]
    own = [r for r in live if int(r["PPID"]) == anchor
           and str(r.get("COMMAND", "")).endswith(f"sleep {SLEEP_ARG}")]
    if len(own) == 1:
        live.remove(own[0])
    return [f"{r['PID']} {r.get('COMMAND', '')}" for r in live]
