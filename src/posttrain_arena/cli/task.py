"""`arena task check|schema|new`: thin wrappers over posttrain_arena.task_format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from posttrain_arena.cli.groups import task_app
from posttrain_arena.task_format.domains import Domain


def register(app: typer.Typer) -> None:
    """Commands live on the shared `task` group (see cli/groups.py)."""


def print_findings(findings: list[Any]) -> None:
    """One `file:line: severity: field: message` line per finding, errors in red."""
    for f in findings:
        color = "red" if f.severity.value == "error" else "yellow"
        typer.secho(f.render(), fg=color, err=False)


def _dump(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


@task_app.command("check")
def check(
    paths: list[Path] = typer.Argument(..., help="Task package folders to check."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report."),
) -> None:
    """Structural checks of task packages; runs none of their code.

    Exit 0 when every package is valid (warnings allowed), 1 when any has errors.
    """
    from posttrain_arena.task_format.checks import check_task

    reports = [check_task(p) for p in paths]
    ok = all(r.ok for r in reports)
    if as_json:
        _dump({"ok": ok, "tasks": [r.to_json() for r in reports]})
    else:
        for r in reports:
            print_findings(r.findings)
            status = typer.style("ok", fg="green") if r.ok else typer.style("FAIL", fg="red")
            typer.echo(f"{status} {r.path}: {len(r.errors)} error(s), "
                       f"{len(r.warnings)} warning(s)"
                       + (f", {r.checksum}" if r.ok and r.checksum else ""))
    raise typer.Exit(0 if ok else 1)


@task_app.command("schema")
def schema(
    submission: bool = typer.Option(
        False, "--submission", help="The schema of submission.yaml instead of task.md."
    ),
    as_json: bool = typer.Option(True, "--json", help="JSON output (the only format)."),
) -> None:
    """Print the JSON Schema of task.md frontmatter (or of submission.yaml)."""
    from posttrain_arena.task_format.schema import submission_schema, task_schema

    _dump(submission_schema() if submission else task_schema())


@task_app.command("new")
def new(
    name: str = typer.Argument(..., help="The task's folder name, e.g. parse-invoices."),
    category: Domain = typer.Option(..., "--category", "-c", help="The task's domain."),
    directory: Path = typer.Option(
        Path("."), "--dir", help="Folder to create the package in."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Write a new task package that checks clean and that an empty trial fails."""
    from posttrain_arena.task_format.scaffold import ScaffoldError, new_task, validate_task_name

    try:
        validate_task_name(name)
    except ScaffoldError as exc:
        raise typer.BadParameter(str(exc), param_hint="NAME") from None
    try:
        target = new_task(name, category, directory)
    except ScaffoldError as exc:
        if as_json:
            _dump({"ok": False, "error": str(exc)})
        else:
            typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(1) from None
    if as_json:
        _dump({"ok": True, "path": str(target), "category": category.value})
    else:
        typer.echo(f"wrote {target}\nnext: arena task check {target} && arena task run {target}")


@task_app.command("convert")
def convert(
    directory: Path = typer.Argument(..., help="The task package to convert."),
    out: Path = typer.Argument(..., help="Where to write the converted package (new folder)."),
    to: str = typer.Option(..., "--to", help="Target layout: harbor or posttrain."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Write a PostTrain package as a Harbor task, or a Harbor task as a PostTrain package.

    The output is loaded again and compared with the source (prompt, limits, verifier,
    rubric); nothing is run. Exit 1 when the source does not load or cannot be converted.
    """
    from posttrain_arena.task_format.convert import convert as run_convert
    from posttrain_arena.task_format.findings import SpecError
    from posttrain_arena.task_format.layout import Layout

    try:
        layout = Layout(to)
    except ValueError:
        raise typer.BadParameter("use harbor or posttrain", param_hint="--to") from None
    try:
        done = run_convert(directory, layout, out)
    except SpecError as exc:
        if as_json:
            _dump({"ok": False, "findings": [f.render() for f in exc.findings]})
        else:
            print_findings(exc.findings)
        raise typer.Exit(1) from None
    if as_json:
        _dump({"ok": True, **done.model_dump(mode="json")})
        return
    for note in done.notes:
        typer.secho(f"note: {note}", fg="yellow")
    typer.echo(f"wrote {done.target} ({done.layout.value} layout)\n"
               f"next: arena task check {done.target} && arena task run {done.target}")


@task_app.command("serve")
def serve(
    directory: Path = typer.Argument(..., help="The task package to serve."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="TCP port."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    backend: str = typer.Option("auto", "--backend", help="Sandbox: auto, docker or local."),
    max_sessions: int = typer.Option(4, "--max-sessions", min=1,
                                     help="WebSocket sessions (each its own sandbox) at once."),
) -> None:
    """Serve one package as an OpenEnv environment (reset, step a bash command, submit).

    Each episode is a trial: the reward is the task's verifier's, run after the agent
    phase in a fresh sandbox. Clients: openenv-core's EnvClient / GenericEnvClient.
    """
    from posttrain_arena.serve_env.app import serve as run_server
    from posttrain_arena.task_format.findings import SpecError

    try:
        run_server(directory, host=host, port=port, backend=backend, max_sessions=max_sessions)
    except SpecError as exc:
        print_findings(exc.findings)
        raise typer.Exit(1) from None
