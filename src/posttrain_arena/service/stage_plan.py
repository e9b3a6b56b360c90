"""The stages a worker runs for one run, and the default plan.

A stage is a named callable taking a `RunContext` and returning an optional output dict
(a `score` key there becomes the run's score). Stages write their files under the run
directory, and the worker records each finished stage in the database, so a run that
lost its worker resumes after its last finished stage.

Default plan:

- `snapshot`: copy the pinned collection into the run directory (atomic rename).
- `check`: re-run the structural checks on the snapshot; the content hash must match
  the pinned one and at least one task must be eligible.
- `gates`: when the challenge's recipe enables [task_gates], the organizer gates on the
  training tasks (the pipeline's stages up to `eligibility`); their evidence records are
  stored with the stage. Part of the run, so its time is charged like the rest of it.
- `pipeline`: when `posttrain_arena.train.pipeline` is installed, run the challenge's
  recipe on the snapshot (`run_recipe(..., resume=True)`, which resumes its own stages:
  baseline, teacher, SFT, GRPO, final evaluation) and keep its score.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from posttrain_arena.service.checking import check_collection_dir
from posttrain_arena.service.reasons import RunReason
from posttrain_arena.service.results import summarize_score

if TYPE_CHECKING:
    from posttrain_arena.train.recipe import Recipe
    from posttrain_arena.trial.executor import TrialExecutor


class StageError(Exception):
    """A stage cannot finish: the run fails with `reason` (published as its fixed text)
    and the message as its detail (editors only; reasons.py)."""

    def __init__(self, message: str, reason: RunReason = RunReason.INTERNAL):
        super().__init__(message)
        self.reason = reason


@dataclass
class RunContext:
    """What a stage gets: the run, its pinned inputs, its folder, and liveness hooks."""

    run_id: int
    run_dir: Path
    collection_dir: Path
    collection_hash: str
    challenge: dict[str, Any]
    heartbeat: Callable[[], bool] = field(default=lambda: True)
    log: Callable[[str], None] = field(default=lambda _msg: None)
    substage: Callable[[str], None] = field(default=lambda _name: None)
    ray_address: str | None = None  # fan the run's trials out over this Ray cluster

    @property
    def snapshot_dir(self) -> Path:
        """The run's own copy of the collection."""
        return self.run_dir / "collection"

    def should_stop(self) -> bool:
        """True when the run was canceled or taken away from this worker."""
        return not self.heartbeat()


class Stage(Protocol):
    """One step of a run."""

    @property
    def name(self) -> str: ...

    def __call__(self, ctx: RunContext) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class FunctionStage:
    """A stage made from a plain function."""

    name: str
    fn: Callable[[RunContext], dict[str, Any] | None]

    def __call__(self, ctx: RunContext) -> dict[str, Any] | None:
        return self.fn(ctx)


def snapshot(ctx: RunContext) -> dict[str, Any]:
    """Copy the pinned collection into the run folder, atomically."""
    if ctx.snapshot_dir.is_dir():
        return {"snapshot": str(ctx.snapshot_dir)}
    if not ctx.collection_dir.is_dir():
        raise StageError(f"the collection's files are missing on the server "
                         f"({ctx.collection_dir}); register it again")
    partial = ctx.run_dir / "collection.partial"
    shutil.rmtree(partial, ignore_errors=True)
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ctx.collection_dir, partial, symlinks=True)
    partial.rename(ctx.snapshot_dir)
    return {"snapshot": str(ctx.snapshot_dir)}


def structural_check(ctx: RunContext) -> dict[str, Any]:
    """Re-check the snapshot: same content hash as pinned, at least one eligible task."""
    summary = check_collection_dir(ctx.snapshot_dir)
    if summary.content_hash != ctx.collection_hash:
        raise StageError(f"the snapshot's content hash {summary.content_hash} differs from "
                         f"the pinned {ctx.collection_hash}; the stored files changed")
    if not summary.eligible:
        raise StageError("no task passed the structural checks", RunReason.COLLECTION)
    out = {"eligible": summary.eligible, "domain_counts": summary.domain_counts,
           "errors": summary.errors, "warnings": summary.warnings}
    (ctx.run_dir / "check.json").write_text(json.dumps(out, indent=2))
    return {"eligible_count": len(summary.eligible)}


def pipeline_available() -> bool:
    """Whether the training pipeline (train.pipeline.run_recipe) is installed."""
    return importlib.util.find_spec("posttrain_arena.train.pipeline") is not None


def run_pipeline(ctx: RunContext) -> dict[str, Any]:
    """Run the challenge's recipe on the snapshot with the training pipeline; resumable."""
    from posttrain_arena.train.pipeline import run_recipe

    recipe = _run_recipe_of(ctx)
    with _executor(ctx, recipe) as executor:
        score = run_recipe(recipe, run_dir=ctx.run_dir / "pipeline", resume=True,
                           progress=_progress(ctx), executor=executor)
    data = score.model_dump(mode="json")
    (ctx.run_dir / "score.json").write_text(json.dumps(data, indent=2))
    # Only aggregates go to the database and the API: per-task data names sealed tasks.
    summary = summarize_score(data).model_dump(mode="json")
    provenance = data.get("provenance") or {}
    summary["provenance"] = {k: provenance.get(k) for k in _PUBLIC_PROVENANCE}
    return {"score": summary}


def run_gates(ctx: RunContext) -> dict[str, Any]:
    """The organizer gates on the snapshot's training tasks, when the challenge's recipe
    enables [task_gates]: the pipeline's own stages up to `eligibility` (the pipeline
    stage then resumes past them), its evidence records returned for the database."""
    from posttrain_arena.train.pipeline import run_until

    recipe = _run_recipe_of(ctx)
    if not recipe.task_gates.enabled:
        return {"skipped": "the challenge's recipe does not enable [task_gates]"}
    with _executor(ctx, recipe) as executor:
        stage_dir = run_until(recipe, "eligibility", run_dir=ctx.run_dir / "pipeline",
                              progress=_progress(ctx), executor=executor)
    records = [json.loads(p.read_text(encoding="utf-8"))
               for p in sorted((stage_dir / "evidence").glob("*.json"))]
    return {"evidence": records,
            "eligible": sum(1 for r in records if r["verdict"]["eligible"])}


def _run_recipe_of(ctx: RunContext) -> Recipe:
    """The challenge's recipe, training on this run's snapshot."""
    from posttrain_arena.train.recipe import RecipeError, load_recipe

    recipe_path = Path(ctx.challenge["recipe"])
    try:
        recipe = load_recipe(recipe_path)
    except RecipeError as exc:
        raise StageError(f"the challenge's recipe does not load: {exc}") from None
    return recipe.model_copy(update={
        "train": recipe.train.model_copy(update={
            "collection": str(ctx.snapshot_dir.resolve()), "commit": None}),
    })


def _progress(ctx: RunContext) -> Callable[[Any], None]:
    last_check = time.monotonic()

    def progress(event: Any) -> None:
        nonlocal last_check
        if getattr(event, "status", None) in ("start", "skip"):
            ctx.substage(str(event.stage))
        # Stop between training steps when the run was canceled or taken away.
        if time.monotonic() - last_check > 5.0:
            last_check = time.monotonic()
            if ctx.should_stop():
                raise StageError("the run was canceled or given to another worker",
                                 RunReason.CANCELED)

    return progress


@contextlib.contextmanager
def _executor(ctx: RunContext, recipe: Recipe) -> Iterator[TrialExecutor | None]:
    """None (trials in this process), or, when this worker is a Ray driver, the Ray
    executor; the journals stay in the run folder either way, so a run resumes."""
    if not ctx.ray_address:
        yield None
        return
    from posttrain_arena.distributed import make_executor

    executor = make_executor("ray", backend=recipe.runtime.sandbox,
                             slots=recipe.runtime.concurrency, ray_address=ctx.ray_address,
                             allow_network=recipe.runtime.allow_internet)
    try:
        yield executor
    finally:
        executor.close()


# Provenance fields safe to show: hashes and versions, never server paths (the sealed
# suite's location included).
_PUBLIC_PROVENANCE = ("model_id", "model_revision", "model_content_hash", "recipe_hash",
                      "collection_commit", "collection_hash", "suite_commit", "suite_hash",
                      "suite_sealed", "package_version", "seeds", "sandbox_backend",
                      "created_at")


def default_plan() -> Sequence[Stage]:
    """snapshot, check, and the gates and the pipeline when it is installed."""
    plan: list[Stage] = [FunctionStage("snapshot", snapshot),
                         FunctionStage("check", structural_check)]
    if pipeline_available():
        plan.append(FunctionStage("gates", run_gates))
        plan.append(FunctionStage("pipeline", run_pipeline))
    return plan
