"""Docker sessions: halt (one engine kill, files still readable) and exec with stdin."""

from __future__ import annotations

import io
import os
import secrets
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from posttrain_arena.sandbox import Limits, get_backend, janitor
from posttrain_arena.sandbox.base import (
    ImageRef,
    MissingPath,
    SandboxError,
    TransferBounds,
    TransferLimit,
)
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
    n = secrets.randbelow(10**9) + 10**9  # no other test's processes match it on the host
    started = session.exec(
        f"echo state > /root/out.txt; (setsid sleep {n} &); nohup sleep {n} >/dev/null 2>&1 &"
        " sleep 0.2; " + COUNT.format(n), timeout=30)
    assert started.exit_code == 0 and int(started.stdout.split()[-1]) == 2
    session.halt()
    on_host = subprocess.run(["pgrep", "-f", f"^sleep {n}"], capture_output=True, text=True)
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


@pytest.fixture
def out_session(docker_backend: DockerBackend, context_dir: Path) -> Iterator[DockerSession]:
    """A session started with an output directory (as a verifier's is)."""
    if not docker_backend.host_output_supported():
        pytest.skip("this engine's containers cannot write a host directory as its root")
    image: ImageRef = docker_backend.build(context_dir, timeout=300, task_name="halt-tests")
    s = docker_backend.start(image, limits=Limits(cpus=1, memory_mb=256, storage_mb=128),
                             output_dir="/logs/verifier")
    try:
        yield s
    finally:
        s.stop()


def _no_archive(session: DockerSession, calls: list[str]) -> None:
    real = session.api.get_archive

    def counted(container: str, path: str) -> object:
        calls.append(path)
        return real(container, path)

    session.api.get_archive = counted  # type: ignore[method-assign]


def test_a_halted_sessions_output_directory_is_read_on_the_host(
    out_session: DockerSession, tmp_path: Path
) -> None:
    """Written in the container, read after the halt without the engine's archive API;
    a link there is copied as a link (never followed to the host file it names), a fifo
    is skipped; before the halt the engine is asked, as for any path."""
    secret = tmp_path / "host-secret"
    secret.write_text("host only\n")
    r = out_session.exec(
        "cd /logs/verifier && test -z \"$(ls -A)\" && echo 1.0 > reward.txt && "
        f"ln -s {secret} leak && mkfifo pipe && echo done", timeout=30)
    assert r.exit_code == 0 and "done" in r.stdout, r.stderr
    calls: list[str] = []
    _no_archive(out_session, calls)
    out_session.copy_out("/logs/verifier", tmp_path / "before")
    assert calls == ["/logs/verifier"]  # running: through the engine
    out_session.halt()
    out_session.copy_out("/logs/verifier", tmp_path / "after")
    assert calls == ["/logs/verifier"]  # halted: on the host
    assert (tmp_path / "after" / "reward.txt").read_text() == "1.0\n"
    assert os.readlink(tmp_path / "after" / "leak") == str(secret)
    assert not os.path.lexists(tmp_path / "after" / "pipe")
    assert sorted(os.listdir(tmp_path / "after")) == ["leak", "reward.txt"]


def test_the_output_directory_keeps_the_transfer_bounds_and_goes_with_the_session(
    out_session: DockerSession, tmp_path: Path
) -> None:
    r = out_session.exec("cd /logs/verifier && for i in $(seq 50); do : > f$i; done",
                         timeout=30)
    assert r.exit_code == 0, r.stderr
    out_session.halt()
    with pytest.raises(TransferLimit):
        out_session.copy_out("/logs/verifier", tmp_path / "x",
                             bounds=TransferBounds(max_entries=10))
    assert not os.path.lexists(tmp_path / "x")  # nothing left half-copied
    assert out_session.output is not None
    root = out_session.output.root
    assert (out_session.output.host / "f1").exists()
    out_session.stop()
    assert janitor.wait()  # the folder goes off the caller's thread
    assert not root.exists()


def test_the_reaper_removes_an_output_directory_whose_owner_died(tmp_path: Path) -> None:
    from posttrain_arena.sandbox.docker_disk import SessionDir
    from posttrain_arena.sandbox.owner import pid_namespace
    from posttrain_arena.sandbox.reaper import reap_local

    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True)
    pid = int(dead.stdout)  # exited: its pid is free
    orphan = SessionDir.create("arena-test" + os.urandom(4).hex(),
                               f"{pid} 0 {pid_namespace()}\n", payload=None,
                               output_target="/logs/verifier")
    mine = SessionDir.create("arena-test" + os.urandom(4).hex(),
                             f"{os.getpid()} 9999999999 {pid_namespace()}\n", payload=None,
                             output_target="/logs/verifier")
    try:
        removed, _ = reap_local(6 * 3600)
        assert orphan.root.name in removed and not orphan.root.exists()
        assert mine.root.exists()
    finally:
        orphan.remove()
        mine.remove()
