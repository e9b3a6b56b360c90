"""[task_gates]: the pipeline trains only on tasks the organizer gates find eligible,
and score.json says which were excluded and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain_arena.train.pipeline import run_recipe
from posttrain_arena.train.plan import plan
from posttrain_arena.train.recipe import RecipeError, parse_recipe
from posttrain_arena.train.sources import taskset_hash

from .taskkit import make_word_task

ACCEPT_ANY = ('import os, pathlib\n'
              'ok = (pathlib.Path(os.environ["BENCHFLOW_WORKSPACE"]) / "answer.txt").exists()\n'
              'out = pathlib.Path(os.environ["BENCHFLOW_REWARD_TEXT"])\n'
              'out.parent.mkdir(parents=True, exist_ok=True)\n'
              'out.write_text("1.0" if ok else "0.0")\n')


def _recipe(tmp: Path, model: Path, gates: dict[str, object]) -> object:
    train, held = tmp / "collection", tmp / "suite"
    (train / "envs").mkdir(parents=True)
    (train / "submission.yaml").write_text(
        "team_name: tests\ncontact_email: t@example.org\ntrack: environments\n")
    make_word_task(train / "envs" / "good", word="hello",
                   prompt="Put a greeting word into answer.txt for the visitors.")
    weak = make_word_task(train / "envs" / "weak", word="apple",
                          prompt="Name a red fruit in answer.txt, lowercase, nothing else.")
    (weak / "verifier" / "verifier.py").write_text(ACCEPT_ANY)
    wrong = make_word_task(train / "envs" / "wrong-oracle", word="blue",
                           prompt="The sky's colour goes into answer.txt as one word.")
    (wrong / "oracle" / "solve.sh").write_text("#!/bin/bash\necho red > answer.txt\n")
    make_word_task(held / "animal", word="cat",
                   prompt="Which pet says meow? Answer in answer.txt with one word.")
    data = {
        "name": "gates-test", "model": {"id": str(model)},
        "train": {"collection": str(train)},
        "eval": {"suite": str(held), "sha256": taskset_hash(held)},
        "teacher": {"kind": "oracle"}, "sft": {"enabled": False}, "grpo": {"enabled": False},
        "agent": {"max_turns": 1, "max_new_tokens": 4, "timeout_sec": 60},
        "runtime": {"sandbox": "local", "concurrency": 2, "k": 1, "seed": 1, "device": "cpu"},
        "output": {"dir": str(tmp / "runs")}, "task_gates": gates,
    }
    return parse_recipe(data, base_dir=tmp)


@pytest.mark.bwrap
@pytest.mark.slow
def test_only_eligible_tasks_are_trained_on_and_the_rest_are_listed(
        tiny_model: Path, tmp_path: Path, train_cache: Path) -> None:
    recipe = _recipe(tmp_path, tiny_model, {"enabled": True, "reruns": 1, "k": 1})
    run_dir = tmp_path / "runs" / "r"
    score = run_recipe(recipe, run_dir=run_dir)  # type: ignore[arg-type]
    excluded = {e.task: e.reasons for e in score.gate_exclusions}
    assert sorted(excluded) == ["weak", "wrong-oracle"]
    assert any(r.startswith("probes: the verifier accepts") for r in excluded["weak"])
    assert any(r.startswith("oracle: the oracle never scores 1.0")
               for r in excluded["wrong-oracle"])
    assert score.task_gates["ran"] is True and score.task_gates["eligible"] == 1
    # the teacher only saw the eligible task
    lines = (run_dir / "stages" / "teacher" / "trajectories.jsonl").read_text().splitlines()
    assert {json.loads(line)["task"] for line in lines} == {"good"}
    for e in score.gate_exclusions:
        assert (run_dir / "stages" / "eligibility" / e.evidence).is_file()
    on_disk = json.loads((run_dir / "score.json").read_text())
    assert {e["task"] for e in on_disk["gate_exclusions"]} == {"weak", "wrong-oracle"}

    # a recipe that does not require the probes keeps the weak task
    relaxed = _recipe(tmp_path / "b", tiny_model, {
        "enabled": True, "reruns": 1, "k": 1,
        "policy": {"gates": ["build", "oracle", "empty"]}})
    score2 = run_recipe(relaxed, run_dir=tmp_path / "runs" / "r2")  # type: ignore[arg-type]
    assert [e.task for e in score2.gate_exclusions] == ["wrong-oracle"]


def test_recipe_gate_fields_are_checked_and_planned(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    with pytest.raises(RecipeError, match="k must be at least 2"):
        _recipe(tmp_path / "a", model, {"enabled": True, "k": 1, "policy": {
            "gates": ["build", "learnable"]}})
    with pytest.raises(RecipeError, match="max_flake_rate"):
        _recipe(tmp_path / "b", model, {"policy": {"max_flake_rate": 2}})
    off = _recipe(tmp_path / "c", model, {})
    on = _recipe(tmp_path / "d", model, {"enabled": True, "reruns": 2, "k": 3})
    stage = {s.name: s for s in plan(on).stages}["eligibility"]  # type: ignore[arg-type]
    assert not stage.skipped and stage.trials == 3 * (2 + 1 + 3 + 3)
    assert {s.name: s for s in plan(off).stages}["eligibility"].skipped  # type: ignore[arg-type]
