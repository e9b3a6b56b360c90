"""Teacher rollouts keep only verified trajectories and report coverage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain_arena.agents.model import AgentSettings, ModelAgent
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.task_format.package import load_task
from posttrain_arena.train.recipe import TeacherSection
from posttrain_arena.train.teacher import OracleTeacherAgent, run_teacher
from posttrain_arena.trial.executor import ThreadExecutor
from posttrain_arena.trial.runner import TrialRunner

from .taskkit import make_word_task


@pytest.mark.bwrap
def test_model_teacher_attempts_and_threshold(tmp_path: Path, train_cache: Path) -> None:
    right = load_task(make_word_task(tmp_path / "envs" / "right", word="plum",
                                     prompt="Put the fruit plum into answer.txt."))
    wrong = load_task(make_word_task(tmp_path / "envs" / "wrong", word="kiwi",
                                     prompt="Put the fruit kiwi into answer.txt."))
    model = ScriptedModel(scripts=[
        ("plum", [{"bash": "echo plum > answer.txt"}, {"submit": True}]),
        ("kiwi", [{"bash": "echo lime > answer.txt"}, {"submit": True}]),
    ])
    runner = TrialRunner("local")
    work = tmp_path / "teacher"
    work.mkdir()
    cfg = TeacherSection(kind="endpoint", base_url="http://127.0.0.1:9/v1", model="scripted",
                         attempts=2, accept_threshold=1.0)
    coverage = run_teacher(
        [right, wrong], cfg, run_job=ThreadExecutor(runner).run,
        make_agent=lambda t: ModelAgent(model, AgentSettings(max_turns=4), name="teacher"),
        work_dir=work, concurrency=2, seed=0)
    assert coverage["covered"] == 1 and coverage["coverage"] == 0.5
    assert "below the acceptance threshold" in coverage["uncovered"]["wrong"]
    attempts = [json.loads(x) for x in (work / "attempts.jsonl").read_text().splitlines()]
    assert sorted(a["task"] for a in attempts) == ["right", "wrong", "wrong"]  # 1 kept, 2 tries
    kept = [json.loads(x) for x in (work / "trajectories.jsonl").read_text().splitlines()]
    assert [k["task"] for k in kept] == ["right"] and kept[0]["reward"] == 1.0
    assert kept[0]["messages"][-1]["role"] == "assistant"

    # Resume: a second call reuses the recorded attempts instead of running again.
    again = run_teacher([right, wrong], cfg, run_job=lambda job: pytest.fail("reran"),
                        make_agent=lambda t: OracleTeacherAgent(None), work_dir=work,
                        concurrency=1, seed=0)
    assert again["covered"] == 1
