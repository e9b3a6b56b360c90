"""Replays of real packages on both backends: the starting-kit examples (oracle 1.0,
empty trial below 1.0) and a package in the existing PostTrain layout, offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.task_format.package import load_task
from posttrain_arena.trial.replay import replay_collection
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "starting-kit" / "examples"
EXISTING = REPO / "tests" / "fixtures" / "posttrain_format"

pytestmark = pytest.mark.slow


def _examples() -> list[Path]:
    return sorted(d for d in EXAMPLES.iterdir() if (d / "task.md").is_file()) \
        if EXAMPLES.is_dir() else []


def test_there_are_examples_to_replay() -> None:
    assert len(_examples()) >= 5


def test_starting_kit_examples_replay(backend_name: str, tmp_path: Path) -> None:
    with TrialRunner(backend_name, records_root=tmp_path / "records") as runner:
        report = replay_collection(EXAMPLES, runner, jobs=2)
    problems = [f"{c.task} {c.kind}: {c.message}" for c in report.checks if not c.ok]
    assert not problems, "\n".join(problems)
    assert len(report.checks) == 2 * len(_examples())


@pytest.mark.parametrize("package", sorted(p.name for p in EXISTING.iterdir())
                         if EXISTING.is_dir() else [])
def test_existing_format_replays_offline(backend_name: str, tmp_path: Path,
                                         package: str) -> None:
    task = load_task(EXISTING / package)
    assert task.verifier_kind.value == "test.sh"
    assert "BENCHFLOW_SKIP_VERIFIER_DEPS" in (task.verifier_dir / "test.sh").read_text()
    runner = TrialRunner(backend_name, records_root=tmp_path / "records", allow_network=False,
                         warm_pool=False)
    oracle = runner.run(task, OracleAgent())
    assert oracle.outcome is Outcome.SCORED, oracle.reason
    assert oracle.reward == 1.0 and not oracle.network
    assert oracle.details and all(d.status == "passed" for d in oracle.details)
    empty = runner.run(task, EmptyAgent())
    assert empty.outcome is Outcome.SCORED, empty.reason
    assert empty.reward is not None and empty.reward < 1.0
    assert any(d.status == "failed" for d in empty.details)
