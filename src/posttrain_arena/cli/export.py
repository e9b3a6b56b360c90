"""`arena export`: evaluation and training episodes as TRL-ready SFT rows."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add `export` to the root app."""
    app.command("export")(export_command)


def export_command(
    source: Path = typer.Argument(..., help="A records folder (arena eval --records DIR) or "
                                  "a training run's teacher attempts.jsonl."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write rows as JSONL."),
    dataset: Path | None = typer.Option(None, "--dataset", help="Write a Hugging Face "
                                        "`datasets` dataset to this folder."),
    include_all: bool = typer.Option(False, "--all", help="Every scored or timed-out "
                                     "episode, not only passing ones."),
) -> None:
    """Write episodes as TRL SFT rows (messages with tool calls, tools, reward)."""
    from posttrain_arena.trajectories.export import export, read_source

    if output is None and dataset is None:
        raise typer.BadParameter("give --output FILE.jsonl, --dataset DIR or both")
    try:
        episodes = read_source(source)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="SOURCE") from None
    report = export(episodes, output, dataset, include_all=include_all)
    typer.echo(json.dumps(report.model_dump()))
