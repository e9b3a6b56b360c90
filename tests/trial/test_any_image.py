"""Verification in any image (issue 24, item 6): the harness brings its own static
supervisor and restores the state itself, so a task whose image has no python3, no tar,
no bash, no `env` (POSIX sh only), or nothing but busybox verifies like any other: a
right answer scores 1.0 and doing nothing 0.0, on both backends."""

from __future__ import annotations

import io
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell
from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.transcript import Message, Transcript
from posttrain_arena.task_format.package import TaskPackage, load_task
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner

from .taskkit import make_task

BUSYBOX_TAG = "arena-test/busybox-only:24"
BUSYBOX_APPLETS = ("sh", "cat", "echo", "rm", "mkdir", "ls", "sleep", "kill", "grep", "true")

IMAGES = {
    "no-python": "FROM debian:bookworm-slim\n",
    # RUN runs under dash: bash, tar and env go, sh stays
    "sh-only": "FROM debian:bookworm-slim\n"
               "RUN rm -f /usr/bin/tar /bin/tar /usr/bin/bash /bin/bash /usr/bin/env\n",
    "busybox-only": f"FROM {BUSYBOX_TAG}\n",
}

TEST_SH = """\
#!/bin/sh
read -r want < "$BENCHFLOW_VERIFIER_DIR/expected.txt"
got=
[ -f "$BENCHFLOW_WORKSPACE/answer.txt" ] && read -r got < "$BENCHFLOW_WORKSPACE/answer.txt"
if [ "$got" = "$want" ]; then echo 1 > "$BENCHFLOW_REWARD_TEXT"
else echo 0 > "$BENCHFLOW_REWARD_TEXT"; fi
"""


class Answers:
    """Writes the task's secret into answer.txt with one POSIX shell command."""

    name = "answers"

    def __init__(self, secret: str, then: str = "true") -> None:
        self.secret, self.then = secret, then

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        result = shell.exec(f"echo {self.secret} > answer.txt && {self.then}")
        transcript = Transcript(messages=[Message(role="user", content=ctx.prompt)])
        return AgentRun(transcript=transcript, info={"exit": result.exit_code})


def _busybox_image() -> None:
    """A docker image holding nothing but a static busybox (and /etc/passwd)."""
    import docker

    client = docker.from_env(timeout=60)
    try:
        client.images.get(BUSYBOX_TAG)
        return
    except docker.errors.ImageNotFound:
        pass
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.skip("busybox-static is not installed (scripts/setup.sh --system)")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "root", "tmp", "etc"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        tar.add(busybox, arcname="bin/busybox")
        for applet in BUSYBOX_APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
        passwd = b"root:x:0:0:root:/root:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        tar.addfile(info, io.BytesIO(passwd))
    client.api.import_image_from_data(buf.getvalue(), repository=BUSYBOX_TAG.split(":")[0],
                                      tag=BUSYBOX_TAG.split(":")[1])


def _task(root: Path, image: str, verifier: str) -> tuple[TaskPackage, str]:
    make_task(root, verifier="sh", dockerfile=IMAGES[image] + "WORKDIR /root\n")
    (root / "verifier" / "test_outputs.py").unlink()
    if verifier == "sh":
        (root / "verifier" / "test.sh").write_text(TEST_SH)
    secret = (root / "verifier" / "expected.txt").read_text().strip()
    return load_task(root), secret


@pytest.mark.parametrize("image", list(IMAGES))
def test_oracle_one_empty_zero_in_any_image(
    tmp_path: Path, backend_name: str, image: str,
    runner_factory: Callable[..., TrialRunner],
) -> None:
    if image == "busybox-only" and backend_name == "docker":
        _busybox_image()
    if image == "sh-only" and backend_name == "local":
        pytest.skip("the local backend's system is the host's, bound read-only: no RUN "
                    "removes a program from it")
    task, secret = _task(tmp_path / "task", image, "sh")
    runner = runner_factory(backend_name)
    right = runner.run(task, Answers(secret))
    assert (right.outcome, right.reward) == (Outcome.SCORED, 1.0), right.reason
    empty = runner.run(task, EmptyAgent())
    assert (empty.outcome, empty.reward) == (Outcome.SCORED, 0.0), empty.reason


def test_deep_and_non_utf8_state_restores_without_tar(
    tmp_path: Path, runner_factory: Callable[..., TrialRunner],
) -> None:
    """The supervisor's own restore takes names that are not UTF-8 and a deep tree."""
    pytest.importorskip("docker")
    task, secret = _task(tmp_path / "task", "sh-only", "sh")
    (task.root / "verifier" / "test.sh").write_text(TEST_SH.replace(
        'read -r want < "$BENCHFLOW_VERIFIER_DIR/expected.txt"',
        'read -r want < "$BENCHFLOW_VERIFIER_DIR/expected.txt"\n'
        'cd "$BENCHFLOW_WORKSPACE" || exit 3\n'
        'n=0; while [ $n -lt 60 ]; do cd "level-$n" || { echo 0 > "$BENCHFLOW_REWARD_TEXT";'
        ' exit 0; }; n=$((n + 1)); done\n'
        '[ -f leaf ] || { echo 0 > "$BENCHFLOW_REWARD_TEXT"; exit 0; }\n'
        'ls "$BENCHFLOW_WORKSPACE" | grep -q "name-" || want=not-there'))
    task = load_task(task.root)
    deep = "/".join(f"level-{n}" for n in range(60))
    agent = Answers(secret, f"mkdir -p {deep} && echo x > {deep}/leaf && "
                            "echo y > \"name-$(printf '\\377\\376')\"")
    runner = runner_factory("docker")
    result = runner.run(task, agent)
    assert (result.outcome, result.reward) == (Outcome.SCORED, 1.0), result.reason


def test_supervisor_is_static_and_needs_no_interpreter(tmp_path: Path) -> None:
    """What the bundle runs first is one static program: an ELF file without a program
    interpreter (PT_INTERP), so it starts in an image with no loader or libc at all."""
    from posttrain_arena.trial.harness import SUPERVISOR, harness_bundle

    data = (harness_bundle(tmp_path / "cache") / SUPERVISOR).read_bytes()
    assert data[:4] == b"\x7fELF"
    phoff = int.from_bytes(data[0x20:0x28], "little")
    size, count = (int.from_bytes(data[o:o + 2], "little") for o in (0x36, 0x38))
    types = [int.from_bytes(data[phoff + i * size:phoff + i * size + 4], "little")
             for i in range(count)]
    assert types and 3 not in types  # PT_INTERP


def test_a_host_without_a_c_compiler_is_told_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from posttrain_arena.sandbox.base import PrerequisiteError
    from posttrain_arena.trial import harness

    monkeypatch.setattr(harness, "_built", None)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(PrerequisiteError, match="fix: apt-get install gcc libc6-dev"):
        harness.harness_bundle(tmp_path / "cache")
    assert not list((tmp_path / "cache" / "harness").glob(".build-*"))  # nothing half-built
