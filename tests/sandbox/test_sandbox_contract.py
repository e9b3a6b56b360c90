"""The Session contract, on both backends: exec, limits, files, isolation, lifecycle."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest

from posttrain_arena.sandbox import Limits, SandboxError
from posttrain_arena.sandbox.base import Backend, ImageRef, Session

LIST_PROCS = "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline 2>/dev/null; echo; done"


def test_exec_sees_image_env_workdir_and_files(session: Session) -> None:
    r = session.exec("echo $GREETING $TARGET; pwd; cat seed.txt built.txt")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.split("\n")[:4] == ["hello world", "/root", "seed", "built"]
    assert not r.timed_out


def test_exec_env_workdir_user_and_exit_code(session: Session) -> None:
    r = session.exec(
        ["sh", "-c", "echo $EXTRA; pwd; id -u; exit 3"],
        env={"EXTRA": "x1"},
        workdir="/tmp",
        user="65534",
    )
    assert r.exit_code == 3
    assert r.stdout.split() == ["x1", "/tmp", "65534"]


def test_exec_streams_output(session: Session) -> None:
    seen: list[str] = []
    r = session.exec("echo one; echo two >&2", on_output=seen.append)
    assert "one" in "".join(seen) and "two" in "".join(seen)
    assert r.stdout == "one\n" and r.stderr == "two\n"


def test_state_persists_between_execs(session: Session) -> None:
    assert session.exec("echo kept > /root/state.txt; echo t > /tmp/t").exit_code == 0
    assert session.exec("cat /root/state.txt /tmp/t").stdout == "kept\nt\n"


def test_stdin_from_a_callable_reaches_a_command_that_started_first(session: Session) -> None:
    started: list[str] = []

    def later() -> bytes:  # called while the command already runs, waiting on stdin
        for _ in range(100):
            probe = session.exec(["sh", "-c", "cat started.txt 2>/dev/null"])
            if probe.stdout:
                started.append(probe.stdout)
                break
            time.sleep(0.05)
        time.sleep(1.5)  # longer than the timeout: it counts from here
        return b"late input"

    r = session.exec(["sh", "-c", "echo up > started.txt; cat"], stdin=later, timeout=1.2)
    assert started == ["up\n"]
    assert (r.exit_code, r.stdout, r.timed_out) == (0, "late input", False)


def test_a_callable_stdin_that_raises_kills_the_command_before_it_reads_eof(
    session: Session,
) -> None:
    def fail() -> bytes:
        for _ in range(100):
            if session.exec(["sh", "-c", "test -f waiting.txt"]).exit_code == 0:
                break
            time.sleep(0.05)
        raise LookupError("no input after all")

    script = "echo > waiting.txt; cat > got.txt; sleep 1; echo ran on > after.txt"
    with pytest.raises(LookupError, match="no input after all"):
        session.exec(["sh", "-c", script], stdin=fail, timeout=30)
    time.sleep(1.5)  # what a command given end of file would have done by now
    left = session.exec(["sh", "-c", "ls; cat after.txt 2>/dev/null; true"])
    assert left.exit_code == 0 and "waiting.txt" in left.stdout
    assert "ran on" not in left.stdout and "after.txt" not in left.stdout
    assert "sleep 1" not in session.exec(LIST_PROCS).stdout


def test_timeout_kills_the_whole_tree(session: Session) -> None:
    # durations no other test uses: the host check below sees every worker's processes
    a, b, c, d = (secrets.randbelow(10**9) + 10**9 for _ in range(4))
    cmd = f"sleep {a} & setsid sleep {b} & (sleep {c} &); sleep {d}"
    r = session.exec(cmd, timeout=1)
    assert r.timed_out and r.exit_code != 0
    procs = session.exec(LIST_PROCS).stdout
    assert not any(f"sleep {n}" in procs for n in (a, b, c, d)), procs
    # nothing escaped to the host either (the local backend's processes are host processes)
    host = " ".join(
        Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")
        for p in os.listdir("/proc")
        if p.isdigit() and os.path.exists(f"/proc/{p}/cmdline")
    )
    assert f"sleep {b}" not in host.replace("\0", " ")


def test_kill_all_ends_background_processes(session: Session) -> None:
    session.exec("nohup sleep 4646 >/dev/null 2>&1 &")
    session.kill_all()
    assert "sleep 4646" not in session.exec(LIST_PROCS).stdout
    assert session.exec("echo alive").stdout == "alive\n"  # the session survives


def test_no_network_interface_but_loopback(session: Session) -> None:
    r = session.exec("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert r.stdout.split() == ["lo"]


def test_copy_in_and_out_keep_symlinks_unfollowed(session: Session, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "f.txt").write_text("payload")
    os.symlink("/etc/hostname", src / "link")
    session.copy_in(src, "/root/incoming")
    r = session.exec("cat /root/incoming/sub/f.txt; readlink /root/incoming/link")
    assert r.stdout == "payload/etc/hostname\n"
    session.exec("mkdir -p /root/out && echo o > /root/out/o && ln -s /etc/passwd /root/out/pw")
    session.copy_out("/root/out", tmp_path / "out")
    assert (tmp_path / "out" / "o").read_text() == "o\n"
    assert (tmp_path / "out" / "pw").is_symlink()
    assert os.readlink(tmp_path / "out" / "pw") == "/etc/passwd"
    session.copy_in(src / "sub" / "f.txt", "/root/single.txt")
    session.copy_out("/root/single.txt", tmp_path / "single.txt")
    assert (tmp_path / "single.txt").read_text() == "payload"


def test_empty_keeps_directories_and_never_follows_links(session: Session) -> None:
    session.exec("mkdir -p /root/work/sub /tmp/outside && echo 1 > /root/work/a && "
                 "echo 2 > /root/work/.hidden && echo 3 > /root/work/sub/b && "
                 "echo 4 > /tmp/outside/precious && ln -s /tmp/outside /root/work/link && "
                 "ln -s /tmp/outside /root/dirlink && echo 5 > /root/file")
    session.empty(["/root/work", "/root/dirlink", "/root/file", "/root/missing"],
                  make_dir="/logs/verifier/deep")
    r = session.exec("ls -A /root/work; echo --; ls -A /root; echo --; cat /tmp/outside/precious;"
                     " stat -c %a /logs/verifier/deep")
    work, root, rest = r.stdout.split("--\n")
    assert work == ""  # emptied, kept
    assert "work" in root.split() and "dirlink" not in root.split() and "file" not in root.split()
    assert rest.split() == ["4", "755"]  # the link's target untouched
    session.exec("echo again > /root/work/new")  # the directory still works
    assert session.exec("cat /root/work/new").stdout == "again\n"


def test_copy_out_of_missing_path_is_an_error(session: Session, tmp_path: Path) -> None:
    with pytest.raises(SandboxError):
        session.copy_out("/root/does-not-exist", tmp_path / "x")


def test_pids_limit_is_enforced(backend: Backend, image: ImageRef) -> None:
    s = backend.start(image, limits=Limits(pids_limit=32))
    try:
        r = s.exec(
            [
                "python3",
                "-c",
                "import subprocess\nps = []\n"
                "for _ in range(100):\n"
                "    try: ps.append(subprocess.Popen(['sleep', '30']))\n"
                "    except OSError: break\nprint(len(ps))",
            ],
            timeout=60,
        )
        assert r.stdout.strip().isdigit(), r.stderr
        assert int(r.stdout) < 32
    finally:
        s.stop()


def test_memory_limit_is_enforced(backend: Backend, image: ImageRef) -> None:
    s = backend.start(image, limits=Limits(memory_mb=64))
    try:
        hog = "b = bytearray(400 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('fit')"
        r = s.exec(["python3", "-c", hog], timeout=60)
        assert r.exit_code != 0 and "fit" not in r.stdout
    finally:
        s.stop()


def test_stop_is_idempotent_and_final(backend: Backend, image: ImageRef) -> None:
    s = backend.start(image, limits=Limits())
    s.exec("sleep 1000 &")
    s.stop()
    s.stop()
    with pytest.raises(SandboxError):
        s.exec("true")


def test_verifier_runtime_gives_pytest_ctrf(backend: Backend, image: ImageRef) -> None:
    from posttrain_arena.sandbox.runtime import verifier_runtime

    mount, env = verifier_runtime()
    s = backend.start(image, limits=Limits(), mounts=[mount])
    try:
        s.exec("printf 'def test_a():\\n    assert True\\n' > /root/test_v.py")
        r = s.exec(
            "python3 -m pytest -q -p no:cacheprovider --ctrf /tmp/c.json test_v.py "
            "&& cat /tmp/c.json",
            env=env,
            timeout=60,
        )
        assert r.exit_code == 0, r.stdout + r.stderr
        assert '"passed": 1' in r.stdout
        # the runtime is read-only to whoever runs in the session
        assert s.exec("echo x > /opt/arena-runtime/ctrf_plugin.py").exit_code != 0
    finally:
        s.stop()


def test_a_file_cannot_exceed_the_storage_limit(backend: Backend, image: ImageRef) -> None:
    s = backend.start(image, limits=Limits(storage_mb=4))
    try:
        r = s.exec("head -c 8000000 /dev/zero > /root/big; wc -c < /root/big")
        assert int(r.stdout.strip()) <= 4 << 20
    finally:
        s.stop()


def test_mounts_are_visible_and_copyable(backend: Backend, image: ImageRef, tmp_path: Path) -> None:
    from posttrain_arena.sandbox import Mount

    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    (ro / "given.txt").write_text("given")
    s = backend.start(
        image,
        limits=Limits(),
        mounts=[
            Mount(source=ro, target="/verifier", read_only=True),
            Mount(source=rw, target="/logs/out", read_only=False),
        ],
    )
    try:
        r = s.exec("cat /verifier/given.txt; echo w > /logs/out/w.txt; echo x > /verifier/x")
        assert r.stdout == "given" and r.exit_code != 0
        assert (rw / "w.txt").read_text() == "w\n" and not (ro / "x").exists()
        s.copy_out("/verifier/given.txt", tmp_path / "back.txt")
        assert (tmp_path / "back.txt").read_text() == "given"
        s.copy_in(ro / "given.txt", "/logs/out/in.txt")
        assert s.exec("cat /logs/out/in.txt").stdout == "given"
    finally:
        s.stop()


# linux/capability.h numbers, written out here rather than taken from the code under test
_CAP_NUMBERS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5,
                "SETGID": 6, "SETUID": 7, "NET_BIND_SERVICE": 10}


def test_root_has_only_the_session_capabilities_and_cannot_gain_more(session: Session) -> None:
    from posttrain_arena.sandbox.base import SESSION_CAPABILITIES

    expected = sum(1 << _CAP_NUMBERS[name] for name in SESSION_CAPABILITIES)
    assert set(SESSION_CAPABILITIES) <= set(_CAP_NUMBERS)
    status = session.exec("grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status",
                          timeout=30, user="root").stdout
    fields = dict(line.split(":\t") for line in status.strip().splitlines())
    assert int(fields["CapEff"], 16) == expected, fields
    assert int(fields["CapBnd"], 16) == expected, fields
    assert fields["NoNewPrivs"].strip() == "1"
    # SYS_ADMIN is gone: no mounts; MKNOD is gone: no device nodes
    denied = session.exec("mount -t tmpfs none /tmp 2>&1; mknod /tmp/sda b 8 0 2>&1",
                          timeout=30, user="root")
    assert "permitted" in denied.stdout.lower() or "denied" in denied.stdout.lower()
    assert session.exec("test -e /tmp/sda", timeout=30).exit_code != 0
