"""Harbor's [[steps]]: step by step in one environment, per-step verifiers, mean/final."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.interop.harbor_kit import write_multistep_task

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.agents.script import ScriptAgent
from posttrain_arena.task_format.checks import check_task
from posttrain_arena.task_format.package import load_task
from posttrain_arena.task_format.steps import aggregate
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner


def test_aggregation() -> None:
    assert aggregate([1.0, 0.0], "mean") == 0.5
    assert aggregate([1.0, 0.0], "final") == 0.0
    with pytest.raises(ValueError):
        aggregate([], "mean")


def test_steps_load(tmp_path: Path) -> None:
    report = check_task(write_multistep_task(tmp_path / "t"))
    assert report.ok, [f.render() for f in report.findings]
    task = report.package
    assert task is not None and [s.name for s in task.steps] == ["write", "append"]
    assert task.steps[1].agent_timeout_sec == 60 and task.step_strategy == "mean"
    assert task.prompt.startswith("Write the line")


@pytest.mark.parametrize(("edit", "code"), [
    (lambda t: t.replace('"mean"', '"max"'), "steps"),
    (lambda t: t + '\n[[steps]]\nname = "write"\n', "steps"),
    (lambda t: t + '\n[[steps]]\nname = "gate"\nmin_reward = 1\n', "harbor-unsupported"),
])
def test_bad_steps_are_errors(tmp_path: Path, edit, code: str) -> None:  # type: ignore[no-untyped-def]
    root = write_multistep_task(tmp_path / "t")
    (root / "task.toml").write_text(edit((root / "task.toml").read_text()))
    assert code in {f.code for f in check_task(root).errors}


def test_a_step_without_instruction(tmp_path: Path) -> None:
    root = write_multistep_task(tmp_path / "t")
    (root / "steps" / "append" / "instruction.md").unlink()
    [error] = check_task(root).errors
    assert error.code == "prompt" and "append" in error.message


@pytest.mark.parametrize("backend", [pytest.param("local", marks=pytest.mark.bwrap),
                                     pytest.param("docker", marks=pytest.mark.docker)])
def test_steps_run_in_one_environment_with_per_step_verifiers(tmp_path: Path,
                                                              backend: str) -> None:
    mean = load_task(write_multistep_task(tmp_path / "mean"))
    final = load_task(write_multistep_task(tmp_path / "final", strategy="final"))
    # does step 1 only: its verifier passes, step 2's does not
    half = tmp_path / "half.sh"
    half.write_text("#!/bin/bash\n[ -f /app/log.txt ] || echo one > /app/log.txt\n")
    with TrialRunner(backend, warm_pool=False, records_root=tmp_path / "rec") as runner:
        oracle = runner.run(mean, OracleAgent())
        empty = runner.run(mean, EmptyAgent())
        partial = runner.run(mean, ScriptAgent(half))
        partial_final = runner.run(final, ScriptAgent(half))
    assert oracle.outcome is Outcome.SCORED and oracle.reward == 1.0, oracle.reason
    steps = {d.name: d.message for d in oracle.details if d.name.startswith("step:")}
    assert steps == {"step:write": "reward 1", "step:append": "reward 1"}
    assert empty.outcome is Outcome.SCORED and empty.reward == 0.0
    assert partial.reward == 0.5, partial.details  # step 1 passed, step 2 failed: mean
    assert partial_final.reward == 0.0  # final: the last step's
    transcript = (Path(oracle.record_dir or "") / "transcript.json").read_text()
    assert "Write the line" in transcript and "Append the line" in transcript  # both steps


PT_TASK_MD = """\
---
version: "1.3"
metadata:
  category: software-engineering
agent:
  timeout_sec: 60
verifier:
  timeout_sec: 60
sandbox:
  workdir: /root
multi_step_reward_strategy: final
steps:
  - name: one
  - name: two
    verifier: {timeout_sec: 30}
---
Two steps.
"""

PT_VERIFIER = """\
import pathlib
want = (pathlib.Path(__file__).parent / "want.txt").read_text()
got = pathlib.Path("/root/log.txt")
ok = got.is_file() and got.read_text() == want
pathlib.Path("/logs/verifier").mkdir(parents=True, exist_ok=True)
pathlib.Path("/logs/verifier/reward.txt").write_text("1.0" if ok else "0.0")
"""


def _posttrain_steps(root: Path) -> Path:
    files = {
        "task.md": PT_TASK_MD,
        "environment/Dockerfile": "FROM posttrain-arena/python:bookworm\nWORKDIR /root\n",
        "verifier/verifier.py": PT_VERIFIER,
        "steps/one/prompt.md": "Write a to /root/log.txt.",
        "steps/one/verifier/want.txt": "a\n",
        "steps/one/oracle/solve.sh": "echo a > /root/log.txt\n",
        "steps/two/prompt.md": "Append b.",
        "steps/two/verifier/want.txt": "a\nb\n",
        "steps/two/oracle/solve.sh": "echo b >> /root/log.txt\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.bwrap
def test_packages_declare_steps_the_same_way(tmp_path: Path) -> None:
    task = load_task(_posttrain_steps(tmp_path / "pt"))
    assert [s.name for s in task.steps] == ["one", "two"] and task.step_strategy == "final"
    assert task.steps[1].verifier_timeout_sec == 30
    with TrialRunner("local", warm_pool=False) as runner:
        oracle = runner.run(task, OracleAgent())
        empty = runner.run(task, EmptyAgent())
    assert oracle.reward == 1.0 and empty.reward == 0.0, (oracle.reason, empty.reason)


def test_convert_refuses_steps(tmp_path: Path) -> None:
    from posttrain_arena.task_format.convert import convert
    from posttrain_arena.task_format.findings import SpecError
    from posttrain_arena.task_format.layout import Layout

    with pytest.raises(SpecError, match="multi-step"):
        convert(write_multistep_task(tmp_path / "h"), Layout.POSTTRAIN, tmp_path / "o")
