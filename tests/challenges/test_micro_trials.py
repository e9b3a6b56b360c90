"""Generated micro packages behave as tasks: the oracle passes, doing nothing fails."""

from __future__ import annotations

import random

import pytest

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.challenges.micro.build import write_package
from posttrain_arena.challenges.micro.families import ALL_FAMILIES
from posttrain_arena.task_format.package import load_task
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner

pytestmark = pytest.mark.bwrap


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner("local")


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=lambda f: f.name)
def test_oracle_scores_one_and_empty_trial_does_not(family, runner, tmp_path) -> None:
    inst = family.generate(random.Random(f"trials:{family.name}"))
    task = load_task(write_package(inst, tmp_path / inst.name))
    oracle = runner.run(task, OracleAgent())
    assert oracle.outcome is Outcome.SCORED, oracle.reason
    assert oracle.reward == 1.0
    empty = runner.run(task, EmptyAgent())
    assert empty.outcome is Outcome.SCORED, empty.reason
    assert (empty.reward or 0.0) < 1.0
