"""Bounded disk (issue 27, item 6): a session's writable space is bounded in total, not
only per file, on both backends whatever the storage driver, the verifier's output
folder included; agent code that fills it gets a scored 0 and the host keeps its free
space; a local session leaves nothing behind (no folder, trash, mount or loop device),
even when its process exits right after the trial or crashes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from posttrain_arena.agents.script import ScriptAgent
from posttrain_arena.sandbox import Limits, get_backend, janitor
from posttrain_arena.sandbox.base import Backend
from posttrain_arena.sandbox.diskcap import (
    disk_support,
    fs_size,
    inodes_for,
    mounts_under,
    verifier_room,
)
from posttrain_arena.sandbox.localfs import TRASH_PREFIX, sessions_dir
from posttrain_arena.sandbox.reaper import reap_local
from posttrain_arena.task_format.package import load_task
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner

from .conftest import BACKENDS, BASE, write_context

BOUND_MB = 32
SLACK = fs_size(BOUND_MB << 20, inodes_for(BOUND_MB << 20)) - (BOUND_MB << 20) + (2 << 20)
"""What a session's file system holds beyond the task's storage: inode tables and the
ext4 reserve (diskcap.fs_size), and 2 MiB for the image's files; the host gives up at
most the file system's size, storage + this."""
ATTEMPT_MB = 400
"""What the attacks try to write: over twelve times the bound."""
HOST_MB = 1024
"""The file system the tests give the sessions folder (`host_fs`): its free space is
the host's as the sessions see it, and nothing else on the machine writes there."""

FILL = {
    "one-big-file": f"head -c {ATTEMPT_MB}M /dev/zero > /root/big; echo rc=$?\n",
    "many-small-files": (
        f"mkdir -p /root/many /tmp/many; n=0; for i in $(seq {ATTEMPT_MB}); do "
        "d=/root/many; [ $((i % 2)) = 0 ] && d=/tmp/many; "
        "head -c 1048576 /dev/zero > $d/f$i 2>/dev/null || break; n=$i; done; "
        "echo files=$n\n"
    ),
}
REPORT = "echo written_kb=$(du -skc /root /tmp 2>/dev/null | tail -1 | cut -f1)\n"

TASK_MD = f"""\
---
version: "1.0"
metadata:
  author_name: Sandbox tests
  author_email: sandbox@example.org
  category: software-engineering
  difficulty: easy
agent:
  timeout_sec: 120
verifier:
  timeout_sec: 60
  isolation: ISOLATION
environment:
  build_timeout_sec: 120
  cpus: 1
  memory_mb: 512
  storage_mb: {BOUND_MB}
  pids_limit: 64
  workdir: /root
---

# Write the answer

## prompt

Write 42 into /root/answer.txt.
"""

VERIFIER = """\
import os, pathlib
answer = pathlib.Path("/root/answer.txt")
ok = answer.is_file() and answer.read_text().strip() == "42"
out = pathlib.Path(os.environ.get("BENCHFLOW_REWARD_TEXT", "/logs/verifier/reward.txt"))
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("1.0\\n" if ok else "0.0\\n")
"""


def _require_disk() -> None:
    support = disk_support()
    if not support.works:
        pytest.skip(f"no size-capped disks here: {support.detail}")


def _task(root: Path, isolation: str = "fresh") -> Path:
    root.mkdir(parents=True)
    (root / "task.md").write_text(TASK_MD.replace("ISOLATION", isolation))
    write_context(root / "environment", f"FROM {BASE}\nWORKDIR /root\n")
    (root / "verifier").mkdir()
    (root / "verifier" / "verifier.py").write_text(VERIFIER)
    (root / "oracle").mkdir()
    (root / "oracle" / "solve.sh").write_text("#!/bin/bash\necho 42 > /root/answer.txt\n")
    return root


@pytest.fixture
def host_fs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The sessions folder on an ext4 of its own (HOST_MB, loop-mounted), so that its
    free space moves only with what the sessions write (other test workers on this
    machine write hundreds of MiB a minute elsewhere)."""
    image, mount = tmp_path / "host.img", tmp_path / "host"
    mount.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(HOST_MB << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True,
                   capture_output=True)
    monkeypatch.setenv("ARENA_LOCAL_SESSIONS", str(mount))
    try:
        yield mount
    finally:
        janitor.wait()
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


class FreeSpace:
    """The least free space of the sessions folder's file system while it runs."""

    def __init__(self) -> None:
        self.before = shutil.disk_usage(sessions_dir()).free
        self.least = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.least = min(self.least, shutil.disk_usage(sessions_dir()).free)

    def __enter__(self) -> FreeSpace:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def drop(self) -> int:
        return self.before - self.least


def _value(record: Path, key: str) -> int | None:
    text = (record / "transcript.json").read_text()
    for chunk in text.replace("\\n", "\n").splitlines():
        if chunk.startswith(f"{key}="):
            digits = "".join(c for c in chunk[len(key) + 1:] if c.isdigit())
            return int(digits) if digits else None
    return None


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest, _cache_dir: Path) -> str:
    name: str = request.param
    if name == "docker":
        get_backend_or_skip("docker")
    _require_disk()
    return name


def get_backend_or_skip(name: str) -> Backend:
    backend = get_backend(name)
    if name == "docker":
        import docker.errors

        try:
            backend.client.images.get(BASE)  # type: ignore[attr-defined]
        except docker.errors.ImageNotFound:
            pytest.skip(f"base image {BASE} missing: run `arena images bootstrap`")
    return backend


@pytest.fixture
def runner(backend_name: str, tmp_path: Path) -> Iterator[TrialRunner]:
    made = TrialRunner(backend_name, records_root=tmp_path / "records")  # type: ignore[arg-type]
    yield made
    made.close()


@pytest.mark.parametrize("isolation", ["fresh", "shared"])
@pytest.mark.parametrize("fill", sorted(FILL))
def test_filling_the_disk_is_the_agents_zero_and_the_host_keeps_its_space(
    host_fs: Path, runner: TrialRunner, tmp_path: Path, fill: str, isolation: str
) -> None:
    """Fresh: the verifier gets the state in a session of its own; shared: it runs in
    the agent's full session (the harness's files must still go in)."""
    task = load_task(_task(tmp_path / "task", isolation))
    script = tmp_path / "fill.sh"
    script.write_text(FILL[fill] + REPORT + "echo 42 > /root/answer.txt || true\n")
    with FreeSpace() as space:
        result = runner.run(task, ScriptAgent(script), agent_timeout=120)
    assert result.outcome is Outcome.SCORED, (result.outcome, result.reason)
    assert result.reward == 0.0, result.reason
    written = _value(Path(result.record_dir or ""), "written_kb")
    assert written is not None
    assert written << 10 <= (BOUND_MB << 20) + SLACK, f"the agent wrote {written >> 10} MiB"
    # the agent's session and the verifier's (which receives the state) each have their
    # own disk, and both may exist at once
    trial_bound = 2 * ((BOUND_MB << 20) + SLACK) + verifier_room(BOUND_MB)
    assert space.drop <= trial_bound, f"the host lost {space.drop >> 20} MiB in the trial"
    # the record says which bound applied, as the backend words it for this storage size
    config = json.loads((Path(result.record_dir or "") / "config.json").read_text())
    assert config["limits"]["disk"] == runner.backend.disk_bound(BOUND_MB)
    assert str(BOUND_MB) in config["limits"]["disk"] or "UNBOUNDED" in config["limits"]["disk"]


def test_the_verifiers_output_folder_is_bounded(
    host_fs: Path, backend_name: str, tmp_path: Path
) -> None:
    backend = get_backend(backend_name)
    image = backend.build(write_context(tmp_path / "env", f"FROM {BASE}\nWORKDIR /root\n"),
                          timeout=300)
    session = backend.start(image, limits=Limits(storage_mb=BOUND_MB),
                            output_dir="/logs/verifier")
    try:
        with FreeSpace() as space:
            result = session.exec(
                f"mkdir -p /logs/verifier; n=0; for i in $(seq {ATTEMPT_MB}); do head -c "
                "1048576 /dev/zero > /logs/verifier/f$i 2>/dev/null || break; n=$i; done; "
                "echo files=$n", timeout=120)
        assert result.exit_code == 0, result.stderr
        files = int(result.stdout.split("files=")[1].split()[0])
        bound = (BOUND_MB << 20) + verifier_room(BOUND_MB) + SLACK  # room beside the state
        assert 0 < files << 20 <= bound, f"{files} MiB written"
        assert space.drop <= bound, f"the host lost {space.drop >> 20} MiB"
        session.halt()
        session.copy_out("/logs/verifier/f1", tmp_path / "f1")  # still readable
        assert (tmp_path / "f1").stat().st_size == 1 << 20
    finally:
        session.stop()


def _loop_files() -> list[str]:
    backing = []
    for f in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            backing.append(f.read_text().strip())
    return backing


def _left_behind(folder: Path, state: Path) -> list[str]:
    """What of a session is still on the host: its folder, a trash entry, a mount, a
    loop device whose file was under it."""
    left = [p.name for p in folder.iterdir()
            if p.name in (state.name, TRASH_PREFIX + state.name)]
    left += mounts_under(state)
    left += [f for f in _loop_files() if f.startswith(str(state))]
    return left


def _wait_clean(folder: Path, state: Path, patience: float = 10.0) -> list[str]:
    deadline = time.monotonic() + patience
    while (left := _left_behind(folder, state)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.bwrap
@pytest.mark.parametrize("cap", ["auto", "off"])
def test_a_process_that_exits_after_its_trial_leaves_no_session_behind(
    tmp_path: Path, _cache_dir: Path, cap: str
) -> None:
    """What `arena task run` does: one session, files written, stop, exit at once."""
    if cap == "auto":
        _require_disk()
    folder = tmp_path / "sessions"
    ref = get_backend("local").build(write_context(tmp_path / "env", "FROM x\n"), timeout=60)
    code = (
        "import sys\nfrom posttrain_arena.sandbox import get_backend, ImageRef, Limits\n"
        f"ref = ImageRef(backend='local', tag={ref.tag!r}, context_hash='', workdir='/root')\n"
        "s = get_backend('local').start(ref, limits=Limits(storage_mb=64))\n"
        "r = s.exec('mkdir -p /root/d && for i in $(seq 3000); do echo $i > /root/d/$i; "
        "done; head -c 20M /dev/zero > /tmp/z')\n"
        "assert r.exit_code == 0, r.stderr\n"
        "print(s.state_dir, s.disk_bound, flush=True)\ns.stop()\n"
    )
    env = {**os.environ, "ARENA_CACHE_DIR": str(_cache_dir), "ARENA_LOCAL_SESSIONS": str(folder),
           "ARENA_DISK_CAP": cap}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    state = Path(out.stdout.split()[0])
    assert ("UNBOUNDED" in out.stdout) == (cap == "off"), out.stdout
    sessions = folder / "posttrain-arena-sessions"
    assert state.parent == sessions
    assert _wait_clean(sessions, state) == [], "the session outlived its process"


@pytest.mark.bwrap
def test_a_stopped_local_session_leaves_no_folder_mount_or_loop_device(
    tmp_path: Path, _cache_dir: Path
) -> None:
    _require_disk()
    backend = get_backend("local")
    ref = backend.build(write_context(tmp_path / "env", "FROM x\n"), timeout=60)
    session = backend.start(ref, limits=Limits(storage_mb=BOUND_MB))
    state = session.state_dir  # type: ignore[attr-defined]
    assert mounts_under(state), "the session has no disk of its own"
    assert session.exec("head -c 10M /dev/zero > /root/z").exit_code == 0
    session.stop()
    assert janitor.wait()  # removed off the caller's thread, promptly
    assert not state.exists()
    assert _wait_clean(state.parent, state) == []


@pytest.mark.bwrap
def test_the_reaper_unmounts_a_crashed_sessions_disk(tmp_path: Path, _cache_dir: Path) -> None:
    _require_disk()
    ref = get_backend("local").build(write_context(tmp_path / "env", "FROM x\n"), timeout=60)
    code = (
        "import os\nfrom posttrain_arena.sandbox import get_backend, ImageRef, Limits\n"
        f"ref = ImageRef(backend='local', tag={ref.tag!r}, context_hash='', workdir='/root')\n"
        "s = get_backend('local').start(ref, limits=Limits(storage_mb=16))\n"
        "s.exec('head -c 4M /dev/zero > /root/z')\n"
        "print(s.state_dir, flush=True)\nos._exit(0)\n"
    )
    env = {**os.environ, "ARENA_CACHE_DIR": str(_cache_dir)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    state = Path(out.stdout.strip())
    assert state.is_dir() and mounts_under(state), out.stderr
    removed, _ = reap_local(max_age_sec=3600)
    assert state.name in removed
    assert _wait_clean(state.parent, state) == []


@pytest.mark.docker
def test_a_crashed_docker_sessions_disk_is_reaped(tmp_path: Path, _cache_dir: Path) -> None:
    _require_disk()
    backend = get_backend_or_skip("docker")
    image = backend.build(write_context(tmp_path / "env", f"FROM {BASE}\nWORKDIR /root\n"),
                          timeout=300)
    code = (
        "import os\nfrom posttrain_arena.sandbox import get_backend, ImageRef, Limits\n"
        f"ref = ImageRef(backend='docker', tag={image.tag!r}, context_hash='', "
        "workdir='/root')\n"
        "s = get_backend('docker').start(ref, limits=Limits(storage_mb=16), "
        "output_dir='/logs/verifier')\n"
        "s.exec('head -c 4M /dev/zero > /root/z')\n"
        "print(s.host_dir.root, s.container, flush=True)\nos._exit(0)\n"
    )
    env = {**os.environ, "ARENA_CACHE_DIR": str(_cache_dir)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    root, container = Path(out.stdout.split()[0]), out.stdout.split()[1]
    assert mounts_under(root), out.stderr
    from posttrain_arena.sandbox.reaper import reap_orphans

    reap_orphans(6 * 3600)
    import docker.errors

    with pytest.raises(docker.errors.NotFound):
        backend.client.api.inspect_container(container)  # type: ignore[attr-defined]
    assert _wait_clean(root.parent, root) == []


def test_doctor_says_when_the_total_is_unbounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from posttrain_arena.sandbox.local_backend import LocalBackend

    monkeypatch.setenv("ARENA_DISK_CAP", "off")
    assert "UNBOUNDED in total" in LocalBackend.disk_mode()
    assert "disk: UNBOUNDED in total" in LocalBackend().available()[1]  # what doctor prints
    assert "UNBOUNDED" in LocalBackend().disk_bound(64)  # what a session says
    from posttrain_arena.sandbox.doctor import diagnose

    assert any(h.startswith("local: a session's disk is bounded per file only")
               for h in diagnose().hints)
    monkeypatch.setenv("ARENA_DISK_CAP", "auto")
    support = disk_support()
    assert ("UNBOUNDED" in LocalBackend.disk_mode()) is not support.works


@pytest.mark.docker
def test_docker_volumes_network_files_and_log_are_inside_the_bound(
    host_fs: Path, tmp_path: Path
) -> None:
    """What the engine would keep outside the container's layer: an image VOLUME (an
    anonymous volume under the engine's root), /etc/hosts and friends (files in the
    engine's container folder) and PID 1's log (a JSON file there)."""
    _require_disk()
    backend = get_backend_or_skip("docker")
    image = backend.build(write_context(tmp_path / "env", f"FROM {BASE}\nWORKDIR /root\n"
                                        "VOLUME /vol\n"), timeout=300)
    session = backend.start(image, limits=Limits(storage_mb=BOUND_MB))
    try:
        with FreeSpace() as space:
            result = session.exec(
                f"n=0; for i in $(seq {ATTEMPT_MB}); do head -c 1048576 /dev/zero > /vol/f$i "
                "2>/dev/null || break; n=$i; done; echo vol=$n; rm -f /vol/f*; "
                "m=0; for i in $(seq 100); do head -c 1048576 /dev/zero >> /etc/hosts "
                "2>/dev/null || break; m=$i; done; echo hosts=$m", timeout=120)
        assert result.exit_code == 0, result.stderr
        vol = int(result.stdout.split("vol=")[1].split()[0])
        hosts = int(result.stdout.split("hosts=")[1].split()[0])
        assert 0 < vol << 20 <= (BOUND_MB << 20) + SLACK, f"{vol} MiB in the VOLUME"
        assert 0 < hosts << 20 <= (BOUND_MB << 20) + SLACK, f"{hosts} MiB in /etc/hosts"
        assert space.drop <= (BOUND_MB << 20) + SLACK, f"the host lost {space.drop >> 20} MiB"
        info = backend.client.api.inspect_container(session.container)  # type: ignore[attr-defined]
        assert info["HostConfig"]["LogConfig"]["Type"] == "none"  # no host log file grows
        assert not [m for m in info["Mounts"] if m.get("Type") == "volume"], info["Mounts"]
    finally:
        session.stop()


@pytest.mark.bwrap
def test_a_process_that_fails_without_stopping_its_session_unmounts_its_disk(
    tmp_path: Path, _cache_dir: Path
) -> None:
    """An exception ends the process before any stop(): the disk goes back at exit (the
    folder, with its owner file, is the reaper's)."""
    _require_disk()
    folder = tmp_path / "sessions"
    ref = get_backend("local").build(write_context(tmp_path / "env", "FROM x\n"), timeout=60)
    code = (
        "from posttrain_arena.sandbox import get_backend, ImageRef, Limits\n"
        f"ref = ImageRef(backend='local', tag={ref.tag!r}, context_hash='', workdir='/root')\n"
        "s = get_backend('local').start(ref, limits=Limits(storage_mb=16))\n"
        "s.exec('head -c 4M /dev/zero > /root/z')\n"
        "print(s.state_dir, flush=True)\nraise RuntimeError('the harness failed')\n"
    )
    env = {**os.environ, "ARENA_CACHE_DIR": str(_cache_dir), "ARENA_LOCAL_SESSIONS": str(folder)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert "the harness failed" in out.stderr
    state = Path(out.stdout.split()[0])
    assert mounts_under(state) == []
    deadline = time.monotonic() + 10  # the kernel frees a loop device a moment later
    while [f for f in _loop_files() if f.startswith(str(state))]:
        assert time.monotonic() < deadline, "the loop device outlived its process"
        time.sleep(0.05)
