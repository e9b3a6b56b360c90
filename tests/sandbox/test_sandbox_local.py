"""Local-only behaviour: the Dockerfile subset, its refusals, the cache, host safety."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from posttrain_arena.sandbox import BuildError, Limits, SandboxError, get_backend
from posttrain_arena.sandbox.local_backend import LocalBackend
from posttrain_arena.sandbox.localbuild import image_dir
from posttrain_arena.sandbox.localfs import sessions_dir
from posttrain_arena.sandbox.reaper import reap_local

from .conftest import write_context

pytestmark = pytest.mark.bwrap


@pytest.fixture
def local(_cache_dir: Path) -> LocalBackend:
    be = get_backend("local")
    assert isinstance(be, LocalBackend)
    return be


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("USER nobody", "USER"),
        ("RUN apt-get update && apt-get install -y curl", "apt-get"),
        ("RUN useradd agent", "useradd"),
        ("COPY seed.txt /usr/local/bin/seed", "/usr/local/bin/seed"),
        ("FROM debian:bookworm-slim AS second", "multi-stage"),
        ("COPY --from=builder /x /x", "--from"),
        ("ADD https://example.invalid/x.tar /x", "remote"),
        ('SHELL ["/bin/bash", "-c"]', "SHELL"),
    ],
)
def test_unsupported_instructions_are_refused_naming_docker(
    local: LocalBackend, tmp_path: Path, line: str, why: str
) -> None:
    ctx = write_context(tmp_path, f"FROM debian:bookworm-slim\n{line}\n", {"seed.txt": "s"})
    with pytest.raises(BuildError) as info:
        local.build(ctx, timeout=60)
    message = str(info.value)
    assert "--backend docker" in message and why in message
    assert "Dockerfile:2" in message


def test_run_writing_a_system_path_fails_with_a_hint(local: LocalBackend, tmp_path: Path) -> None:
    ctx = write_context(tmp_path, "FROM x\nRUN echo hacked > /etc/arena-test-file\n")
    with pytest.raises(BuildError, match="--backend docker"):
        local.build(ctx, timeout=60)
    assert not Path("/etc/arena-test-file").exists()


def test_subset_semantics(local: LocalBackend, tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"from-tar\n"
        info = tarfile.TarInfo("inner/t.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    ctx = write_context(
        tmp_path,
        "# a comment\nFROM python:3.12-slim\nARG FLAVOUR=mint\nENV BASE=/srv/app \\\n"
        '    LABEL_TEXT="a b"\nENV FULL=${BASE}/data\nWORKDIR $BASE\n'
        "COPY files/ ./files/\nCOPY one.txt two.txt /data/\nADD bundle.tar.gz /opt/bundle/\n"
        "RUN echo $FLAVOUR > flavour.txt && python3 -c 'print(1+1)' > py.txt\n"
        'EXPOSE 8080\nCMD ["bash"]\n',
        {"files/a.txt": "A", "one.txt": "1", "two.txt": "2"},
    )
    (ctx / "bundle.tar.gz").write_bytes(buf.getvalue())
    ref = local.build(ctx, timeout=60)
    assert ref.workdir == "/srv/app"
    assert ref.env == {"BASE": "/srv/app", "LABEL_TEXT": "a b", "FULL": "/srv/app/data"}
    s = local.start(ref, limits=Limits())
    try:
        r = s.exec(
            "cat files/a.txt /data/one.txt /data/two.txt /opt/bundle/inner/t.txt flavour.txt "
            'py.txt; echo "$FLAVOUR|$FULL"'
        )
        assert r.stdout == "A12from-tar\nmint\n2\n|/srv/app/data\n", r.stderr
    finally:
        s.stop()


def test_same_context_is_built_once(local: LocalBackend, tmp_path: Path) -> None:
    ctx = write_context(tmp_path, "FROM x\nRUN date +%s%N > /root/stamp\n")
    first = local.build(ctx, timeout=60)
    stamp = (image_dir(first) / "fs" / "root" / "stamp").read_text()
    second = local.build(ctx, timeout=60)
    assert second.tag == first.tag
    assert (image_dir(second) / "fs" / "root" / "stamp").read_text() == stamp
    (ctx / "new.txt").write_text("changes the hash")
    assert local.build(ctx, timeout=60).tag != first.tag


def test_host_is_read_only_and_hidden(local: LocalBackend, tmp_path: Path) -> None:
    ref = local.build(write_context(tmp_path, "FROM x\n"), timeout=60)
    s = local.start(ref, limits=Limits())
    try:
        r = s.exec("touch /usr/x 2>&1; ls /work /home/* 2>&1; echo $HOME; ls -d /root/.pyenv")
        assert s.exec("cat /etc/shadow").stdout == ""  # host secrets are masked
        assert "Read-only file system" in r.stdout
        assert "/work" in r.stdout and "No such file" in r.stdout
        assert not Path("/usr/x").exists()
        s.exec("ln -s /etc /root/etc-link")
        with pytest.raises(SandboxError):
            s.copy_in(tmp_path / "Dockerfile", "/root/etc-link/arena-planted")
        assert not Path("/etc/arena-planted").exists()
        # emptying through a link into the host's read-only system paths is refused
        s.exec("ln -s /usr /root/usr-link")
        with pytest.raises(SandboxError):
            s.empty(["/root/etc-link/ssl", "/root/usr-link/share"])
        assert Path("/etc/ssl").is_dir() and any(Path("/usr/share").iterdir())
    finally:
        s.stop()


def test_background_processes_die_with_their_exec(local: LocalBackend, tmp_path: Path) -> None:
    ref = local.build(write_context(tmp_path, "FROM x\n"), timeout=60)
    s = local.start(ref, limits=Limits())
    try:
        s.exec("(sleep 1; echo late > /root/late) >/dev/null 2>&1 &")
        r = s.exec("sleep 2; cat /root/late 2>&1")
        assert "No such file" in r.stdout
    finally:
        s.stop()


def test_reaper_removes_sessions_of_a_crashed_process(
    local: LocalBackend, tmp_path: Path, _cache_dir: Path
) -> None:
    ref = local.build(write_context(tmp_path, "FROM x\n"), timeout=60)
    code = (
        "import os, sys\nfrom posttrain_arena.sandbox import get_backend, ImageRef, Limits\n"
        f"ref = ImageRef(backend='local', tag={ref.tag!r}, context_hash='', workdir='/root')\n"
        "s = get_backend('local').start(ref, limits=Limits())\n"
        "print(s.state_dir, flush=True)\nos._exit(0)\n"
    )
    env = {**os.environ, "ARENA_CACHE_DIR": str(_cache_dir)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    left = Path(out.stdout.strip())
    assert left.is_dir() and left.parent == sessions_dir(), out.stderr
    removed, _ = reap_local(max_age_sec=3600)
    assert left.name in removed and not left.exists()


def test_setup_failure_is_a_sandbox_error_not_an_exit_code(
    local: LocalBackend, tmp_path: Path
) -> None:
    from posttrain_arena.sandbox import Mount

    ref = local.build(write_context(tmp_path, "FROM x\n"), timeout=60)
    s = local.start(ref, limits=Limits(), mounts=[Mount(tmp_path / "missing", "/x")])
    try:
        with pytest.raises(SandboxError, match="set up"):
            s.exec("true")
    finally:
        s.stop()
    s = local.start(ref, limits=Limits())
    try:  # a command that only looks like a setup failure is the command's failure
        r = s.exec("echo 'bwrap: Cannot find source path' >&2; exit 1")
        assert r.exit_code == 1
        assert s.exec(["no-such-command"]).exit_code == 127
    finally:
        s.stop()


@pytest.mark.bwrap
def test_only_the_etc_entries_programs_need_are_visible(tmp_path: Path) -> None:
    backend = get_backend("local")
    image = backend.build(write_context(tmp_path / "ctx", "FROM scratch\nWORKDIR /root\n"),
                          timeout=120)
    session = backend.start(image, limits=Limits())
    try:
        probe = session.exec(
            "for f in shadow gshadow sudoers ssh machine-id hostname crontab docker fstab; do "
            "[ -e /etc/$f ] && echo present:$f; done; getent passwd root | cut -d: -f1; "
            "echo x | awk '{print \"awk-ok\"}'; python3 -c 'print(\"py-ok\")'; "
            "bash -lc 'echo login-ok'", timeout=60)
    finally:
        session.stop()
    assert "present:" not in probe.stdout, probe.stdout
    lines = probe.stdout.split()
    assert lines == ["root", "awk-ok", "py-ok", "login-ok"], probe.stdout + probe.stderr
