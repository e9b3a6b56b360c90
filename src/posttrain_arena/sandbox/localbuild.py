"""Build `local` images: a Dockerfile subset applied to a directory snapshot.

Honoured: FROM (noted, ignored: the host's /usr is the base), WORKDIR, ENV, ARG,
COPY/ADD of files from the build context (ADD extracts local tar archives), and RUN of
commands that only write inside the sandbox's writable roots (run in bubblewrap, no
network). Ignored: EXPOSE, LABEL, CMD, ENTRYPOINT, VOLUME, HEALTHCHECK, STOPSIGNAL,
MAINTAINER. Refused, with an error naming the docker backend: USER, SHELL, ONBUILD, a
second FROM (multi-stage), COPY --from, remote ADD, package managers in RUN, and writes
to system paths. The result is cached by the context's content hash under
$ARENA_CACHE_DIR/local-images (default ~/.cache/posttrain-arena/local-images).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import tarfile
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from posttrain_arena.paths import cache_home
from posttrain_arena.sandbox.base import BuildError, ImageRef, Limits
from posttrain_arena.sandbox.dockerfile import Instruction, env_pairs, expand, parse_file
from posttrain_arena.sandbox.local import LocalSession
from posttrain_arena.sandbox.localfs import (
    DEFAULT_ROOTS,
    SandboxFS,
    copy_tree,
    is_under,
    normalize,
    root_for,
)
from posttrain_arena.task_format.hashing import tree_hash
from posttrain_arena.task_format.trust import DEFAULT_PATH

FORMAT = "local-image-v2"  # v2: ENV expands $PATH and $HOME against the base's values
IGNORED = frozenset(
    {"EXPOSE", "LABEL", "CMD", "ENTRYPOINT", "VOLUME", "HEALTHCHECK", "STOPSIGNAL", "MAINTAINER"}
)
_PACKAGE_MANAGERS = re.compile(
    r"(^|[\s;&|(`])(apt-get|apt|aptitude|dpkg|apk|yum|dnf|microdnf|zypper|pacman|useradd|"
    r"adduser|groupadd)(\s|$)"
)
_HINT = "; the local backend honours a Dockerfile subset, use `--backend docker` for this task"
BASE_ENV = {"PATH": DEFAULT_PATH, "HOME": "/root"}
"""The environment a local image's Dockerfile starts from (a session's defaults)."""
_locks: dict[str, threading.Lock] = {}
# builds take their own slots, apart from trials (as the docker backend's do)
_build_slots = threading.BoundedSemaphore(
    max(1, int(os.environ.get("ARENA_BUILD_CONCURRENCY", "2")))
)
_locks_guard = threading.Lock()


@dataclass
class ImageMeta:
    """What a built local image records beside its files (meta.json)."""

    workdir: str = "/root"
    env: dict[str, str] = field(default_factory=dict)
    roots: list[str] = field(default_factory=lambda: list(DEFAULT_ROOTS))
    base: str = ""
    context_hash: str = ""
    task_name: str = ""
    notes: list[str] = field(default_factory=list)


def cache_root() -> Path:
    """$ARENA_CACHE_DIR/local-images, default ~/.cache/posttrain-arena/local-images."""
    return cache_home() / "local-images"


def image_dir(image: ImageRef) -> Path:
    """Directory of a built local image."""
    return cache_root() / image.tag.rpartition(":")[2]


def read_meta(directory: Path) -> ImageMeta:
    """The meta.json of a built local image."""
    try:
        data = json.loads((directory / "meta.json").read_text())
    except (OSError, ValueError) as exc:
        raise BuildError(f"local image {directory} is missing or damaged ({exc})") from exc
    return ImageMeta(**data)


def context_hash(context: Path) -> str:
    """Content hash of a build context, salted with the local image format."""
    return tree_hash(context).replace("sha256:", "") + "-" + FORMAT


def _ref(meta: ImageMeta, key: str) -> ImageRef:
    return ImageRef(
        backend="local",
        tag=f"arena-env-local:{key}",
        context_hash=meta.context_hash,
        workdir=meta.workdir,
        env=dict(meta.env),
        image_id=key,
    )


def build_local_image(context: Path, *, timeout: float, task_name: str = "") -> ImageRef:
    """Build (or reuse) the local image of `context` (a directory with a Dockerfile)."""
    if not (context / "Dockerfile").is_file():
        raise BuildError(f"{context}: no Dockerfile in the build context")
    import hashlib

    digest = hashlib.sha256(context_hash(context).encode()).hexdigest()
    key = digest[:16]
    final = cache_root() / key
    if (final / "meta.json").is_file():
        return _ref(read_meta(final), key)
    final.parent.mkdir(parents=True, exist_ok=True)
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock, open(final.parent / f"{key}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        if (final / "meta.json").is_file():
            return _ref(read_meta(final), key)
        work = Path(tempfile.mkdtemp(prefix=f"{key}.build-", dir=final.parent))
        try:
            with _build_slots:
                meta = _Builder(context, work, time.monotonic() + timeout).run()
            meta.context_hash = "sha256:" + digest
            meta.task_name = task_name
            (work / "meta.json").write_text(json.dumps(asdict(meta), indent=2))
            os.rename(work, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return _ref(meta, key)


class _Builder:
    def __init__(self, context: Path, work: Path, deadline: float) -> None:
        self.context = context.resolve()
        self.fs_dir = work / "fs"
        self.fs_dir.mkdir()
        self.deadline = deadline
        self.meta = ImageMeta()
        self.args: dict[str, str] = {}
        self.seen_from = False
        self.where = str(context / "Dockerfile")

    def fail(self, ins: Instruction, message: str) -> BuildError:
        return BuildError(f"{self.where}:{ins.line}: {ins.keyword}: {message}")

    def run(self) -> ImageMeta:
        for ins in parse_file(self.context / "Dockerfile"):
            if time.monotonic() > self.deadline:
                raise BuildError(f"{self.where}: build timed out at line {ins.line}")
            handler = getattr(self, f"do_{ins.keyword.lower()}", None)
            if ins.keyword in IGNORED:
                self.meta.notes.append(f"line {ins.line}: {ins.keyword} ignored")
            elif handler is None:
                raise self.fail(ins, "not supported by the local backend" + _HINT)
            else:
                handler(ins)
        fs = SandboxFS(self.fs_dir, self.meta.roots)
        fs.host_path(self.meta.workdir, write=True).mkdir(parents=True, exist_ok=True)
        for root in self.meta.roots:
            (self.fs_dir / root.lstrip("/")).mkdir(parents=True, exist_ok=True)
        return self.meta

    def _vars(self) -> dict[str, str]:
        # What `$PATH` and `$HOME` mean before the Dockerfile sets them: the values every
        # local session starts with (the host's system is this image's base), as Docker
        # expands them against the base image's ENV. `ENV PATH=/x:$PATH` keeps the rest.
        return {**BASE_ENV, **self.args, **self.meta.env}

    def _writable(self, ins: Instruction, path: str) -> str:
        path = normalize(path, self.meta.workdir)
        root = root_for(path, self.meta.roots)
        if root is None:
            raise self.fail(
                ins,
                f"{path} is a system path, read-only in the local sandbox (writable: "
                f"{', '.join(sorted(self.meta.roots))} and other top-level directories)" + _HINT,
            )
        if root not in self.meta.roots:
            self.meta.roots.append(root)
        return path

    def do_from(self, ins: Instruction) -> None:
        if self.seen_from:
            raise self.fail(ins, "multi-stage builds are not supported" + _HINT)
        self.seen_from = True
        self.meta.base = ins.args[0] if ins.args else ""
        self.meta.notes.append(f"FROM {self.meta.base} noted; the host system is the base")

    def do_arg(self, ins: Instruction) -> None:
        for name, value in env_pairs(ins, self._vars()):
            self.args.setdefault(name, value)

    def do_env(self, ins: Instruction) -> None:
        for name, value in env_pairs(ins, self._vars()):
            self.meta.env[name] = value

    def do_workdir(self, ins: Instruction) -> None:
        if len(ins.args) != 1:
            raise self.fail(ins, "expects one path")
        self.meta.workdir = self._writable(ins, expand(ins.args[0], self._vars()))
        fs = SandboxFS(self.fs_dir, self.meta.roots)
        fs.host_path(self.meta.workdir, write=True).mkdir(parents=True, exist_ok=True)

    def do_copy(self, ins: Instruction) -> None:
        if "from" in ins.flags:
            raise self.fail(ins, "COPY --from (multi-stage) is not supported" + _HINT)
        words = [expand(w, self._vars()) for w in ins.args]
        if len(words) < 2:
            raise self.fail(ins, "expects at least a source and a destination")
        *sources, dest_word = words
        dest = self._writable(ins, dest_word)
        fs = SandboxFS(self.fs_dir, self.meta.roots)
        to_dir = dest_word.endswith("/") or len(sources) > 1
        for pattern in sources:
            if re.match(r"^[a-z]+://", pattern):
                raise self.fail(ins, f"remote source {pattern} is not supported" + _HINT)
            matches = (
                sorted(self.context.glob(pattern.lstrip("/")))
                if any(c in pattern for c in "*?[")
                else [self.context / pattern.lstrip("/")]
            )
            for src in matches:
                real = Path(os.path.realpath(src))
                if not is_under(str(real), str(self.context)) or not os.path.lexists(src):
                    raise self.fail(ins, f"{pattern}: not a file of the build context")
                if ins.keyword == "ADD" and real.is_file() and tarfile.is_tarfile(real):
                    target = fs.host_path(dest, write=True)
                    target.mkdir(parents=True, exist_ok=True)
                    with tarfile.open(real) as tar:
                        tar.extractall(target, filter="tar")
                    continue
                if real.is_dir():
                    target = fs.host_path(dest, write=True)  # contents go into dest
                elif to_dir or fs.host_path(dest, write=True).is_dir():
                    target = fs.host_path(dest, write=True) / real.name
                else:
                    target = fs.host_path(dest, write=True)
                copy_tree(real if real.is_dir() else src, target)

    do_add = do_copy

    def do_run(self, ins: Instruction) -> None:
        text = " ".join(ins.args)
        match = _PACKAGE_MANAGERS.search(text)
        if match:
            raise self.fail(
                ins,
                f"`{match.group(2)}` changes the system, which the local backend keeps "
                "read-only (it uses the host's packages)" + _HINT,
            )
        argv = ins.args if ins.exec_form else ["/bin/sh", "-c", text]
        session = LocalSession(
            _ref(self.meta, "build"),
            state_dir=self.fs_dir.parent,
            roots=self.meta.roots,
            limits=Limits(cpus=2, memory_mb=4096, pids_limit=1024),
            mounts=None,
            labels=None,
        )
        session.fs = SandboxFS(self.fs_dir, self.meta.roots)
        env = {**self.args, **self.meta.env}
        try:
            result = session.exec(
                argv,
                timeout=max(1.0, self.deadline - time.monotonic()),
                env=env,
                workdir=self.meta.workdir,
            )
        finally:
            session.kill_all()
            if session.cgroup is not None:
                session.cgroup.remove()
        if result.timed_out:
            raise self.fail(ins, "timed out")
        if result.exit_code != 0:
            tail = (result.stdout + result.stderr)[-2000:]
            raise self.fail(
                ins,
                f"exited with {result.exit_code}:\n{tail}\n(only "
                f"{', '.join(sorted(self.meta.roots))} are writable and there is no network"
                + _HINT
                + ")",
            )
