"""bubblewrap command lines of the `local` backend: the sandbox's file-system view,
namespaces and capabilities (see local.py for the session around them)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from posttrain_arena.sandbox.base import SESSION_CAPABILITIES, Mount, PrerequisiteError
from posttrain_arena.sandbox.localfs import SYSTEM_RO, SandboxFS, etc_allowed


def bwrap_path() -> str:
    """The bwrap binary, or PrerequisiteError saying how to install it."""
    found = shutil.which("bwrap")
    if found is None:
        raise PrerequisiteError(
            "bubblewrap is not installed; fix: apt-get install bubblewrap "
            "(or use the docker backend)"
        )
    return found


def base_bwrap_args(
    fs: SandboxFS,
    *,
    allow_internet: bool,
    mounts: list[Mount] | None = None,
) -> list[str]:
    """bwrap arguments for the sandbox's file-system view and namespaces."""
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--hostname", "arena"]
    # bwrap run by root keeps every capability unless told otherwise (it always sets
    # no_new_privs): keep only the sessions' set
    args += ["--cap-drop", "ALL"]
    for cap in SESSION_CAPABILITIES:
        args += ["--cap-add", f"CAP_{cap}"]
    if allow_internet:
        args.append("--share-net")
    for name in SYSTEM_RO:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif name == "etc":
            args += _etc_args()
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    args += ["--dev", "/dev", "--proc", "/proc"]
    for root in sorted(fs.roots, key=len):
        host = fs.state / root.lstrip("/")
        host.mkdir(parents=True, exist_ok=True)
        args += ["--bind", str(host), root]
    for m in mounts or []:
        args += ["--ro-bind" if m.read_only else "--bind", str(m.source), m.target]
    args += ["--remount-ro", "/"]
    return args


def _etc_args() -> list[str]:
    """bwrap arguments giving the sandbox only the allowed entries of the host's /etc
    (listed again whenever /etc itself changes: an entry added, removed or renamed)."""
    global _etc_cache
    key = os.stat("/etc").st_mtime_ns
    cached = _etc_cache
    if cached is not None and cached[0] == key:
        return list(cached[1])
    args = ["--dir", "/etc"]
    with os.scandir("/etc") as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if not etc_allowed(entry.name):
                continue
            if entry.is_symlink():
                args += ["--symlink", os.readlink(entry.path), f"/etc/{entry.name}"]
            else:
                args += ["--ro-bind", entry.path, f"/etc/{entry.name}"]
    _etc_cache = (key, tuple(args))
    return args


_etc_cache: tuple[int, tuple[str, ...]] | None = None
"""(mtime of /etc, its arguments): /etc is listed once, not for every command."""
