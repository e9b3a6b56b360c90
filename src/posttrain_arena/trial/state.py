"""Moving the agent's final state into the verifier's fresh session.

Only state paths travel: the workdir and the paths task.md declares
(`verifier.state_paths`), never interpreter or system paths. Symbolic links whose
target (resolved as the session sees it) leaves those paths are dropped on the way,
so `answer.txt -> /verifier/expected` or `-> /etc/passwd` arrive as missing files.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import posixpath
import shutil
import stat
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from posttrain_arena.sandbox.base import MissingPath, SandboxError, Session, TransferBounds
from posttrain_arena.task_format.trust import state_roots
from posttrain_arena.trial.hostfiles import read_regular, write_file

__all__ = ["SavedState", "StateReport", "StateTooLarge", "clear_roots", "fetch_state",
           "put_state", "state_archive", "state_roots"]


MAX_STATE_ENTRIES = 100_000
"""Files, directories and links the agent's state may hold, all roots together."""

STATE_COPY_SEC = 60.0
"""Deadline for fetching the agent's state out of its session."""


class StateTooLarge(Exception):
    """The agent left more state than the task's storage limit allows to move."""


@dataclass
class StateReport:
    """What moved: the roots copied and the links dropped (and, between fetching and
    putting, the host copy of each root that exists)."""

    copied: list[str] = field(default_factory=list)
    dropped_links: list[str] = field(default_factory=list)
    kbytes: int = 0
    hosts: dict[str, Path] = field(default_factory=dict)


@dataclass
class SavedState:
    """An agent's final state kept on the host after its trial (`TrialRunner.run`
    with `keep_state`): the host copy of each state root that existed, as it was
    fetched for the verifier (bounded, escaping links dropped), and the paths the agent
    changed, added or deleted, as the backend saw them from outside the session
    (`Session.changed_paths`). What `TrialRunner.verify_state` restores into a pristine
    session. The host copies are the agent's files: read them with hostfiles' helpers,
    never through a link."""

    hosts: dict[str, Path]
    changed: list[str]
    kbytes: int = 0

    MANIFEST = "saved-state.json"

    def report(self) -> StateReport:
        """A StateReport over these host copies (what put_state and state_archive take)."""
        return StateReport(kbytes=self.kbytes, hosts=dict(self.hosts))

    @classmethod
    def keep(cls, report: StateReport, changed: list[str], dest: Path) -> SavedState:
        """Move a fetched state's host copies under `dest` and write its manifest."""
        dest.mkdir(parents=True, exist_ok=True)
        hosts: dict[str, Path] = {}
        for i, (root, host) in enumerate(report.hosts.items()):
            target = dest / f"root-{i}"
            try:
                os.replace(host, target)
            except OSError:  # another file system: copied, links kept as links
                shutil.move(host, target)
            hosts[root] = target
        saved = cls(hosts=hosts, changed=sorted(changed), kbytes=report.kbytes)
        write_file(dest / cls.MANIFEST, json.dumps({
            "roots": {r: h.name for r, h in hosts.items()}, "changed": saved.changed,
            "kbytes": saved.kbytes}))
        return saved

    @classmethod
    def load(cls, dest: Path) -> SavedState | None:
        """The state `keep` left under `dest`, or None when none was kept there."""
        try:
            data = json.loads(read_regular(dest / cls.MANIFEST, limit=64 << 20))
        except (OSError, ValueError):
            return None
        hosts = {str(r): dest / str(n) for r, n in data.get("roots", {}).items()}
        return cls(hosts=hosts, changed=[str(p) for p in data.get("changed", [])],
                   kbytes=int(data.get("kbytes", 0)))


def clear_roots(session: Session, roots: list[str], *, logs: str | None = None) -> None:
    """Empty the state roots of a pristine session before the agent's state arrives
    (and create an empty verifier output directory `logs`, when given)."""
    try:
        session.empty(roots, make_dir=logs)
    except (SandboxError, OSError) as exc:
        raise SandboxError(f"cannot prepare the verifier's session: {exc}") from exc


def fetch_state(agent: Session, roots: list[str], scratch: Path, *,
                max_kbytes: int) -> StateReport:
    """Copy each existing root out of the agent's (halted or idle) session into
    `scratch`, within the state bounds (the task's storage limit, MAX_STATE_ENTRIES,
    STATE_COPY_SEC: TransferLimit or StateTooLarge past them), and drop the links
    that escape the roots."""
    report = StateReport()
    hosts: dict[str, Path] = {}
    deadline = time.monotonic() + STATE_COPY_SEC
    entries, kbytes = MAX_STATE_ENTRIES, max_kbytes
    for i, root in enumerate(roots):
        host = scratch / f"state-{i}"
        bounds = TransferBounds(max_entries=entries, max_bytes=kbytes * 1024,
                                deadline=deadline)
        try:
            agent.copy_out(root, host, bounds=bounds)
        except MissingPath:
            continue  # the agent removed it: the verifier sees it absent too
        hosts[root] = host
        used_entries, used_kb = _count(host)
        entries, kbytes = entries - used_entries, kbytes - used_kb
    report.kbytes = sum(_kbytes(h) for h in hosts.values())
    if report.kbytes > max_kbytes:
        raise StateTooLarge(
            f"the agent left {report.kbytes // 1024} MiB in {', '.join(hosts)}; the "
            f"task's storage limit is {max_kbytes // 1024} MiB"
        )
    report.dropped_links = _drop_escaping_links(hosts, roots)
    report.hosts = {r: h for r, h in hosts.items() if h.exists() or h.is_symlink()}
    return report


def put_state(verifier: Session, report: StateReport) -> None:
    """Copy the fetched roots into the (cleared) verifier's session."""
    for root, host in report.hosts.items():
        verifier.copy_in(host, root)
        report.copied.append(root)


def state_archive(report: StateReport) -> bytes:
    """The fetched roots as one uncompressed GNU tar, members named relative to '/' (what
    the harness's supervisor restores under '/'): directories, regular files and links
    (as links), each name as its bytes, no hard links, walked without recursion."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, encoding="utf-8",
                      errors="surrogateescape") as tar:
        for root, host in report.hosts.items():
            for path, arcname in _entries(host, root.lstrip("/")):
                _add(tar, path, arcname)
    return buf.getvalue()


def _entries(host: Path, arcname: str) -> Iterator[tuple[str, str]]:
    """(host path, member name) of `host` and everything under it, parents first, by
    an explicit stack (no recursion limit), links never followed."""
    todo = [(str(host), arcname)]
    while todo:
        path, name = todo.pop()
        yield path, name
        if os.path.isdir(path) and not os.path.islink(path):
            with os.scandir(path) as it:
                children = sorted(e.name for e in it)
            todo.extend((os.path.join(path, c), f"{name}/{c}") for c in reversed(children))


def _add(tar: tarfile.TarFile, path: str, name: str) -> None:
    info = os.lstat(path)
    member = tarfile.TarInfo(name)
    member.mode, member.uid, member.gid = stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid
    member.mtime = int(info.st_mtime)
    if stat.S_ISDIR(info.st_mode):
        member.type = tarfile.DIRTYPE
        tar.addfile(member)
    elif stat.S_ISLNK(info.st_mode):
        member.type, member.linkname = tarfile.SYMTYPE, os.readlink(path)
        tar.addfile(member)
    elif stat.S_ISREG(info.st_mode):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            member.size = os.fstat(fd).st_size
            tar.addfile(member, fh)
    # devices, fifos and sockets are not state (copy_out never brings them)


def _count(root: Path) -> tuple[int, int]:
    """(entries, KiB of file data) under a host copy, never through a link (a root that
    is itself a link counts as one entry: the host's / is never walked)."""
    entries, total = 0, 0
    for path, _name in _entries(root, ""):
        entries += 1
        with contextlib.suppress(OSError):
            info = os.lstat(path)
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return entries, total // 1024


def _kbytes(root: Path) -> int:
    return _count(root)[1]


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def _escapes(session_path: str, hosts: dict[str, Path], roots: list[str]) -> bool:
    """Whether following the link at `session_path` leaves the state roots, resolving
    every link on the way the way the kernel would (in the session's view)."""
    parts = [p for p in session_path.split("/") if p]
    cur, hops, i = "/", 0, 0
    while i < len(parts):
        if parts[i] == ".":
            i += 1
            continue
        nxt = posixpath.dirname(cur) if parts[i] == ".." else posixpath.join(cur, parts[i])
        if not _inside(nxt, roots) and not _is_prefix(nxt, roots):
            return True
        host = _host_of(nxt, hosts)
        if host is not None and host.is_symlink():
            hops += 1
            if hops > 40:
                return True
            target = os.readlink(host)
            base = "/" if target.startswith("/") else cur
            parts = [p for p in posixpath.join(base, target).split("/") if p] + parts[i + 1 :]
            cur, i = "/", 0
            continue
        cur, i = nxt, i + 1
    return not _inside(cur, roots)


def _is_prefix(path: str, roots: list[str]) -> bool:
    """An ancestor of some root (e.g. /var for /var/lib/task): may be walked through."""
    return path == "/" or any(r.startswith(path.rstrip("/") + "/") for r in roots)


def _host_of(path: str, hosts: dict[str, Path]) -> Path | None:
    for root, host in hosts.items():
        if path == root:
            return host
        if path.startswith(root + "/"):
            return host / path[len(root) + 1 :]
    return None


def _drop_escaping_links(hosts: dict[str, Path], roots: list[str]) -> list[str]:
    """Remove links (in the host copies) that point outside the state roots."""
    links: list[tuple[str, Path]] = []
    for root, host_root in hosts.items():
        if host_root.is_symlink():
            links.append((root, host_root))
            continue
        for dirpath, dirnames, filenames in os.walk(host_root):
            rel = os.path.relpath(dirpath, host_root)
            base = root if rel == "." else posixpath.join(root, rel)
            for name in [*dirnames, *filenames]:
                if (Path(dirpath) / name).is_symlink():
                    links.append((posixpath.join(base, name), Path(dirpath) / name))
    # Decide on every link before removing any, so one removal cannot change a verdict.
    bad = [(sp, hp, os.readlink(hp)) for sp, hp in links if _escapes(sp, hosts, roots)]
    for _, host, _ in bad:
        host.unlink()
    return [f"{sp} -> {target}" for sp, _, target in bad]
