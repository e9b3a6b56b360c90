"""Reused results are keyed on what produced them: the code's content hash, the recipe,
the model and the suite. A change to any of them measures a shared baseline again."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

import posttrain_arena
from posttrain_arena.codehash import PACKAGE_ROOT, code_hash, source_hash
from posttrain_arena.train import pipeline
from posttrain_arena.train.recipe import Recipe, load_recipe
from posttrain_arena.train.stages import Stage, StageContext, StageRunner

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "qwen3-8b.toml"


def test_the_source_hash_changes_with_any_module_and_nothing_else(tmp_path: Path) -> None:
    tree = tmp_path / "pkg"
    (tree / "sub").mkdir(parents=True)
    (tree / "__init__.py").write_text('__version__ = "0.1.0"\n')
    (tree / "sub" / "steps.py").write_text("RATE = 0.5\n")
    first = source_hash(tree)
    assert source_hash(shutil.copytree(tree, tmp_path / "copy")) == first  # not where

    (tree / "sub" / "__pycache__").mkdir()
    (tree / "sub" / "__pycache__" / "steps.cpython-311.pyc").write_bytes(b"\0compiled")
    (tree / "README.md").write_text("words\n")
    assert source_hash(tree) == first  # compiled files and prose produce nothing

    (tree / "sub" / "steps.py").write_text("RATE = 0.25\n")  # the version string is as was
    edited = source_hash(tree)
    assert edited != first
    (tree / "sub" / "extra.py").write_text("")
    assert source_hash(tree) not in {first, edited}


def test_the_code_hash_is_this_installed_package() -> None:
    assert Path(posttrain_arena.__file__).resolve().parent == PACKAGE_ROOT
    assert code_hash() == source_hash(PACKAGE_ROOT)


class _Bodies:
    """Stage bodies standing in for train.steps.Steps: each records its call; the
    snapshot reports the base model, suite and collection it is given."""

    def __init__(self, calls: list[str], snapshot: dict[str, Any]) -> None:
        self.calls, self.summary = calls, snapshot

    def __getattr__(self, name: str) -> Callable[[StageContext], dict[str, Any]]:
        def body(ctx: StageContext) -> dict[str, Any]:
            self.calls.append(name)
            (ctx.work_dir / f"{name}.json").write_text(str(self.summary))
            return self.summary if name == "snapshot" else {"stage": name}
        return body


def _snapshot(model: str = "m1", suite: str = "s1", collection: str = "c1") -> dict[str, Any]:
    return {"collection": {"content_hash": collection}, "suite": {"content_hash": suite},
            "model": {"id": "base", "revision": None, "content_hash": model,
                      "location": "/models/base"}}


def _baseline_runs(run_dir: Path, shared: Path, recipe: Recipe,
                   snapshot: dict[str, Any]) -> list[str]:
    """The pipeline's own snapshot and baseline stages, sharing through `shared`; which
    bodies ran."""
    calls: list[str] = []
    graph = {s.name: s for s in pipeline.stage_graph(recipe, cast(Any, _Bodies(calls, snapshot)))}
    runner = StageRunner(run_dir, shared=shared)
    for name in ("snapshot", "baseline"):
        runner.run(cast(Stage, graph[name]))
    return calls


def test_a_shared_baseline_is_measured_again_when_what_produced_it_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared, recipe = tmp_path / "shared", load_recipe(RECIPE)
    runs = iter(range(100))

    def measured(recipe: Recipe = recipe, **snapshot: str) -> bool:
        calls = _baseline_runs(tmp_path / f"run-{next(runs)}", shared, recipe,
                               _snapshot(**snapshot))
        return "baseline" in calls

    assert measured()
    assert not measured(collection="c2")  # another collection shares it
    assert measured(model="m2")
    assert measured(suite="s2")
    agent = recipe.agent.model_copy(update={"max_turns": recipe.agent.max_turns + 1})
    assert measured(recipe.model_copy(update={"agent": agent}))
    assert not measured(collection="c3")  # still shared while nothing it depends on moved
    # The code changed (the version string did not): measured again.
    monkeypatch.setattr(pipeline, "code_hash", lambda: "sha256:" + "0" * 64)
    assert measured()
    assert not measured(collection="c4")


def test_the_source_hash_covers_the_supervisor_s_c(tmp_path: Path) -> None:
    # trial/supervise.c is compiled by the harness and every verdict runs under it
    tree = tmp_path / "pkg"
    tree.mkdir()
    (tree / "supervise.c").write_text("int main(void) { return 0; }\n")
    first = source_hash(tree)
    (tree / "supervise.c").write_text("int main(void) { return 1; }\n")
    assert source_hash(tree) != first
    assert (PACKAGE_ROOT / "trial" / "supervise.c").is_file()


def test_the_environment_hash_names_every_distribution_and_the_python() -> None:
    from posttrain_arena.codehash import distributions_hash, environment_hash

    pins = ["torch==2.13.0", "transformers==5.25.0"]
    first = distributions_hash(pins, "3.11.7")
    assert distributions_hash(list(reversed(pins)), "3.11.7") == first  # order is no fact
    assert distributions_hash(["Torch==2.13.0", "transformers==5.25.0"], "3.11.7") == first
    assert distributions_hash(["torch==2.13.0", "transformers==5.26.0"], "3.11.7") != first
    assert distributions_hash([*pins, "peft==0.21.2"], "3.11.7") != first
    assert distributions_hash(pins, "3.12.1") != first
    assert environment_hash().startswith("sha256:")
