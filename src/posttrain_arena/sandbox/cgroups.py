"""Control groups for `local` sessions: process, memory and CPU limits, and a kill switch.

rlimits alone cannot cap processes for a sandbox that runs as host root (the kernel
exempts root from RLIMIT_NPROC), so where the cgroup filesystem is writable each local
session gets its own group in the pids, memory and cpu hierarchies (v1) or one group
(v2). Everything a session starts is in it, so killing the session means killing the
group's members. Where no group can be made, callers fall back to rlimits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from posttrain_arena.sandbox.base import Limits

ROOT = Path("/sys/fs/cgroup")
GROUP = "posttrain-arena"
_V1_CONTROLLERS = ("pids", "memory", "cpu")


def _own_path(controller: str) -> str:
    """This process's cgroup path in a v1 hierarchy (or v2 when controller is '')."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if controller in names.split(",") or (not controller and names == ""):
                return path
    except OSError:
        pass
    return "/"


def _write(path: Path, value: str) -> None:
    path.write_text(value)


class SessionCgroup:
    """The cgroups of one session (v1: one per controller; v2: a single group)."""

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs

    @classmethod
    def create(cls, name: str, limits: Limits) -> SessionCgroup | None:
        """Make the session's groups with limits applied; None where cgroups are not
        writable here (then the caller relies on rlimits)."""
        if os.environ.get("ARENA_LOCAL_NO_CGROUPS") == "1":
            return None
        if (ROOT / "cgroup.controllers").is_file():
            return cls._create_v2(name, limits)
        return cls._create_v1(name, limits)

    @classmethod
    def _create_v1(cls, name: str, limits: Limits) -> SessionCgroup | None:
        dirs: list[Path] = []
        try:
            for ctrl in _V1_CONTROLLERS:
                base = ROOT / ctrl
                if not (base / "cgroup.procs").is_file():
                    if ctrl == "pids":
                        return None
                    continue
                d = _make_dir(base, ctrl, name)
                dirs.append(d)
                if ctrl == "pids":
                    _write(d / "pids.max", str(limits.pids_limit))
                elif ctrl == "memory":
                    _write(d / "memory.limit_in_bytes", str(limits.memory_mb << 20))
                    memsw = d / "memory.memsw.limit_in_bytes"
                    if memsw.exists():
                        with contextlib.suppress(OSError):
                            _write(memsw, str(limits.memory_mb << 20))
                elif ctrl == "cpu":
                    _write(d / "cpu.cfs_period_us", "100000")
                    _write(d / "cpu.cfs_quota_us", str(max(1000, int(limits.cpus * 100_000))))
        except OSError:
            SessionCgroup(dirs).remove()
            return None
        return cls(dirs)

    @classmethod
    def _create_v2(cls, name: str, limits: Limits) -> SessionCgroup | None:
        try:
            parent = ROOT / _own_path("").lstrip("/") / GROUP
            parent.mkdir(exist_ok=True)
            with contextlib.suppress(OSError):
                _write(parent.parent / "cgroup.subtree_control", "+pids +memory +cpu")
            _write(parent / "cgroup.subtree_control", "+pids +memory +cpu")
            d = parent / name
            d.mkdir()
            _write(d / "pids.max", str(limits.pids_limit))
            _write(d / "memory.max", str(limits.memory_mb << 20))
            with contextlib.suppress(OSError):
                _write(d / "memory.swap.max", "0")
            _write(d / "cpu.max", f"{max(1000, int(limits.cpus * 100_000))} 100000")
        except OSError:
            return None
        return cls([d])

    def enter(self) -> None:
        """Move the calling process into the groups (used in a child before exec)."""
        for d in self.dirs:
            with open(d / "cgroup.procs", "w") as fh:
                fh.write("0")

    def pids(self) -> set[int]:
        """Every process in the session's groups."""
        out: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError):
                out.update(int(p) for p in (d / "cgroup.procs").read_text().split())
        return out

    def kill(self, rounds: int = 200) -> None:
        """SIGKILL every member until none is left (new forks are caught next round)."""
        for _ in range(rounds):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)

    def oom_killed(self) -> bool:
        """Whether the memory limit killed something in this session."""
        for d in self.dirs:
            for name in ("memory.oom_control", "memory.events"):
                with contextlib.suppress(OSError):
                    text = (d / name).read_text()
                    for line in text.splitlines():
                        key, _, value = line.partition(" ")
                        if key in ("oom_kill", "oom_group_kill") and value.strip() not in ("", "0"):
                            return True
        return False

    def remove(self) -> None:
        """Kill what is left and delete the groups (retries briefly while exits settle)."""
        self.kill()
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)


def _make_dir(base: Path, ctrl: str, name: str) -> Path:
    """<base>/<our own group>/posttrain-arena/<name>, falling back to the hierarchy root."""
    for parent in (base / _own_path(ctrl).lstrip("/") / GROUP, base / GROUP):
        try:
            parent.mkdir(exist_ok=True)
            d = parent / name
            d.mkdir()
            return d
        except OSError:
            continue
    raise OSError(f"cannot create a {ctrl} cgroup")


def reap_stale(max_age_sec: float, dead: set[str]) -> int:
    """Remove session groups older than max_age, and younger ones of the sessions in
    `dead` (whose owners are gone) that have no members; returns how many. A young
    group of any other name is left alone: its session may live in another process's
    sessions folder (ARENA_LOCAL_SESSIONS), idle between two execs, and a reap that
    removed its group made its next exec fail."""
    removed = 0
    now = time.time()
    for base in [*(ROOT / c for c in _V1_CONTROLLERS), ROOT]:
        ctrl = base.name if base != ROOT else ""
        for parent in {base / _own_path(ctrl).lstrip("/") / GROUP, base / GROUP}:
            if not parent.is_dir():
                continue
            for d in parent.iterdir():
                if not d.is_dir():
                    continue
                try:
                    group = SessionCgroup([d])
                    young = now - d.stat().st_mtime < max_age_sec
                    if young and (d.name not in dead or group.pids()):
                        continue  # maybe a live session, or a build still running
                    group.remove()
                    if not d.exists():
                        removed += 1
                except OSError:
                    continue
    return removed
