"""SessionShell.run_with: files and the command in one exec where copies are engine
round trips, the two calls otherwise or when the session's tar cannot unpack."""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from posttrain_arena.sandbox.base import ExecResult
from posttrain_arena.trial.shell import SessionShell


class HostSession:
    """Runs each command with bash on the host under `root` (paths prefixed)."""

    def __init__(self, root: Path, *, tar: bool = True, host_copies: bool = False) -> None:
        self.root = root
        self.tar = tar
        self.host_copies = host_copies
        self.calls: list[tuple[str, Any]] = []

    def exec(self, command: str | list[str], *, stdin: bytes | None = None,
             env: Mapping[str, str] | None = None, **_: Any) -> ExecResult:
        # the shell runs agent commands as plain_shell(command): the command is its last word
        assert isinstance(command, list) and command[:2] == ["/bin/sh", "-c"]
        command = command[-1]
        self.calls.append(("exec", stdin))
        text = command.replace(" /", f" {self.root}/")
        if not self.tar:
            text = re.sub(r"\btar\b", "no-such-tar", text, count=1)
        done = subprocess.run(["bash", "-c", text], input=stdin or b"", capture_output=True,
                              env={"PATH": "/usr/bin:/bin", **(env or {})})
        return ExecResult(done.returncode, done.stdout.decode(), done.stderr.decode(), False)

    def copy_in(self, src: Path, dest: str, *, own_tools: bool = False) -> None:
        self.calls.append(("copy_in", dest))
        target = self.root / dest.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            (target / f.name).write_bytes(f.read_bytes())


@pytest.fixture
def script_dir(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "run.sh").write_text(
        'echo ran $(cat "$(dirname "$0")/data.txt"); read -r x && echo stdin:$x\n')
    (src / "data.txt").write_text("payload\n")
    return src


@pytest.mark.parametrize(("host_copies", "tar", "calls"), [
    (False, True, ["exec"]),  # one exec: the tar arrives on its stdin
    (True, True, ["copy_in", "exec"]),  # host copies are cheapest
    (False, False, ["exec", "copy_in", "exec"]),  # no tar in the image: the two calls
])
def test_run_with(tmp_path: Path, script_dir: Path, host_copies: bool, tar: bool,
                  calls: list[str]) -> None:
    root = tmp_path / "session"
    root.mkdir()
    session = HostSession(root, tar=tar, host_copies=host_copies)
    shell = SessionShell(session, "/", time.monotonic() + 60)  # type: ignore[arg-type]
    result = shell.run_with(script_dir, "/box", "bash /box/run.sh")
    assert result.exit_code == 1 and result.stdout == "ran payload\n"  # stdin at its end
    assert [c[0] for c in session.calls] == calls
    if calls == ["exec"]:
        with tarfile.open(fileobj=io.BytesIO(session.calls[0][1])) as tar:
            assert sorted(tar.getnames()) == ["box", "box/data.txt", "box/run.sh"]


def test_a_command_that_fails_like_the_unpack_is_not_run_twice(tmp_path: Path,
                                                               script_dir: Path) -> None:
    root = tmp_path / "session"
    root.mkdir()
    session = HostSession(root)
    shell = SessionShell(session, "/", time.monotonic() + 60)  # type: ignore[arg-type]
    forged = "echo posttrain-arena-unpack-failed-0000000000000000 >&2; exit 86"
    result = shell.run_with(script_dir, "/box", forged)
    assert result.exit_code == 86 and [c[0] for c in session.calls] == ["exec"]
