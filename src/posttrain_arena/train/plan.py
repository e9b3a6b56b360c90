"""`plan(recipe)`: what a run would do, counted without running or loading anything.

Task counts come from folder listings (no package is parsed), so planning stays fast
at the published reference scale (2,238 training and 366 held-out tasks).
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel, Field

from posttrain_arena.train.recipe import Recipe, is_remote
from posttrain_arena.train.sources import SourceError, count_tasks


class PlanStage(BaseModel):
    """One stage as planned."""

    name: str = Field(description="Stage name")
    what: str = Field(description="What the stage does")
    trials: int = Field(default=0, description="Sandbox trials it starts (upper bound)")
    model_turns: int = Field(default=0, description="Assistant turns it samples (upper bound)")
    optimizer_steps: int = Field(default=0, description="Training steps")
    skipped: bool = Field(default=False, description="Disabled by the recipe")


class Plan(BaseModel):
    """The run a recipe describes, with its size."""

    recipe: str = Field(description="Recipe name")
    recipe_hash: str = Field(description="Content hash of the recipe")
    model: str = Field(description="Base model id or path, with revision")
    train_tasks: int | None = Field(description="Training tasks (None: a git source, unknown)")
    held_out_tasks: int | None = Field(description="Held-out tasks (None: unknown until fetched)")
    stages: list[PlanStage] = Field(description="Stages in order")
    total_trials: int = Field(description="Sandbox trials across stages (upper bound)")
    total_model_turns: int = Field(description="Assistant turns sampled (upper bound)")
    generated_tokens_upper_bound: int = Field(description="turns x max_new_tokens")
    warnings: list[str] = Field(default_factory=list, description="What blocks a scored run")


def _count(location: str, what: str, warnings: list[str]) -> int | None:
    if is_remote(location):
        warnings.append(f"{what} is a git source; it is counted at snapshot")
        return None
    try:
        return count_tasks(Path(location))
    except SourceError as exc:
        warnings.append(f"{what}: {exc}")
        return None


def plan(recipe: Recipe) -> Plan:
    """Stage list, task counts and an upper bound of trials and model turns."""
    warnings = list(recipe.warnings())
    n_train = _count(recipe.resolve(recipe.train.collection), "[train] collection", warnings)
    if n_train is not None and recipe.train.max_tasks is not None:
        n_train = min(n_train, recipe.train.max_tasks)
    n_held = _count(recipe.resolve(recipe.eval.suite), "[eval] suite", warnings)
    T, H = n_train or 0, n_held or 0
    turns = recipe.agent.max_turns
    k = recipe.runtime.k
    t, g = recipe.teacher, recipe.grpo
    gate_on = g.enabled and g.gate.enabled and recipe.sft.enabled
    gate_n = min(g.gate.tasks, T) * g.gate.samples if gate_on else 0
    tg = recipe.task_gates
    gate_trials = T * (tg.reruns + 1 + 3 + tg.k)  # reruns, empty, the probes, base samples
    teacher_trials = T * (1 if t.kind == "oracle" else t.attempts)
    grpo_steps = 0
    if g.enabled:
        grpo_steps = g.total_steps(T)
    # At most: every flat group the budget allows is replaced (dynamic sampling).
    grpo_trials = grpo_steps * (g.tasks_per_step + g.resample_flat_groups) * g.num_generations
    per_step = recipe.sft.per_device_batch_size * recipe.sft.gradient_accumulation_steps
    sft_steps = 0
    if recipe.sft.enabled:
        sft_steps = recipe.sft.max_steps or max(1, math.ceil(T * recipe.sft.epochs / per_step))
    stages = [
        PlanStage(name="snapshot", what="pin the collection and the sealed suite (hashes)"),
        PlanStage(name="leakage", what="exclude training tasks that duplicate held-out ones"),
        PlanStage(name="eligibility", what=f"organizer gates on {T} training tasks "
                  f"({tg.reruns} oracle reruns, empty, probes, base x {tg.k})",
                  trials=gate_trials, model_turns=T * tg.k * turns, skipped=not tg.enabled),
        PlanStage(name="baseline", what=f"base model on {H} held-out tasks x {k} samples",
                  trials=H * k, model_turns=H * k * turns),
        PlanStage(name="teacher", what=f"{t.kind} teacher rollouts on {T} training tasks",
                  trials=teacher_trials,
                  model_turns=0 if t.kind == "oracle" else teacher_trials * turns),
        PlanStage(name="sft", what="LoRA SFT on verified trajectories" if
                  recipe.sft.method == "lora" else "full SFT on verified trajectories",
                  optimizer_steps=sft_steps, skipped=not recipe.sft.enabled),
        PlanStage(name="after_sft", what=f"SFT policy on {H} held-out tasks x {k} samples "
                  "(GRPO's own change)", trials=H * k, model_turns=H * k * turns,
                  skipped=not (g.enabled and recipe.sft.enabled)),
        PlanStage(name="gate", what=f"SFT vs base on {min(g.gate.tasks, T)} training tasks",
                  trials=2 * gate_n, model_turns=2 * gate_n * turns, skipped=not gate_on),
        PlanStage(name="grpo", what=f"GRPO: {grpo_steps} steps x {g.tasks_per_step} tasks x "
                  f"{g.num_generations} rollouts" + (
                      f" (+ up to {g.resample_flat_groups} flat groups resampled per step)"
                      if g.resample_flat_groups else ""), trials=grpo_trials + gate_n,
                  model_turns=(grpo_trials + gate_n) * turns, optimizer_steps=grpo_steps,
                  skipped=not g.enabled),
        PlanStage(name="final", what=f"post-trained model on {H} held-out tasks x {k} samples",
                  trials=H * k, model_turns=H * k * turns),
        PlanStage(name="score", what="score.json: change in pass rate with a paired 95% CI"),
    ]
    total_turns = sum(s.model_turns for s in stages if not s.skipped)
    model = recipe.model.id + (f"@{recipe.model.revision}" if recipe.model.revision else "")
    return Plan(
        recipe=recipe.name, recipe_hash=recipe.recipe_hash(), model=model,
        train_tasks=n_train, held_out_tasks=n_held, stages=stages,
        total_trials=sum(s.trials for s in stages if not s.skipped),
        total_model_turns=total_turns,
        generated_tokens_upper_bound=total_turns * recipe.agent.max_new_tokens,
        warnings=warnings,
    )
