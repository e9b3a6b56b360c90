"""Docker sessions: halt (one engine kill, files still readable) and exec with stdin."""

from __future__ import annotations

import io
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from posttrain_arena.sandbox import Limits, get_backend
from posttrain_arena.sandbox.base import ImageRef, MissingPath, SandboxError
from posttrain_arena.sandbox.docker import DockerBackend
from posttrain_arena.sandbox.docker_session import DockerSession

pytestmark = pytest.mark.docker

COUNT = ("for d in /proc/[0-9]*; do tr '\\000' ' ' < $d/cmdline 2>/dev/null; echo; done"
         " | grep -c '^sleep {}' || true")


@pytest.fixture
def docker_backend(_cache_dir: Path) -> DockerBackend:
    be = get_backend("docker")
    assert isinstance(be, DockerBackend)
    return be


@pytest.fixture
def session(docker_backend: DockerBackend, context_dir: Path) -> Iterator[DockerSession]:
    image: ImageRef = docker_backend.build(context_dir, timeout=300, task_name="halt-tests")
    s = docker_backend.start(image, limits=Limits(cpus=1, memory_mb=256, storage_mb=128))
    try:
        yield s
    finally:
        s.stop()


def test_halt_ends_every_process_and_keeps_the_files(
    session: DockerSession, tmp_path: Path
) -> None:
    started = session.exec(
        "echo state > /root/out.txt; (setsid sleep 4242 &); nohup sleep 4242 >/dev/null 2>&1 &"
        " sleep 0.2; " + COUNT.format(4242), timeout=30)
    assert started.exit_code == 0 and int(started.stdout.split()[-1]) == 2
    session.halt()
    on_host = subprocess.run(["pgrep", "-f", "^sleep 4242"], capture_output=True, text=True)
    assert on_host.stdout.strip() == ""
    state = session.api.inspect_container(session.container)["State"]
    assert state["Running"] is False  # PID 1 died, and the kernel took the rest with it
    with pytest.raises(SandboxError):
        session.exec("true", timeout=10)
    session.kill_all()  # a no-op now, never an error
    session.copy_out("/root/out.txt", tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text() == "state\n"
    with pytest.raises(MissingPath):
        session.copy_out("/root/absent", tmp_path / "absent")
    session.halt()  # idempotent


def test_copy_out_of_a_removed_session_is_not_a_missing_path(
    session: DockerSession, tmp_path: Path
) -> None:
    session.api.remove_container(session.container, force=True)
    with pytest.raises(SandboxError) as gone:
        session.copy_out("/root", tmp_path / "root")
    assert not isinstance(gone.value, MissingPath)


def test_exec_feeds_stdin_and_closes_it(session: DockerSession) -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB, binary
    result = session.exec(["/bin/sh", "-c", "wc -c; echo err >&2"], stdin=payload, timeout=60)
    assert result.exit_code == 0
    assert result.stdout.strip() == str(len(payload))
    assert result.stderr == "err\n"


def test_exec_with_stdin_restores_an_archive_and_times_out(session: DockerSession) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"from stdin\n"
        info = tarfile.TarInfo("srv/in/file.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    restored = session.exec(["/bin/sh", "-c", "tar -xf - -C / && cat /srv/in/file.txt"],
                            stdin=buf.getvalue(), timeout=60, user="root")
    assert (restored.exit_code, restored.stdout) == (0, "from stdin\n")
    slow = session.exec(["/bin/sh", "-c", "cat >/dev/null; sleep 30"], stdin=b"x", timeout=2)
    assert slow.timed_out
    assert session.exec(COUNT.format(30), timeout=30).stdout.strip() == "0"
