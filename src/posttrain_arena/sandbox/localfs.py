"""The file-system view of a `local` sandbox.

Inside, the host's system directories (/usr, /etc and the /bin, /lib links) are bound
read-only and everything else is hidden. A fixed set of *writable roots* (the workdir,
/root, /tmp, /opt, /srv, /data, /app, /workspace, /home, /var/lib/task, and any other
top-level directory a Dockerfile's WORKDIR or COPY names) are bound read-write from the
session's state directory on the host. This module maps sandbox paths to host paths,
resolving symlinks the way the sandbox would (inside its own view, never on the host),
copies trees without following links, tells what changed in a session's files since
they were copied from the image (`changed_since`), and removes session folders
(`remove_tree`, and `discard` off the caller's thread).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import posixpath
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

from posttrain_arena.sandbox.base import SandboxError, TransferBounds, TransferLimit
from posttrain_arena.sandbox.janitor import later

SYSTEM_RO = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
ETC_ALLOWED = (
    "passwd", "group", "hosts", "host.conf", "nsswitch.conf", "resolv.conf", "gai.conf",
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "alternatives",
    "bash.bashrc", "profile", "profile.d", "environment", "inputrc", "shells", "login.defs",
    "protocols", "services", "networks", "ethertypes", "mime.types", "magic", "magic.mime",
    "ssl", "ca-certificates", "ca-certificates.conf", "os-release", "lsb-release",
    "debian_version", "terminfo", "locale.alias", "locale.gen", "mtab", "python3",
    "python3.*", "perl", "fonts", "java-*", "R", "ImageMagick-*", "vim",
    "xdg", "mailcap", "manpath.config", "matplotlibrc",
)
"""The entries of the host's /etc a local sandbox sees (patterns, read-only): what
programs need to run (users, name service, the loader, shell start-up, TLS roots,
interpreter configuration). Everything else (shadow files, sudoers, ssh keys, the
machine id, the engine's and services' configuration, and configuration that commonly
holds credentials: pip.conf's index URLs, gitconfig's credential helpers and tokens) is
absent."""

ETC_HIDDEN = (
    "private", "*.key", "*.p12", "*.pfx", "*.jks", "netrc", ".netrc", "*credential*",
    "*secret*", "*token*", "*password*", "pip.conf", "gitconfig", ".git-credentials",
    "*.pem.key",
)
"""Names hidden at any depth inside an allowed /etc entry (patterns): private keys
(`ssl/private`, `*.key`, key stores) and files named for credentials. `ssl/certs` (the
public TLS roots) stays; `ssl/private` does not, whoever runs the sandbox."""


SESSION_PREFIX = "arena-local-"
"""Names of local sessions' folders under sessions_dir()."""
TRASH_PREFIX = ".trash-"
"""A session folder renamed aside for removal (discard)."""


def sessions_dir() -> Path:
    """Where session state directories live ($ARENA_LOCAL_SESSIONS or the temp dir)."""
    base = os.environ.get("ARENA_LOCAL_SESSIONS") or tempfile.gettempdir()
    path = Path(base) / "posttrain-arena-sessions"
    path.mkdir(parents=True, exist_ok=True)
    return path


DEFAULT_ROOTS = (
    "/root",
    "/tmp",
    "/opt",
    "/srv",
    "/data",
    "/app",
    "/workspace",
    "/home",
    "/var/lib/task",
)
# Top-level names that never become writable roots (system, or kernel file systems).
_RESERVED_TOP = frozenset({*SYSTEM_RO, "proc", "sys", "dev", "boot", "run", "var"})
_EXTRA_NESTED = ("/var/lib/task",)


def normalize(path: str, cwd: str = "/") -> str:
    """Absolute, normalized sandbox path ('..' cannot climb above /)."""
    joined = path if path.startswith("/") else posixpath.join(cwd, path)
    norm = posixpath.normpath("/" + joined.lstrip("/"))
    return "/" if norm in ("", "//") else norm


def is_under(path: str, root: str) -> bool:
    """Whether sandbox path `path` is `root` or inside it."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def root_for(path: str, roots: list[str] | tuple[str, ...] = DEFAULT_ROOTS) -> str | None:
    """The writable root that `path` falls under, or the new top-level root it would
    need; None if the path is a system location the local backend keeps read-only."""
    for root in sorted(roots, key=len, reverse=True):
        if is_under(path, root):
            return root
    for nested in _EXTRA_NESTED:
        if is_under(path, nested):
            return nested
    parts = path.strip("/").split("/")
    if not parts[0] or parts[0] in _RESERVED_TOP:
        return None
    return "/" + parts[0]


_ETC_ALLOWED_RE = re.compile("|".join(fnmatch.translate(p) for p in ETC_ALLOWED))
_ETC_HIDDEN_RE = re.compile("|".join(fnmatch.translate(p) for p in ETC_HIDDEN), re.IGNORECASE)


def etc_allowed(name: str) -> bool:
    """Whether the sandbox sees the host's /etc/<name> (one match of all the patterns:
    it runs for every entry of /etc each time the view is looked at again)."""
    return _ETC_ALLOWED_RE.match(name) is not None and not etc_hidden(name)


def etc_hidden(name: str) -> bool:
    """Whether an entry named `name` is hidden wherever it is under /etc (ETC_HIDDEN)."""
    return _ETC_HIDDEN_RE.match(name) is not None


def etc_visible(relative: str) -> bool:
    """Whether the sandbox sees the host's /etc/<relative> (e.g. 'ssl/certs/x.pem'): its
    top entry is allowed and no part of it is hidden."""
    parts = [p for p in relative.split("/") if p]
    return bool(parts) and etc_allowed(parts[0]) and not any(etc_hidden(p) for p in parts)


class SandboxFS:
    """Maps a session's sandbox paths to host paths under `state` (its `fs/` directory)."""

    def __init__(
        self, state: Path, roots: list[str], mounts: list[tuple[str, Path, bool]] | None = None
    ) -> None:
        self.state = state
        self.roots = sorted(set(roots), key=len, reverse=True)
        # (sandbox target, host source, writable), innermost first
        self.mounts = sorted(mounts or [], key=lambda m: len(m[0]), reverse=True)

    def host_of(self, path: str) -> tuple[Path | None, bool]:
        """(host path, writable) of a normalized sandbox path, without resolving links."""
        for target, source, writable in self.mounts:
            if is_under(path, target):
                rel = path[len(target) :].lstrip("/")
                return (source / rel if rel else source), writable
        for root in self.roots:
            if is_under(path, root):
                return self.state / path.lstrip("/"), True
        parts = path.strip("/").split("/")
        if parts[0] == "etc" and len(parts) > 1 and not etc_visible("/".join(parts[1:])):
            return None, False
        if parts[0] in SYSTEM_RO:
            return Path(path), False
        if path == "/":
            return None, False
        return None, False

    def resolve(self, path: str, *, follow_last: bool = False) -> str:
        """Resolve symlinks in `path` as the sandbox sees them (absolute targets stay in
        the sandbox's view). The last component is left alone unless follow_last."""
        parts = [p for p in normalize(path).split("/") if p]
        cur = "/"
        hops = 0
        i = 0
        while i < len(parts):
            nxt = posixpath.join(cur, parts[i])
            host, _ = self.host_of(nxt)
            last = i == len(parts) - 1
            if host is not None and host.is_symlink() and (follow_last or not last):
                hops += 1
                if hops > 40:
                    raise SandboxError(f"{path}: too many levels of symbolic links")
                target = os.readlink(host)
                new = normalize(target, cwd=cur)
                parts = [p for p in new.split("/") if p] + parts[i + 1 :]
                cur, i = "/", 0
                continue
            cur, i = nxt, i + 1
        return cur

    def host_path(self, path: str, *, write: bool) -> Path:
        """Host location of a sandbox path (intermediate links resolved in the sandbox);
        SandboxError when it is outside what the sandbox can see or, for write, change."""
        resolved = self.resolve(path)
        host, writable = self.host_of(resolved)
        if host is None or (write and not writable):
            what = "writable" if write else "visible"
            raise SandboxError(
                f"{path}: not a {what} path of the local sandbox (writable roots: "
                f"{', '.join(sorted(self.roots))}); the docker backend has a full file system"
            )
        return host


MAX_COPY_DEPTH = 256
"""Directory levels a bounded copy out brings to the host, at most."""

MAX_COPY_PATH = 3072
"""Bytes of a path (relative to the copy's root) a bounded copy out brings, at most:
with the host directory in front it stays under PATH_MAX, and every walk of the copy
on the host stays far from Python's recursion limit."""


class Budget:
    """Counts a copy against its TransferBounds; TransferLimit once one is passed. Every
    bounded copy is also bounded in depth and path length (MAX_COPY_DEPTH,
    MAX_COPY_PATH), checked before an entry lands on the host."""

    def __init__(self, bounds: TransferBounds | None, what: str) -> None:
        self.bounds = bounds or TransferBounds()
        self.what = what
        self.entries = 0
        self.bytes = 0

    def add(self, size: int = 0, name: str | bytes = "") -> None:
        """Count one entry of `size` bytes at `name` (its path relative to the copy's
        root); checks the deadline every 256 entries."""
        b = self.bounds
        self.entries += 1
        self.bytes += size
        raw = name if isinstance(name, bytes) else name.encode("utf-8", "surrogateescape")
        if raw.count(b"/") >= MAX_COPY_DEPTH:
            raise TransferLimit(f"{self.what} is more than {MAX_COPY_DEPTH} directories deep")
        if len(raw) > MAX_COPY_PATH:
            raise TransferLimit(f"{self.what} holds a path longer than {MAX_COPY_PATH} bytes")
        if b.max_entries is not None and self.entries > b.max_entries:
            raise TransferLimit(f"{self.what} holds more than {b.max_entries} files and "
                                "directories")
        if b.max_bytes is not None and self.bytes > b.max_bytes:
            raise TransferLimit(f"{self.what} holds more than {b.max_bytes >> 20} MiB")
        if b.deadline is not None and self.entries % 256 == 0 and time.monotonic() > b.deadline:
            raise TransferLimit(f"copying {self.what} ran past its deadline "
                                f"({self.entries} entries copied)")


def copy_tree(src: Path, dest: Path, budget: Budget | None = None, _name: str = "") -> None:
    """Copy a file, link or directory from src to dest: links recreated as links (never
    followed), regular files and directories copied, devices/fifos/sockets skipped.
    With a budget, every entry counts against it (TransferLimit when passed; its depth
    bound is what keeps this recursion short)."""
    st = os.lstat(src)
    if budget is not None:
        budget.add(st.st_size if stat.S_ISREG(st.st_mode) else 0, _name)
    if stat.S_ISLNK(st.st_mode):
        _replace_with_link(dest, os.readlink(src))
    elif stat.S_ISDIR(st.st_mode):
        if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
            dest.unlink()
        dest.mkdir(parents=True, exist_ok=True)
        with os.scandir(src) as it:
            for entry in it:
                copy_tree(Path(entry.path), dest / entry.name, budget,
                          f"{_name}/{entry.name}" if _name else entry.name)
        shutil.copystat(src, dest, follow_symlinks=False)
    elif stat.S_ISREG(st.st_mode):
        if dest.is_symlink() or dest.is_dir():
            _remove(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest, follow_symlinks=False)


def _replace_with_link(dest: Path, target: str) -> None:
    if dest.is_symlink() or dest.exists():
        _remove(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, dest)


def remove_tree(path: Path | str) -> None:
    """Remove a directory tree of any depth and path length that a sandbox wrote (or a
    file or link: removed, never followed), quietly. Iterative and relative to one open
    directory: every subdirectory's entries are moved up into the top directory before
    it is removed, so no path grows and no recursion is needed (shutil.rmtree recursed
    past Python's limit on a tree 1,000 levels deep and left it on the host)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        top = os.open(path, flags)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    moved = 0
    try:
        while names := os.listdir(top):
            for name in names:
                try:
                    os.unlink(name, dir_fd=top)
                    continue
                except OSError:
                    pass
                with contextlib.suppress(OSError):
                    os.chmod(name, 0o700, dir_fd=top, follow_symlinks=False)
                try:
                    sub = os.open(name, flags, dir_fd=top)
                except OSError:
                    return  # neither a file nor a directory we may open: give up quietly
                try:
                    for child in os.listdir(sub):
                        while True:
                            moved += 1
                            up = f".arena-rm-{moved}"
                            try:
                                os.lstat(up, dir_fd=top)
                            except FileNotFoundError:
                                break
                        os.rename(child, up, src_dir_fd=sub, dst_dir_fd=top)
                finally:
                    os.close(sub)
                with contextlib.suppress(OSError):
                    os.rmdir(name, dir_fd=top)
    except OSError:
        return
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    else:
        path.unlink()


def discard(directory: Path) -> None:
    """Delete a session directory without making the caller wait: rename it aside (one
    metadata operation) and let the janitor remove it (unlinking is slow on file
    systems mounted with `discard`); the process waits for that before it exits. What a
    crash leaves, `reap_local` removes."""
    trash = directory.with_name(TRASH_PREFIX + directory.name)
    try:
        directory.rename(trash)
    except OSError:
        remove_tree(directory)
        return
    later(lambda: remove_tree(trash))


def changed_since(fs: SandboxFS, base_fs: Path | None, since_ns: int) -> list[str]:
    """Sandbox paths of `fs`'s writable roots changed, added or deleted since the copy of
    the image's files `base_fs` was made (at `since_ns`), read on the host: an inode whose
    ctime (which no process can set) is later, an entry the image lacks, an entry of the
    image gone. None: every entry counts as added."""
    changed: set[str] = set()
    for root in fs.roots:
        here = fs.state / root.lstrip("/")
        base = base_fs / root.lstrip("/") if base_fs is not None else None
        for host, path in _walk(here, root):
            try:
                st = os.lstat(host)
            except OSError:
                continue
            if st.st_ctime_ns > since_ns or base is None or not os.path.lexists(
                    base / os.path.relpath(host, here)):
                changed.add(path)
        if base is not None:
            for host, path in _walk(base, root):
                if not os.path.lexists(here / os.path.relpath(host, base)):
                    changed.add(path)
    return sorted(changed)


def _walk(host_root: Path, root: str) -> list[tuple[Path, str]]:
    """(host path, sandbox path) of every entry under a root's host directory, links
    never followed: iterative, and no deeper than a bounded copy goes (MAX_COPY_DEPTH;
    what lies deeper cannot travel anyway) nor through a path the host cannot open."""
    found: list[tuple[Path, str]] = []
    if not os.path.isdir(host_root) or os.path.islink(host_root):
        return found
    todo: list[tuple[str, str, int]] = [(str(host_root), root.rstrip("/"), 0)]
    while todo:
        host, sandbox, depth = todo.pop()
        try:
            with os.scandir(host) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        except OSError:
            continue
        for name, is_dir in entries:
            found.append((Path(host) / name, f"{sandbox}/{name}"))
            if is_dir and depth + 1 < MAX_COPY_DEPTH:
                todo.append((os.path.join(host, name), f"{sandbox}/{name}", depth + 1))
    return found
