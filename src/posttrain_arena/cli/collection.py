"""`arena collection check`: a thin wrapper over posttrain_arena.spec.collection."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from posttrain_arena.cli.groups import collection_app


def register(app: typer.Typer) -> None:
    """Commands live on the shared `collection` group (see cli/groups.py)."""


@collection_app.command("check")
def check(
    directory: Path = typer.Argument(..., help="Collection folder (submission.yaml, envs/)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report."),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0,
                             help="Processes checking packages; 0 means one per CPU core."),
) -> None:
    """Check a collection's manifest and every package in it; runs none of their code.

    Exit 0 when valid (warnings allowed), 1 when there are errors.
    """
    from posttrain_arena.cli.task import print_findings
    from posttrain_arena.spec.collection import check_collection

    if jobs == 0:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    report = check_collection(directory, jobs=jobs)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
        raise typer.Exit(0 if report.ok else 1)
    print_findings(report.findings)
    for task in report.tasks:
        print_findings(task.findings)
    n_ok = sum(1 for t in report.tasks if t.ok)
    typer.echo(f"{len(report.tasks)} package(s), {n_ok} valid; "
               f"{len(report.errors)} error(s), {len(report.warnings)} warning(s)")
    if report.domain_counts:
        typer.echo("domains: " + ", ".join(f"{k} {v}" for k, v in report.domain_counts.items()))
    if report.content_hash:
        typer.echo(f"content hash: {report.content_hash}")
    status = typer.style("ok", fg="green") if report.ok else typer.style("FAIL", fg="red")
    typer.echo(f"{status} {report.path}")
    raise typer.Exit(0 if report.ok else 1)
