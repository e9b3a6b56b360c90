"""`arena task run` and `arena collection replay`: oracle, empty and probe trials."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from posttrain_arena.cli.groups import collection_app, task_app

if TYPE_CHECKING:
    from posttrain_arena.trial.replay import ReplayCheck
    from posttrain_arena.trial.runner import TrialRunner

_BACKEND_HELP = "Sandbox backend: docker, local, or auto (docker when an engine answers)."


def register(app: typer.Typer) -> None:
    """Commands live on the shared `task` and `collection` groups (see cli/groups.py)."""


_IMAGE_MAP_HELP = ("A TOML file of `\"public/name:tag\" = \"local/name:tag\"` lines: FROM "
                   "images to build from instead (sets ARENA_IMAGE_MAP; docs/task-format.md, "
                   "\"Base images\").")
_TAIL_LINES = 20


def _use_image_map(path: Path | None) -> None:
    if path is None:
        return
    if not path.is_file():
        typer.echo(f"error: image map {path} does not exist", err=True)
        raise typer.Exit(2)
    from posttrain_arena.sandbox.imagemap import IMAGE_MAP_ENV

    os.environ[IMAGE_MAP_ENV] = str(path.resolve())


def _runner(backend: str, network: bool, records: Path | None,
            *, batch: bool = False) -> TrialRunner:
    """The runner; records go under records/<backend> so that a task's docker and local
    trials (one trial id: same task, agent and seed) keep separate records."""
    from posttrain_arena.sandbox.base import PrerequisiteError
    from posttrain_arena.sandbox.registry import get_backend
    from posttrain_arena.trial.runner import TrialRunner

    try:
        chosen = get_backend(backend)
        # A warm pool pays off only across several trials of one environment.
        return TrialRunner(chosen, allow_network=network, warm_pool=batch,
                           records_root=records / chosen.name if records else None)
    except (PrerequisiteError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@task_app.command("run")
def run(
    directory: Path = typer.Argument(..., help="Task package folder."),
    skip_oracle: bool = typer.Option(
        False, "--skip-oracle", help="Run the empty trial instead: it must NOT score 1.0."),
    backend: str = typer.Option("auto", "--backend", help=_BACKEND_HELP),
    network: bool = typer.Option(
        False, "--allow-internet", "--network",
        help="Allow network in the agent phase of tasks that ask for it "
             "(allow_internet: true); without it such tasks are refused."),
    agent: str | None = typer.Option(
        None, "--agent", help="Any script as the agent, to probe the verifier: script:PATH."),
    records: Path | None = typer.Option(
        None, "--records", help="Keep trial records here, one folder per backend "
        "(default: a temporary folder)."),
    image_map: Path | None = typer.Option(None, "--image-map", help=_IMAGE_MAP_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the trial result as JSON."),
) -> None:
    """Replay one task: the oracle must score 1.0 (exit 0), or with --skip-oracle the
    empty trial must be rejected (exit 0). Otherwise exit 1 with the reason, the last
    lines of the failing phase's output and where the full record is."""
    import tempfile

    from posttrain_arena.trial.replay import replay_task

    _use_image_map(image_map)
    spec = agent or ("empty" if skip_oracle else "oracle")
    if not (spec in ("oracle", "empty") or spec.startswith("script:")):
        typer.echo("error: --agent takes script:PATH", err=True)
        raise typer.Exit(2)
    if spec.startswith("script:") and not Path(spec[7:]).is_file():
        typer.echo(f"error: agent script {spec[7:]} does not exist", err=True)
        raise typer.Exit(2)
    root = records or Path(tempfile.gettempdir()) / "arena-records"
    runner = _runner(backend, network, root)
    check = replay_task(directory, runner, agent=spec)
    if as_json:
        payload = check.model_dump(mode="json")
        typer.echo(json.dumps(payload, indent=2))
        raise typer.Exit(0 if check.ok else 1)
    _print_check(check)
    raise typer.Exit(0 if check.ok else 1)


def _print_check(check: ReplayCheck) -> None:
    from rich.console import Console

    console = Console(soft_wrap=True)
    result = check.result
    mark = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]"
    if result is not None and result.reward is not None:
        typer.echo(f"reward: {result.reward}")
    console.print(f"{mark} {check.task} ({check.kind} trial): {check.message}", highlight=False)
    if result is None:
        return
    if result.details:
        passed = sum(d.status == "passed" for d in result.details)
        console.print(f"tests: {passed}/{len(result.details)} passed", highlight=False)
        for d in result.details:
            if d.status != "passed":
                console.print(f"  [red]{d.status}[/red] {d.name}", highlight=False)
    timing = ", ".join(f"{k} {v:.2f}s" for k, v in result.timings.items())
    console.print(f"backend {result.backend}, outcome {result.outcome.value}; {timing}",
                  highlight=False)
    if result.record_dir:
        if not check.ok:
            _print_tails(console, Path(result.record_dir), check.kind)
        console.print(f"record: {result.record_dir}", highlight=False)


def _print_tails(console: Any, record: Path, kind: str) -> None:
    """The last lines of what the failing trial's phases printed, and the transcript's
    path: a verifier's ModuleNotFoundError must not hide behind "reward: 0.0"."""
    transcript = record / "transcript.json"
    if transcript.is_file():
        try:
            messages = json.loads(transcript.read_text(encoding="utf-8")).get("messages", [])
        except (OSError, ValueError):
            messages = []
        said = [m.get("content", "") for m in messages if isinstance(m, dict)
                and m.get("role") == "tool" and m.get("content")]
        if said:
            _tail(console, f"{kind} phase output", said[-1])
        console.print(f"transcript: {transcript}", highlight=False)
    for name in ("stdout.txt", "stderr.txt"):
        path = record / "verifier" / name
        if path.is_file() and path.stat().st_size:
            _tail(console, f"verifier {name[:-4]}", path.read_text(errors="replace"))


def _tail(console: Any, label: str, text: str) -> None:
    lines = text.rstrip().splitlines()[-_TAIL_LINES:]
    console.print(f"--- {label}, last {len(lines)} line(s):", highlight=False)
    console.print("\n".join(lines), highlight=False, markup=False)


@collection_app.command("replay")
def replay(
    directory: Path = typer.Argument(..., help="Collection folder (envs/*) or a folder of tasks."),
    jobs: int = typer.Option(1, "-j", "--jobs", min=1, help="Trials to run at once."),
    backend: str = typer.Option("auto", "--backend", help=_BACKEND_HELP),
    records: Path | None = typer.Option(
        None, "--records", help="Keep trial records here (default: a temporary folder)."),
    as_json: bool = typer.Option(False, "--json", help="Print the replay report as JSON."),
    image_map: Path | None = typer.Option(None, "--image-map", help=_IMAGE_MAP_HELP),
    executor: str = typer.Option("thread", "--executor", help="Where trials run: thread "
                                 "(this process) or ray (one Ray task per trial)."),
    ray_address: str | None = typer.Option(None, "--ray-address", envvar="RAY_ADDRESS",
                                           help="Ray cluster to join (with --executor ray; "
                                           "default: start one on this machine)."),
    network: bool = typer.Option(
        False, "--allow-internet",
        help="Allow network in the agent phase of tasks that ask for it; without it such "
             "tasks are refused."),
) -> None:
    """Oracle and empty trials for every package: exit 0 when every oracle scores 1.0
    and every empty trial is rejected."""
    import tempfile

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
    from rich.table import Table

    from posttrain_arena.trial.executor import ThreadExecutor, TrialExecutor
    from posttrain_arena.trial.replay import replay_collection, replay_jobs

    if not directory.is_dir():
        typer.echo(f"error: {directory} is not a folder", err=True)
        raise typer.Exit(2)
    _use_image_map(image_map)
    root = records or Path(tempfile.gettempdir()) / "arena-records"
    if executor == "thread" and not ray_address:
        ran: TrialExecutor = ThreadExecutor(_runner(backend, network, root, batch=True),
                                            slots=jobs, own_runner=True)
    else:
        from posttrain_arena.distributed import ExecutorError, make_executor

        try:
            ran = make_executor(executor, backend=backend, slots=jobs, records_root=root,
                                ray_address=ray_address, allow_network=network)
        except (ExecutorError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
    console = Console(stderr=as_json)
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  transient=as_json) as progress:
        bar = progress.add_task("replaying", total=replay_jobs(directory))
        try:
            report = replay_collection(directory, jobs=max(jobs, ran.slots), executor=ran,
                                       on_done=lambda c: progress.advance(bar))
        finally:
            ran.close()
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), indent=2))
        raise typer.Exit(0 if report.ok else 1)
    table = Table(title=f"replay of {directory} ({report.backend})")
    for col in ("task", "oracle", "empty", "verdict"):
        table.add_column(col)
    by_task: dict[str, dict[str, ReplayCheck]] = {}
    for c in report.checks:
        by_task.setdefault(c.task, {})[c.kind] = c
    for task, kinds in by_task.items():
        cells = []
        for kind in ("oracle", "empty"):
            one = kinds.get(kind)
            cells.append("-" if one is None else
                         f"[{'green' if one.ok else 'red'}]{one.message}[/]")
        good = all(k.ok for k in kinds.values())
        table.add_row(task, *cells, "[green]ok[/]" if good else "[red]FAIL[/]")
    console.print(table)
    n_bad = sum(not c.ok for c in report.checks)
    console.print(f"{len(by_task)} task(s), {len(report.checks)} trial(s), "
                  f"{n_bad} problem(s)", highlight=False)
    raise typer.Exit(0 if report.ok else 1)
