"""Remove what a crashed process left behind: labelled containers, local session state.

A container or local session is an orphan when its owner process (recorded at start:
the `posttrain-arena.owner` label, or the session's `owner` file) is gone from this host,
or when it is older than `max_age_sec` whoever owns it. Called when the docker backend
connects (for sessions older than ARENA_REAP_AFTER_HOURS, default 6) and by
`arena sandbox reap`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from posttrain_arena.sandbox.base import PrerequisiteError
from posttrain_arena.sandbox.bwrap import ETC_VIEW_PREFIX, current_etc_view
from posttrain_arena.sandbox.cgroups import reap_stale
from posttrain_arena.sandbox.diskcap import mounts_under, unmount_under
from posttrain_arena.sandbox.docker_disk import OUTPUT_PREFIX
from posttrain_arena.sandbox.engine import LABEL, docker_client
from posttrain_arena.sandbox.localfs import SESSION_PREFIX, TRASH_PREFIX, remove_tree, sessions_dir
from posttrain_arena.sandbox.owner import pid_namespace


@dataclass
class ReapReport:
    """What a reap removed."""

    containers: list[str] = field(default_factory=list)
    local_sessions: list[str] = field(default_factory=list)
    cgroups: int = 0
    notes: list[str] = field(default_factory=list)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner_dead(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    namespace, _, pid = rest.rpartition(":")
    if host != socket.gethostname() or namespace != pid_namespace() or not pid.isdigit():
        return False  # another machine's or namespace's container: only age condemns it
    return not _pid_alive(int(pid))


def _age(path: os.PathLike[str], now: float) -> float | None:
    """Seconds since `path` last changed, or None when it is gone: other processes create
    and remove session entries while a reap walks the folder (a trial emptying its trash,
    another reap), and an entry that vanished needs no reaping."""
    try:
        return now - os.stat(path, follow_symlinks=False).st_mtime
    except FileNotFoundError:
        return None


def reap_docker(
    max_age_sec: float, *, client: Any = None, match: Mapping[str, str] | None = None
) -> list[str]:
    """Force-remove labelled containers whose owner died or that are older than
    max_age_sec (only those that also carry every label in `match`); returns their names."""
    import docker.errors

    if client is None:
        client = docker_client()
    removed: list[str] = []
    now = time.time()
    wanted = [f"{LABEL}=1", *(f"{k}={v}" for k, v in (match or {}).items())]
    for c in client.api.containers(all=True, filters={"label": wanted}):
        labels = c.get("Labels") or {}
        owner = labels.get(f"{LABEL}.owner", "")
        too_old = now - float(c.get("Created", now)) > max_age_sec
        if too_old or (owner and _owner_dead(owner)):
            with contextlib.suppress(docker.errors.NotFound):
                _detach_layer(client.api, c["Id"])
                client.api.remove_container(c["Id"], force=True, v=True)
                names = c.get("Names") or [c["Id"][:12]]
                removed.append(str(names[0]).lstrip("/"))
    return removed


def _detach_layer(api: Any, container: str) -> None:
    """Take a session's disk off the container's layer directory (docker_disk) before
    the engine removes the container: the container is killed first (the engine then
    unmounts the layer), then every mount under the layer directory detached."""
    data = (api.inspect_container(container).get("GraphDriver") or {}).get("Data") or {}
    upper = data.get("UpperDir")
    if not upper or not mounts_under(os.path.dirname(upper)):
        return
    import docker.errors

    with contextlib.suppress(docker.errors.APIError):
        api.kill(container)
        api.wait(container, timeout=60, condition="not-running")
    unmount_under(os.path.dirname(upper))


def reap_local(max_age_sec: float) -> tuple[list[str], int]:
    """Delete local session directories (and stale cgroups) whose owner died or that are
    older than max_age_sec; returns (session names, cgroups removed)."""
    removed: list[str] = []
    now = time.time()
    # The view of /etc as it is now is in use by every process on this host, however old
    # it is; any other was made for an /etc since changed (or a test's), and is unused
    # once every process has looked again (ETC_RECHECK_SEC).
    in_use = current_etc_view()
    views = [d for d in sessions_dir().iterdir()
             if d.name.startswith(ETC_VIEW_PREFIX) and d.is_dir() and d.name != in_use]
    for d in views:
        if (_age(d, now) or 0.0) > max(max_age_sec, 60):
            shutil.rmtree(d, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.unlink(d.with_name(d.name + ".unlinked"))
    for d in sessions_dir().iterdir():
        if d.name.startswith(TRASH_PREFIX):
            if (_age(d, now) or 0.0) > 60:
                remove_tree(d)  # a process ended before emptying its trash
            continue
        if not d.name.startswith((SESSION_PREFIX, OUTPUT_PREFIX)) or not d.is_dir():
            continue  # (a docker session's host output directory has an owner file too)
        try:
            fields = (d / "owner").read_text().split()
            pid, born = int(fields[0]), float(fields[1])
            namespace = fields[2] if len(fields) > 2 else pid_namespace()
        except (OSError, ValueError, IndexError):
            age = _age(d, now)
            if age is None:
                continue  # removed by its owner while this reap looked
            pid, born, namespace = -1, now - age, ""
        if pid < 0 and now - born < 60:
            continue  # being created right now
        owner_gone = pid > 0 and namespace == pid_namespace() and not _pid_alive(pid)
        if owner_gone or now - born > max_age_sec or pid < 0:
            unmount_under(d)  # its disk: the loop device and its blocks go with it
            remove_tree(d)
            removed.append(d.name)
    return removed, reap_stale(max_age_sec, set(removed))


def reap_orphans(max_age_sec: float = 6 * 3600) -> ReapReport:
    """Reap both backends; a backend that is not available here is noted, not an error."""
    report = ReapReport()
    try:
        report.containers = reap_docker(max_age_sec)
    except PrerequisiteError as exc:
        report.notes.append(f"docker: skipped ({exc})")
    report.local_sessions, report.cgroups = reap_local(max_age_sec)
    return report
