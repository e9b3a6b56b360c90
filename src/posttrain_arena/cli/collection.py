"""`arena collection check` and `arena collection gate`: thin wrappers over
posttrain_arena.task_format.collection and posttrain_arena.gates."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from posttrain_arena.cli.groups import collection_app

if TYPE_CHECKING:
    from rich.console import Console

    from posttrain_arena.gates import GateReport


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
    from posttrain_arena.task_format.collection import check_collection

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


@collection_app.command("gate")
def gate(
    directory: Path = typer.Argument(..., help="Collection folder (envs/*) or a folder of tasks."),
    model: str = typer.Option(..., "--model", "-m",
                              help="Base model: openai:MODEL, hf:PATH or scripted:FILE."),
    k: int = typer.Option(4, "-k", min=1, help="Base model samples per task (pass@k)."),
    jobs: int = typer.Option(1, "-j", "--jobs", min=1, help="Trials running at once."),
    reruns: int = typer.Option(3, "--reruns", min=1,
                               help="Oracle reruns per task (measures the flake rate)."),
    backend: str = typer.Option("auto", "--backend",
                                help="Sandbox backend: docker, local, or auto."),
    records: Path | None = typer.Option(
        None, "--records", help="Trial and evidence records (default: a temporary folder; "
                                "evidence there is reused while packages are unchanged)."),
    as_json: bool = typer.Option(False, "--json", help="Print the gate report as JSON."),
) -> None:
    """Run the organizer gates on every package: build, oracle reruns, empty trial,
    known-bad probes, base model pass@k. Writes one evidence record per package.

    Exit 0 when every package is eligible, 1 when some are not, 2 on usage errors.
    """
    import tempfile

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from posttrain_arena.gates import gate_collection
    from posttrain_arena.models import ModelError, load_model
    from posttrain_arena.sandbox.base import PrerequisiteError
    from posttrain_arena.trial.replay import task_dirs
    from posttrain_arena.trial.runner import TrialRunner

    if not directory.is_dir():
        typer.echo(f"error: {directory} is not a folder", err=True)
        raise typer.Exit(2)
    root = records or Path(tempfile.gettempdir()) / "arena-records"
    try:
        chat = load_model(model)
        runner = TrialRunner(backend, records_root=root)
    except (ModelError, PrerequisiteError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    console = Console(stderr=as_json)
    try:
        with Progress("[progress.description]{task.description}", BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                      transient=as_json) as progress:
            bar = progress.add_task("gating", total=len(task_dirs(directory)))
            report = gate_collection(directory, runner, chat, model_spec=model, k=k,
                                     reruns=reruns, jobs=jobs, records_root=root,
                                     on_done=lambda _e, _r: progress.advance(bar))
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    finally:
        runner.close()
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), indent=2))
        raise typer.Exit(0 if report.ok else 1)
    _print_gate_report(console, report, root)
    raise typer.Exit(0 if report.ok else 1)


def _print_gate_report(console: Console, report: GateReport, records: Path) -> None:
    from rich.table import Table

    from posttrain_arena.gates import GateStatus

    colour = {GateStatus.PASS: "green", GateStatus.FAIL: "red", GateStatus.ERROR: "yellow",
              GateStatus.SKIPPED: "dim"}
    table = Table(title=f"gates of {report.path} ({report.backend}, {report.model}, "
                        f"k={report.k}, reruns={report.reruns})")
    for col in ("task", "build", "oracle", "empty", "probes", "learnable", "verdict"):
        table.add_column(col)
    for ev in report.evidence:
        cells = []
        for check in ev.verdict.gates:
            text = check.status.value
            if check.gate.value == "oracle" and ev.flake_rate:
                text += f" (flake {ev.flake_rate:.2f})"
            if check.gate.value == "learnable" and ev.base is not None:
                text += f" ({ev.base.solved}/{ev.base.n})"
            cells.append(f"[{colour[check.status]}]{text}[/]")
        verdict = "[green]eligible[/]" if ev.eligible else "[red]not eligible[/]"
        reused = " (reused)" if ev.task in report.reused else ""
        table.add_row(ev.task + reused, *cells, verdict)
    console.print(table)
    for ev in report.evidence:
        for reason in ev.verdict.reasons:
            console.print(f"[red]{ev.task}[/]: {reason}", highlight=False)
    console.print(f"{len(report.evidence)} package(s), {len(report.eligible)} eligible; "
                  f"{report.trials_run} trial(s) and {report.verifications_run} probe "
                  f"verification(s) run, {len(report.reused)} record(s) reused, "
                  f"{report.wall_sec:.1f}s; evidence in {records / 'evidence'}",
                  highlight=False)
