"""Recipes: every checked-in recipe validates, plans and dry-runs; errors say where."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from posttrain_arena.cli.main import app
from posttrain_arena.train.pipeline import run_recipe, stage_graph
from posttrain_arena.train.plan import plan
from posttrain_arena.train.recipe import RecipeError, load_recipe, parse_recipe


class _Bodies:
    """Stands in for the stage bodies: stage_graph only names them."""

    def __getattr__(self, name: str) -> Any:
        return lambda ctx: None


RECIPES = sorted((Path(__file__).parents[2] / "recipes").glob("*.toml"))


def test_there_are_gpu_recipes() -> None:
    names = {p.name for p in RECIPES}
    assert {"qwen3.5-9b.toml", "qwen3-8b.toml"} <= names


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_recipe_validates_plans_and_dry_runs(path: Path, tmp_path: Path) -> None:
    cli = CliRunner()
    for args in (["validate"], ["plan"], ["run", "--dry-run"]):
        res = cli.invoke(app, ["train", *args, str(path)])
        assert res.exit_code == 0, res.output
    recipe = load_recipe(path)
    p = plan(recipe)
    # The plan sizes every stage the pipeline runs, in its order.
    assert [s.name for s in p.stages] == [s.name for s in stage_graph(recipe, _Bodies())]
    score = run_recipe(recipe, run_dir=tmp_path / "run", dry_run=True)
    assert score.status == "dry-run" and score.plan is not None
    assert not (tmp_path / "run").exists()  # a dry run writes nothing


def test_gpu_recipe_is_what_the_arena_publishes() -> None:
    r = load_recipe(next(p for p in RECIPES if p.name == "qwen3.5-9b.toml"))
    assert r.model.id == "Qwen/Qwen3.5-9B"
    assert r.teacher.kind == "endpoint" and r.teacher.model == "Qwen/Qwen3.5-397B-A17B"
    assert r.sft.method == "lora" and r.sft.epochs == 1.0
    assert r.grpo.method == "lora" and r.grpo.policy_endpoint


def _data(path: Path) -> dict:
    return tomllib.loads(path.read_text())


def test_errors_name_the_field(tmp_path: Path) -> None:
    data = _data(RECIPES[0])
    data["sft"]["learing_rate"] = 1e-4
    data["model"]["revision"] = "main"
    with pytest.raises(RecipeError) as err:
        parse_recipe(data, base_dir=tmp_path, where="r.toml")
    text = str(err.value)
    assert "r.toml: sft.learing_rate: is not a recipe field" in text
    assert "r.toml: model: " in text and "commit sha" in text


def test_recipe_hash_tracks_what_changes_results(tmp_path: Path) -> None:
    data = _data(RECIPES[0])
    base = parse_recipe(data, base_dir=tmp_path).recipe_hash()
    moved = dict(data, output={"dir": "elsewhere"})
    assert parse_recipe(moved, base_dir=tmp_path).recipe_hash() == base
    tuned = dict(data, sft={**data["sft"], "learning_rate": 3e-4})
    assert parse_recipe(tuned, base_dir=tmp_path).recipe_hash() != base


def test_plan_at_reference_scale(tmp_path: Path) -> None:
    """2,238 training and 366 held-out tasks: plan lists folders, parses nothing."""
    for root, n in ((tmp_path / "train" / "envs", 2238), (tmp_path / "suite", 366)):
        for i in range(n):
            d = root / f"task-{i:04d}"
            d.mkdir(parents=True)
            (d / "task.md").write_text("not parsed by plan\n")
    data = _data(next(p for p in RECIPES if p.name == "qwen3.5-9b.toml"))
    data["train"]["collection"] = str(tmp_path / "train")
    data["eval"]["suite"] = str(tmp_path / "suite")
    p = plan(parse_recipe(data, base_dir=tmp_path))
    assert (p.train_tasks, p.held_out_tasks) == (2238, 366)
    stages = {s.name: s for s in p.stages}
    assert stages["baseline"].trials == 366 * data["runtime"]["k"]
    assert stages["teacher"].trials == 2238 * data["teacher"]["attempts"]
    assert p.total_trials == sum(s.trials for s in p.stages if not s.skipped)
    res = CliRunner().invoke(app, ["train", "plan", "--help"])
    assert res.exit_code == 0


def test_validate_prints_json(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["train", "validate", str(RECIPES[0])])
    out = json.loads(res.stdout)
    assert out["ok"] is True and out["recipe_hash"].startswith("sha256:")
    bad = tmp_path / "bad.toml"
    bad.write_text("[model]\nid = 3\n")
    res = CliRunner().invoke(app, ["train", "validate", str(bad)])
    assert res.exit_code == 1
    assert "model.id" in json.loads(res.stdout)["error"]


def test_run_refuses_to_overwrite_without_resume(tmp_path: Path) -> None:
    text = RECIPES[0].read_text()
    assert 'dir = "../runs"' in text
    recipe_file = tmp_path / "r.toml"
    recipe_file.write_text(text.replace('dir = "../runs"', f'dir = "{tmp_path / "runs"}"'))
    (tmp_path / "runs" / "taken" / "stages").mkdir(parents=True)
    res = CliRunner().invoke(app, ["train", "run", str(recipe_file), "--run-name", "taken"])
    assert res.exit_code == 2
    assert "--resume" in res.stderr


def test_a_policy_server_is_the_operators_or_the_pipelines_not_both(tmp_path: Path) -> None:
    data = _data(RECIPES[0])
    data["runtime"] = {**data["runtime"], "policy_endpoint": "http://x:8000/v1",
                       "serve_policy": True}
    with pytest.raises(RecipeError, match="not both"):
        parse_recipe(data, base_dir=tmp_path)


def test_completeness_is_stated_in_the_recipe(tmp_path: Path) -> None:
    data = _data(RECIPES[0])
    data["eval"] = {**data["eval"], "completeness": {"min_scored_share": 0.9,
                                                     "min_task_scored_share": 0.75}}
    r = parse_recipe(data, base_dir=tmp_path)
    assert (r.eval.completeness.min_scored_share, r.eval.completeness.min_task_scored_share) \
        == (0.9, 0.75)
    assert r.recipe_hash() != parse_recipe(_data(RECIPES[0]), base_dir=tmp_path).recipe_hash()
