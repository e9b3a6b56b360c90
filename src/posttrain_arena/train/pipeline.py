"""The post-training pipeline: recipe in, score.json out.

    snapshot -> leakage -> eligibility -> baseline -> teacher -> sft -> after_sft -> gate
             -> grpo -> final -> score

`eligibility` runs the organizer gates ([task_gates], posttrain_arena.gates) on the
training tasks; only eligible ones are trained on.

Every stage is content-addressed and resumable (see stages.py): rerunning with
`resume=True` skips finished stages whose inputs did not change and continues an
interrupted one from its journal or last checkpoint. `plan(recipe)` (plan.py) sizes a
run without running anything. The stage bodies live in `steps.py`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from posttrain_arena.codehash import code_hash, environment_hash
from posttrain_arena.train.plan import Plan, plan
from posttrain_arena.train.recipe import Recipe, RecipeError, is_remote
from posttrain_arena.train.score import Score
from posttrain_arena.train.stages import (
    Progress,
    Stage,
    StageRecord,
    StageRunner,
    no_progress,
)
from posttrain_arena.trial.executor import TrialExecutor

if TYPE_CHECKING:
    from posttrain_arena.train.steps import Steps

__all__ = ["Plan", "Score", "launch_problems", "plan", "run_dir_for", "run_recipe",
           "run_until"]


def run_dir_for(recipe: Recipe, run_name: str | None = None) -> Path:
    """`[output] dir / <run name>`; the default name carries the recipe hash."""
    name = run_name or f"{recipe.name}-{recipe.recipe_hash().removeprefix('sha256:')[:12]}"
    return Path(recipe.resolve(recipe.output.dir)) / name


def launch_problems(recipe: Recipe) -> list[str]:
    """What stops a scored run of this recipe here (empty: it can launch)."""
    problems = []
    if not recipe.model_is_local() and not recipe.model.revision:
        problems.append(f"[model] {recipe.model.id} is a hub id without a pinned revision; "
                        "set `revision` to its commit sha")
    for what, loc in (("[train] collection", recipe.train.collection),
                      ("[eval] suite", recipe.eval.suite)):
        resolved = recipe.resolve(loc)
        if not is_remote(resolved) and not Path(resolved).is_dir():
            problems.append(f"{what} {loc!r} is not a folder (resolved to {resolved})")
    return problems


def run_recipe(
    recipe: Recipe,
    *,
    run_dir: Path,
    resume: bool = True,
    dry_run: bool = False,
    progress: Progress = no_progress,
    executor: TrialExecutor | None = None,
    shared: Path | None = None,
) -> Score:
    """Run (or, with `dry_run`, only check and plan) a recipe; returns the score.

    A crash leaves the run folder resumable: call again with `resume=True`.
    `executor`: where evaluation and teacher trials run (default: this process); the
    journals stay in the run folder, so a run resumes whatever executor ran it before.
    `shared`: a folder the runs of one challenge share, so that the baseline (the base
    model on the suite, which no collection changes) is measured once for all of them
    whose base model, suite, agent and runtime sections are the same.
    """
    the_plan = plan(recipe)
    problems = launch_problems(recipe)
    if dry_run:
        return Score(status="dry-run", run_dir=str(run_dir), plan=the_plan.model_dump(),
                     blocking=problems)
    if problems:
        raise RecipeError("the recipe cannot launch here:\n" + "\n".join(problems))
    _run_graph(recipe, run_dir, the_plan, resume=resume, progress=progress, until=None,
               executor=executor, shared=shared)
    return Score.model_validate_json((run_dir / "stages" / "score" / "score.json").read_text())


def run_until(recipe: Recipe, stage: str, *, run_dir: Path, resume: bool = True,
              progress: Progress = no_progress,
              executor: TrialExecutor | None = None) -> Path:
    """Run the pipeline's stages up to and including `stage` (e.g. "eligibility", which
    the service runs as its own gate stage); returns that stage's folder. A later
    `run_recipe` with `resume=True` skips what this finished."""
    problems = launch_problems(recipe)
    if problems:
        raise RecipeError("the recipe cannot launch here:\n" + "\n".join(problems))
    _run_graph(recipe, run_dir, plan(recipe), resume=resume, progress=progress, until=stage,
               executor=executor, shared=None)
    return run_dir / "stages" / stage


def _run_graph(recipe: Recipe, run_dir: Path, the_plan: Plan, *, resume: bool,
               progress: Progress, until: str | None,
               executor: TrialExecutor | None, shared: Path | None) -> None:
    from posttrain_arena.train.steps import Steps

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "recipe.json").write_text(json.dumps(recipe.model_dump(mode="json"), indent=2))
    (run_dir / "plan.json").write_text(the_plan.model_dump_json(indent=2))
    runner = StageRunner(run_dir, progress=progress, resume=resume, shared=shared)
    steps = Steps(recipe, run_dir, runner, executor)
    graph = stage_graph(recipe, steps)
    if until is not None and until not in {s.name for s in graph}:
        raise ValueError(f"no stage {until!r}; the stages are {[s.name for s in graph]}")
    try:
        for stage in graph:
            runner.run(stage)
            if stage.name == until:
                break
    finally:
        steps.close()


def stage_graph(recipe: Recipe, steps: Steps) -> list[Stage]:
    """The stages in order, each keyed on the recipe sections it runs under."""
    r = recipe
    return [
        Stage("snapshot", steps.snapshot, r.section_hash("model", "train", "eval")),
        Stage("leakage", steps.leakage, r.section_hash("train"), reads=("snapshot",)),
        Stage("eligibility", steps.eligibility, r.section_hash("task_gates", "agent", "runtime"),
              reads=("snapshot", "leakage")),
        Stage("baseline", steps.baseline, r.section_hash("agent", "runtime"),
              reads=("snapshot",), depends_on=_base_and_suite),
        Stage("teacher", steps.teacher, r.section_hash("teacher", "agent", "runtime"),
              reads=("snapshot", "leakage", "eligibility")),
        Stage("sft", steps.sft, r.section_hash("sft", "runtime"),
              reads=("snapshot", "teacher")),
        Stage("after_sft", steps.after_sft, r.section_hash("grpo", "agent", "runtime"),
              reads=("snapshot", "sft")),
        Stage("gate", steps.gate, r.section_hash("grpo", "agent", "runtime"),
              reads=("snapshot", "leakage", "eligibility", "sft")),
        Stage("grpo", steps.grpo, r.section_hash("grpo", "agent", "runtime"),
              reads=("snapshot", "leakage", "eligibility", "sft", "gate")),
        Stage("final", steps.final, r.section_hash("agent", "runtime"),
              reads=("snapshot", "grpo")),
        Stage("score", steps.score, r.recipe_hash(),
              reads=("snapshot", "leakage", "eligibility", "baseline", "teacher", "sft",
                     "after_sft", "gate", "grpo", "final")),
    ]


def _base_and_suite(records: dict[str, StageRecord]) -> dict[str, Any]:
    """What the baseline depends on besides its sections: the base model and the suite,
    not the collection (so every collection's run of a challenge shares one baseline),
    and the code that measures it (its content hash: the version string never changes)
    and the libraries it runs on (the resolved environment's hash)."""
    snap = records["snapshot"].summary
    return {"model": snap["model"], "suite": snap["suite"]["content_hash"],
            "code": code_hash(), "environment": environment_hash()}
