"""`arena train validate|plan|run RECIPE`: post-training runs from a recipe.

Machine-readable JSON goes to stdout; logs and per-stage progress go to stderr.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import typer

from posttrain_arena.cli.groups import train_app

RecipeArg = typer.Argument(..., help="Recipe TOML file (see recipes/README.md)")


def _emit(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def _load(path: Path) -> Any:
    from posttrain_arena.train.recipe import RecipeError, load_recipe

    try:
        return load_recipe(path)
    except RecipeError as exc:
        _emit({"ok": False, "error": str(exc)})
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None


@train_app.command("validate")
def validate(recipe: Path = RecipeArg) -> None:
    """Check a recipe file; prints the recipe hash and what blocks a scored run."""
    r = _load(recipe)
    _emit({"ok": True, "recipe": r.name, "recipe_hash": r.recipe_hash(),
           "warnings": r.warnings()})
    for w in r.warnings():
        typer.echo(f"warning: {w}", err=True)


@train_app.command("plan")
def plan_cmd(recipe: Path = RecipeArg) -> None:
    """Stages, task counts and an upper bound of trials and tokens; runs nothing."""
    from posttrain_arena.train.plan import plan

    p = plan(_load(recipe))
    _emit(p.model_dump())
    for s in p.stages:
        flag = " (skipped)" if s.skipped else ""
        typer.echo(f"{s.name:9} {s.what}{flag}  trials<={s.trials}", err=True)


@train_app.command("schema")
def schema() -> None:
    """The JSON Schema of recipe files."""
    from posttrain_arena.train.recipe import recipe_json_schema

    _emit(recipe_json_schema())


@train_app.command("run")
def run(
    recipe: Path = RecipeArg,
    run_name: str | None = typer.Option(None, "--run-name", help="Run folder name"),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check and plan; run nothing"),
    executor: str = typer.Option("thread", "--executor", help="Where evaluation and "
                                 "teacher trials run: thread (this process) or ray (one "
                                 "Ray task per trial; GRPO rollouts stay in this process)."),
    ray_address: str | None = typer.Option(None, "--ray-address", envvar="RAY_ADDRESS",
                                           help="Ray cluster to join (with --executor ray; "
                                           "default: start one on this machine)."),
) -> None:
    """Run the pipeline: baseline, teacher, SFT, GRPO, final eval, score.json."""
    from posttrain_arena.train.pipeline import run_dir_for, run_recipe
    from posttrain_arena.train.recipe import RecipeError
    from posttrain_arena.train.sources import SourceError
    from posttrain_arena.train.stages import StageEvent

    r = _load(recipe)
    run_dir = run_dir_for(r, run_name)
    if not dry_run and not resume and (run_dir / "stages").is_dir():
        typer.echo(f"{run_dir} already holds a run; pass --resume to continue it, or "
                   "--run-name for a new one", err=True)
        raise typer.Exit(2)

    def progress(e: StageEvent) -> None:
        if e.status == "step":
            if e.done == e.total or (e.done or 0) % 10 == 0:
                typer.echo(f"[{e.stage}] {e.done}/{e.total} {e.message}", err=True)
        else:
            typer.echo(f"[{e.stage}] {e.status} {e.message}".rstrip(), err=True)

    ran = None
    if (executor != "thread" or ray_address) and not dry_run:
        from posttrain_arena.distributed import ExecutorError, make_executor

        try:
            ran = make_executor(executor, backend=r.runtime.sandbox,
                                slots=r.runtime.concurrency, ray_address=ray_address)
        except (ExecutorError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
    try:
        # Trainers print their logs on stdout; keep stdout for the JSON result.
        with contextlib.redirect_stdout(sys.stderr):
            score = run_recipe(r, run_dir=run_dir, resume=resume, dry_run=dry_run,
                               progress=progress, executor=ran)
    except (RecipeError, SourceError) as exc:
        _emit({"ok": False, "error": str(exc), "run_dir": str(run_dir)})
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except Exception as exc:
        _emit({"ok": False, "error": f"{type(exc).__name__}: {exc}", "run_dir": str(run_dir),
               "hint": "fix the cause, then rerun with --resume"})
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(1) from None
    finally:
        if ran is not None:
            ran.close()
    _emit(score.model_dump(mode="json"))


def register(app: typer.Typer) -> None:
    """Commands live on the shared `train` group (cli/groups.py)."""
