"""bubblewrap command lines of the `local` backend: the sandbox's file-system view,
namespaces and capabilities (see local.py for the session around them)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from posttrain_arena.sandbox.base import SESSION_CAPABILITIES, Mount, PrerequisiteError
from posttrain_arena.sandbox.localfs import (
    SYSTEM_RO,
    SandboxFS,
    etc_allowed,
    etc_hidden,
    sessions_dir,
)


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


ETC_VIEW_PREFIX = "etc-view-"
"""Directories under sessions_dir() holding a copy of a sandbox's /etc (see _etc_args);
the reaper removes old ones."""

ETC_RECHECK_SEC = 1.0
"""How often /etc is looked at again for a change (its directories' mtimes)."""


@dataclass
class _EtcArgs:
    key: str
    args: tuple[str, ...]
    checked: float
    stamp: tuple[tuple[str, int], ...]
    view: str | None  # the view directory the args bind (None: one bind per entry)


_etc_cache: _EtcArgs | None = None


def _etc_args() -> list[str]:
    """bwrap arguments giving the sandbox only the allowed entries of the host's /etc.

    One bind of a view directory (sessions_dir()/etc-view-KEY) that holds copies of the
    allowed entries (never hard links: a file removed from /etc must not live on in a
    view), their links and directories recreated, hidden names (private keys,
    credentials: localfs.ETC_HIDDEN) left out: one mount instead of one per entry, whose
    set-up and tear-down is most of a bwrap start's wall time. An entry that cannot be
    copied (unreadable to the harness) is bound over its placeholder in the view, with
    its hidden names covered. KEY is the mtimes of /etc and of every allowed directory
    under it (and the inode of every other allowed entry), looked at again at most once
    a second, so a file added, removed or replaced there makes a new view. Looking
    again stats only what the key was made from (see _etc_stamp); /etc is listed and
    walked again only when one of those changed. Without a usable view, one bind per
    entry."""
    global _etc_cache
    now = time.monotonic()
    cached = _etc_cache
    if cached is not None and cached.view is not None and not os.path.isdir(cached.view):
        cached = None  # its view was removed (by a reaper elsewhere): build it again
    if cached is not None and now - cached.checked < ETC_RECHECK_SEC:
        return list(cached.args)
    if cached is not None and _stamp_holds(cached.stamp):
        cached.checked = now
        return list(cached.args)
    names = _etc_entries()
    stamp = _etc_stamp(names)
    key = _stamp_key(stamp)
    if cached is not None and cached.key == key:
        cached.checked, cached.stamp = now, stamp
        return list(cached.args)
    bound = _view_args(names, key)
    args, view = bound if bound is not None else (_bind_args(names), None)
    _etc_cache = _EtcArgs(key, tuple(args), now, stamp, view)
    return args


def current_etc_view() -> str:
    """The name of the view directory that /etc as it is now maps to (in sessions_dir())."""
    return f"{ETC_VIEW_PREFIX}{_etc_key(_etc_entries())}"


def _etc_entries(etc: str = "/etc") -> list[str]:
    with os.scandir(etc) as entries:
        return sorted(e.name for e in entries if etc_allowed(e.name))


def _etc_stamp(names: list[str], etc: str = "/etc") -> tuple[tuple[str, int], ...]:
    """What the view's key is made from: (path, mtime) of /etc and of every directory
    under an allowed entry (an entry added, removed or renamed in a directory changes
    its mtime), (path, inode) of every other allowed entry (replaced: a new inode)."""
    stamp = [(etc, os.stat(etc).st_mtime_ns)]
    for name in names:
        top = f"{etc}/{name}"
        if os.path.islink(top) or not os.path.isdir(top):
            info = os.lstat(top)  # the view holds a copy: an edit in place changes it too
            stamp.append((f"{top}:ino", info.st_ino))
            stamp.append((f"{top}:mtime", info.st_mtime_ns))
            continue
        for dirpath, _dirs, _files in os.walk(top):  # never descends through a link
            stamp.append((dirpath, os.lstat(dirpath).st_mtime_ns))
    return tuple(stamp)


def _stamp_holds(stamp: tuple[tuple[str, int], ...]) -> bool:
    """Whether every path of `stamp` still has its mtime (its inode, for ':ino'): then
    /etc lists and walks as it did, and the key is the same. One stat per path."""
    try:
        for path, value in stamp:
            if path.endswith(":ino"):
                if os.lstat(path[:-4]).st_ino != value:
                    return False
            elif path.endswith(":mtime"):
                if os.lstat(path[:-6]).st_mtime_ns != value:
                    return False
            elif (os.stat(path) if path == stamp[0][0] else os.lstat(path)
                  ).st_mtime_ns != value:
                return False
    except OSError:
        return False
    return True


def _stamp_key(stamp: tuple[tuple[str, int], ...]) -> str:
    return hashlib.sha256(repr(stamp).encode()).hexdigest()[:20]


def _etc_key(names: list[str], etc: str = "/etc") -> str:
    return _stamp_key(_etc_stamp(names, etc))


def _bind_args(names: list[str]) -> list[str]:
    args = ["--dir", "/etc"]
    for name in names:
        path = f"/etc/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind", path, path, *_hide_args(path)]
    return args


def _hide_args(top: str) -> list[str]:
    """Mounts covering the hidden names (localfs.ETC_HIDDEN) inside a bound directory:
    an empty tmpfs over a directory, /dev/null over anything else."""
    args: list[str] = []
    for dirpath, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            if etc_hidden(name):
                full = f"{dirpath}/{name}"
                args += (["--tmpfs", full] if os.path.isdir(full) and not os.path.islink(full)
                         else ["--ro-bind", "/dev/null", full])
        dirs[:] = [d for d in dirs if not etc_hidden(d)]
    return args


def _view_args(names: list[str], key: str) -> tuple[list[str], str] | None:
    """Arguments binding the view for `key` (built when missing) and the view's path,
    or None."""
    view = sessions_dir() / f"{ETC_VIEW_PREFIX}{key}"
    listing = view.with_name(view.name + ".unlinked")  # beside it: the sandbox sees the view
    if not view.is_dir():
        tmp = view.with_name(f".{view.name}-{uuid.uuid4().hex[:8]}")
        try:
            unlinked = _build_view(names, tmp)
            tmp_listing = tmp.with_name(tmp.name + ".unlinked")
            tmp_listing.write_text("".join(f"{n}\n" for n in unlinked))
            os.replace(tmp_listing, listing)  # before the view: a view never lacks it
            os.rename(tmp, view)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not view.is_dir():  # another process's build may have won the race
                return None
    try:
        unlinked = listing.read_text().split()
    except OSError:
        return None
    args = ["--ro-bind", str(view), "/etc"]
    for name in unlinked:
        args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}", *_hide_args(f"/etc/{name}")]
    return args, str(view)


def _build_view(names: list[str], dest: Path, etc: str = "/etc") -> list[str]:
    """Fill `dest` with the allowed entries; the names that could not be linked (left
    as empty placeholders of the same kind, for a bind over them)."""
    dest.mkdir(mode=0o755)
    unlinked: list[str] = []
    for name in names:
        src = f"{etc}/{name}"
        try:
            _mirror(src, dest / name)
        except OSError:
            shutil.rmtree(dest / name, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(dest / name)
            if os.path.isdir(src):
                (dest / name).mkdir()
            else:
                (dest / name).touch()
            unlinked.append(name)
    return unlinked


def _mirror(src: str, dst: Path) -> None:
    """Copy a file (a copy, never a hard link: a file later removed from /etc must not
    live on in a view, nor a view share the host's inode), recreate a link, recreate a
    directory and recurse, leaving out hidden names (localfs.ETC_HIDDEN: private keys,
    credentials); other kinds (devices, sockets, fifos) are left out."""
    info = os.lstat(src)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(src), dst)
    elif stat.S_ISREG(info.st_mode):
        shutil.copy2(src, dst, follow_symlinks=False)
        os.chmod(dst, stat.S_IMODE(info.st_mode) & 0o555)
    elif stat.S_ISDIR(info.st_mode):
        os.mkdir(dst)
        with os.scandir(src) as entries:
            for entry in entries:
                if not etc_hidden(entry.name):
                    _mirror(entry.path, dst / entry.name)
        os.chmod(dst, stat.S_IMODE(info.st_mode))
