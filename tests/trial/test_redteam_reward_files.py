"""One reward, read one way (issue 24, item 3). The reward files are judged as the
supervisor saw them after every verifier process ended: a link, FIFO or directory where
one should be is a verifier error, never "absent" so that the other file is read; and a
rubric's dimensions never stand in for a reward that failed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell
from posttrain_arena.agents.transcript import Message, Transcript
from posttrain_arena.task_format.rubric import Dimension, Rubric
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.rubric import apply_rubric
from posttrain_arena.trial.runner import TrialRunner
from posttrain_arena.trial.verifier import VerifierReading, read_reward

from .taskkit import make_task

# A verifier as many are written: run the agent's program, then write the verdict.
VERIFIER_PY = '''\
import os, pathlib, subprocess, sys
ws = pathlib.Path(os.environ["BENCHFLOW_WORKSPACE"])
expected = (pathlib.Path(__file__).parent / "expected.txt").read_text().strip()
run = subprocess.run([sys.executable, str(ws / "solution.py")], capture_output=True,
                     text=True, cwd=str(ws))
ok = run.stdout.strip() == expected
with open(os.environ["BENCHFLOW_REWARD_TEXT"], "w") as fh:
    fh.write("1.0\\n" if ok else "0.0\\n")
'''

# The agent's program, run by the verifier: a 1.0 in reward.json, and reward.txt made a
# link the copy out leaves behind, so that the verifier's 0.0 goes elsewhere (before,
# reward.txt then read as absent and reward.json's 1.0 was the reward).
SOLUTION = '''\
import json, os
txt = os.environ["BENCHFLOW_REWARD_TEXT"]
with open(os.path.join(os.path.dirname(txt), "reward.json"), "w") as fh:
    json.dump({"reward": 1.0}, fh)
os.symlink("/tmp/elsewhere", txt)
print("wrong answer")
'''


class Plants:
    name = "plants"

    def __init__(self, source: str) -> None:
        self.source = source

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        shell.exec(f"cat > solution.py <<'EOF'\n{self.source}EOF\n")
        return AgentRun(transcript=Transcript(messages=[Message(role="user",
                                                                 content=ctx.prompt)]))


def test_a_link_for_a_reward_file_is_a_verifier_error(
    tmp_path: Path, backend_name: str, runner_factory: Callable[..., TrialRunner],
) -> None:
    task = make_task(tmp_path / "task", verifier_py=VERIFIER_PY)
    result = runner_factory(backend_name).run(task, Plants(SOLUTION))
    assert result.reward is None and result.outcome is Outcome.VERIFIER_ERROR, result.reason
    assert "reward.txt" in (result.reason or "")


def test_rubric_dimensions_never_override_a_failed_reward(tmp_path: Path) -> None:
    rubric = Rubric(dimensions={"correctness": Dimension(weight=1.0)})
    (tmp_path / "reward.txt").write_text("0.0\n")
    (tmp_path / "reward.json").write_text(json.dumps({"reward": 1.0, "correctness": 1.0}))
    reward, reason = read_reward(tmp_path)
    assert reward is None  # the two files disagree
    got = apply_rubric(rubric, tmp_path, VerifierReading(reward, reason), exited_normally=True)
    assert got.reward is None and "reward.txt" in (got.reason or "")
