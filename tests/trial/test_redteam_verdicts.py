"""No verdict from an exit status alone (issue 24, item 2): a pytest-only verifier that
imports the agent's module is attacked by that module: ending pytest with 0 at import,
before a test is reported, or skipping every test. None scores: the first is a
verifier error (no per-test report), a skip 0.0 or an error (a skip never passes)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.agents.transcript import Message, Transcript
from posttrain_arena.task_format.package import load_task
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner

from .taskkit import make_task

TEST_OUTPUTS = '''\
import os
import pathlib
import sys

sys.path.insert(0, os.environ.get("BENCHFLOW_WORKSPACE", "/root"))
import solution  # the agent's module: the verifier imports it, as many do


def test_answer_matches():
    expected = (pathlib.Path(__file__).parent / "expected.txt").read_text().strip()
    assert solution.answer() == expected
'''

ATTACKS = {
    "exit-0-at-import": "import os\nos._exit(0)\n",
    "skip-at-import": "import pytest\npytest.skip('nothing here', allow_module_level=True)\n",
    "skip-when-called": "import pytest\n\n\ndef answer():\n    pytest.skip('later')\n",
}


class Plants:
    name = "plants"

    def __init__(self, source: str) -> None:
        self.source = source

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        shell.exec(f"cat > solution.py <<'EOF'\n{self.source}EOF\n")
        return AgentRun(transcript=Transcript(messages=[Message(role="user",
                                                                 content=ctx.prompt)]))


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_an_exit_status_alone_is_never_a_verdict(
    tmp_path: Path, backend_name: str, attack: str,
    runner_factory: Callable[..., TrialRunner],
) -> None:
    root = tmp_path / "task"
    make_task(root, verifier="pytest")
    (root / "verifier" / "test_outputs.py").write_text(TEST_OUTPUTS)
    secret = (root / "verifier" / "expected.txt").read_text().strip()
    (root / "oracle" / "solve.sh").write_text(
        "#!/bin/bash\nset -e\ncat > \"$BENCHFLOW_WORKSPACE/solution.py\" <<'EOF'\n"
        f"def answer():\n    return {secret!r}\nEOF\n")
    task = load_task(root)
    runner = runner_factory(backend_name)
    oracle = runner.run(task, OracleAgent())
    assert (oracle.outcome, oracle.reward) == (Outcome.SCORED, 1.0), oracle.reason
    attacked = runner.run(task, Plants(ATTACKS[attack]))
    assert attacked.reward in (None, 0.0), attacked.reason
    if attack == "exit-0-at-import":
        assert attacked.outcome is Outcome.VERIFIER_ERROR
        assert "no per-test report" in (attacked.reason or "")
    elif attack == "skip-when-called":  # pytest exits 0 with every test skipped
        assert attacked.reward == 0.0 and "no test passed" in (attacked.reason or "")
