"""Harbor's [[steps]]: step by step in one environment, per-step verifiers, mean/final."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.interop.harbor_kit import write_multistep_task

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.agents.script import ScriptAgent
from posttrain_arena.spec.checks import check_task
from posttrain_arena.spec.package import load_task
from posttrain_arena.spec.steps import aggregate
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
    with TrialRunner(backend, warm_pool=False) as runner:
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
