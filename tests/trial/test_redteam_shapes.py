"""Every state shape is the agent's failure (issue 24, item 5): a tree thousands of
levels deep, a path over 4 KiB, names that are not UTF-8 (a file, a directory, an
escaping link that is dropped), a FIFO, a sparse 100 GiB file, and a workdir replaced by
a link to `/`. Each ends as a scored 0 with a result.json, never an infra_error, and the
link to `/` is never walked (neither the session's disk nor the host's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell
from posttrain_arena.agents.transcript import Message, Transcript
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner

from .taskkit import make_task

SHAPES = {
    "deep": "python3 -c \"import os\nfor i in range(3000):\n os.mkdir('d'); os.chdir('d')\n"
            "open('f', 'w').write('x')\"",
    "long-path": "python3 -c \"import os\nfor i in range(25):\n os.mkdir('n' * 200);"
                 " os.chdir('n' * 200)\nopen('f', 'w').write('x')\"",
    "not-utf8": "touch \"$(printf 'bad\\377name')\"; mkdir \"$(printf 'dir\\300')\"; "
                "ln -s \"$(printf '/etc/\\377')\" \"$(printf 'link\\377')\"",
    "fifo-and-sparse": "mkfifo pipe && truncate -s 100G big",
    "workdir-link-to-root": "cd / && rm -rf /root && ln -s / /root",
}


class Leaves:
    name = "leaves"

    def __init__(self, command: str) -> None:
        self.command = command

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        result = shell.exec(self.command, timeout=120)
        return AgentRun(transcript=Transcript(messages=[Message(role="user",
                                                                 content=ctx.prompt)]),
                        info={"exit": result.exit_code})


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_state_shape_is_the_agents_failure(
    tmp_path: Path, backend_name: str, shape: str,
    runner_factory: Callable[..., TrialRunner],
) -> None:
    task = make_task(tmp_path / "task", storage_mb=512)
    runner = runner_factory(backend_name)
    result = runner.run(task, Leaves(SHAPES[shape]))
    assert (result.outcome, result.reward) == (Outcome.SCORED, 0.0), result.reason
    assert list((tmp_path / "records").rglob("result.json"))
    if shape == "workdir-link-to-root":  # dropped as a link, nothing under / was read
        assert "storage limit" not in (result.reason or "")
        assert "MiB" not in (result.reason or "")


@pytest.mark.parametrize("shape", ["deep", "not-utf8", "workdir-link-to-root"])
def test_every_state_shape_is_the_agents_failure_in_shared_isolation(
    tmp_path: Path, backend_name: str, shape: str,
    runner_factory: Callable[..., TrialRunner],
) -> None:
    """The same shapes verified in the agent's own session: its change list is walked
    no deeper than a copy goes, and a workdir that became a link is an empty workdir."""
    task = make_task(tmp_path / "task", storage_mb=512, isolation="shared")
    result = runner_factory(backend_name).run(task, Leaves(SHAPES[shape]))
    assert (result.outcome, result.reward) == (Outcome.SCORED, 0.0), result.reason
