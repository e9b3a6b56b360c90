"""Nothing the verifier resolves comes from the state (issue 24, item 1). A test.sh in
the common shape `cd`s into the workdir and runs `python3 -m pytest`, a `python3 -`
heredoc, or a login shell; the agent plants what each would look up there: a
pytest.py, a module the heredoc imports, a ~/.profile (the workdir is HOME, /root).
None of them runs: the verifier's Python has PYTHONSAFEPATH=1 and its HOME is new."""

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

VERDICT = ('if [ "$ok" = 0 ]; then echo 1.0 > "$BENCHFLOW_REWARD_TEXT"; '
           'else echo 0.0 > "$BENCHFLOW_REWARD_TEXT"; fi\n')

VERIFIERS = {
    "python3 -m pytest": '#!/bin/bash\ncd "$BENCHFLOW_WORKSPACE"\n'
        'python3 -m pytest -q -p no:cacheprovider "$BENCHFLOW_VERIFIER_DIR/test_outputs.py"\n'
        'ok=$?\n' + VERDICT,
    "python3 - heredoc": '#!/bin/bash\ncd "$BENCHFLOW_WORKSPACE"\npython3 - <<\'EOF\'\n'
        'import os, sys\nimport textwrap\n'
        'want = open(os.environ["BENCHFLOW_VERIFIER_DIR"] + "/expected.txt").read().strip()\n'
        'got = open("answer.txt").read().strip() if os.path.exists("answer.txt") else ""\n'
        'sys.exit(0 if got == want else 1)\nEOF\nok=$?\n' + VERDICT,
    "login shell": '#!/bin/bash\ncd "$BENCHFLOW_WORKSPACE"\n'
        'bash -lc \'grep -qxF "$(cat "$BENCHFLOW_VERIFIER_DIR/expected.txt")" answer.txt\'\n'
        'ok=$?\n' + VERDICT,
}

PLANTS = {
    "python3 -m pytest": ("pytest.py", "import sys\nsys.exit(0)\n"),
    "python3 - heredoc": ("textwrap.py", "import sys\nsys.exit(0)\n"),
    "login shell": (".profile", "exit 0\n"),
}


class Plants:
    name = "plants"

    def __init__(self, name: str, text: str) -> None:
        self.file, self.text = name, text

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        shell.exec(f"cat > {self.file} <<'EOF'\n{self.text}EOF\n")
        return AgentRun(transcript=Transcript(messages=[Message(role="user",
                                                                 content=ctx.prompt)]))


@pytest.mark.parametrize("isolation", ["fresh", "shared"])
@pytest.mark.parametrize("pattern", list(VERIFIERS))
def test_what_the_verifier_looks_up_is_never_the_agents(
    tmp_path: Path, backend_name: str, pattern: str, isolation: str,
    runner_factory: Callable[..., TrialRunner],
) -> None:
    root = tmp_path / "task"
    make_task(root, verifier="sh", isolation=isolation)
    (root / "verifier" / "test.sh").write_text(VERIFIERS[pattern])
    task = load_task(root)
    runner = runner_factory(backend_name)
    oracle = runner.run(task, OracleAgent())
    assert (oracle.outcome, oracle.reward) == (Outcome.SCORED, 1.0), oracle.reason
    attacked = runner.run(task, Plants(*PLANTS[pattern]))
    assert attacked.reward == 0.0, (attacked.outcome, attacked.reason)


def test_a_verifier_script_still_imports_its_siblings(
    tmp_path: Path, backend_name: str, runner_factory: Callable[..., TrialRunner],
) -> None:
    """PYTHONSAFEPATH takes a script's own directory off sys.path; the read-only
    verifier directory is PYTHONPATH instead, so `python3 check.py` importing its
    helper module (a published pattern) still works, from the workdir too."""
    root = tmp_path / "task"
    make_task(root, verifier="sh")
    vdir = root / "verifier"
    (vdir / "helper.py").write_text(
        "import os\n\ndef expected():\n"
        "    return open(os.path.join(os.path.dirname(__file__), 'expected.txt')).read()\n")
    (vdir / "check.py").write_text(
        "import sys\nimport helper\n"
        "sys.exit(0 if open('answer.txt').read().strip() == helper.expected().strip() "
        "else 1)\n")
    (vdir / "test.sh").write_text('#!/bin/bash\ncd "$BENCHFLOW_WORKSPACE"\n'
                                  'python3 "$BENCHFLOW_VERIFIER_DIR/check.py"\nok=$?\n'
                                  + VERDICT)
    result = runner_factory(backend_name).run(load_task(root), OracleAgent())
    assert (result.outcome, result.reward) == (Outcome.SCORED, 1.0), result.reason
