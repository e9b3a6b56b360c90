"""`arena eval` and `arena compare`: run a model on a suite; compare two reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer


def register(app: typer.Typer) -> None:
    """Add `eval` and `compare` to the root app."""
    app.command("eval")(eval_command)
    app.command("compare")(compare_command)


def eval_command(
    suite: Path = typer.Argument(..., help="A directory of task packages, or a file listing "
                                 "package paths (one a line)."),
    model: str = typer.Option(..., "--model", "-m", help="openai:MODEL, hf:PATH or "
                              "scripted:FILE."),
    k: int = typer.Option(1, "-k", min=1, help="Trials per task."),
    jobs: int = typer.Option(1, "-j", "--jobs", min=1, help="Trials running at once."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write REPORT.json."),
    backend: str = typer.Option("auto", "--backend", help="Sandbox: auto, docker or local."),
    resume: bool = typer.Option(False, "--resume", help="Keep finished trials from the "
                                "journal beside the report; re-run missing and "
                                "infrastructure-failed ones."),
    heldout: bool = typer.Option(False, "--heldout", help="Refuse a suite that breaks the "
                                 "held-out composition rule (no domain above 20%)."),
    records: Path | None = typer.Option(None, "--records", help="Keep each trial's files "
                                        "(transcript, verifier logs) under this folder."),
    base_url: str | None = typer.Option(None, "--base-url", help="Overrides OPENAI_BASE_URL."),
    api_key: str | None = typer.Option(None, "--api-key", help="Overrides OPENAI_API_KEY."),
    device: str | None = typer.Option(None, "--device", help="Where an hf: model runs "
                                      "(cpu, cuda, cuda:1); default cuda when present."),
    temperature: float = typer.Option(1.0, "--temperature", min=0.0, help="Sampling "
                                      "temperature (0 = greedy)."),
    max_turns: int = typer.Option(30, "--max-turns", min=1, help="Assistant turns per trial."),
    agent_timeout: float | None = typer.Option(None, "--agent-timeout", help="Override "
                                               "task.md's agent.timeout_sec (seconds)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    executor: str = typer.Option("thread", "--executor", help="Where trials run: thread "
                                 "(this process) or ray (one Ray task per trial)."),
    ray_address: str | None = typer.Option(None, "--ray-address", envvar="RAY_ADDRESS",
                                           help="Ray cluster to join (with --executor ray; "
                                           "default: start one on this machine)."),
) -> None:
    """Run a model as an agent on every task of a suite, K times, and write a report.

    Exit 0 when every trial counted, 1 when some were lost to infrastructure (run again
    with --resume), 2 on usage errors.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from posttrain_arena.agents.model import AgentSettings
    from posttrain_arena.distributed import ExecutorError, make_executor
    from posttrain_arena.evaluate.runner import evaluate, model_agent_specs, model_agents
    from posttrain_arena.evaluate.suite import SuiteError, load_suite
    from posttrain_arena.models import ModelError, load_model
    from posttrain_arena.sandbox.base import PrerequisiteError
    from posttrain_arena.trial.journal import Journal

    console = Console(stderr=True)
    journal_path = output.with_name(output.name + ".trials.jsonl")
    if journal_path.exists() and not resume:
        _usage(f"{journal_path} exists from an earlier run; pass --resume to continue it, "
               "or remove it to start over")
    if executor == "ray" and api_key:
        _usage("--api-key does not travel to Ray nodes; set OPENAI_API_KEY on every node")
    settings = AgentSettings(temperature=temperature, max_turns=max_turns)
    try:
        loaded = load_suite(suite)
        if heldout:
            loaded.check_heldout()
        if executor == "ray":  # the model is loaded on each node, from its spec
            factory = model_agent_specs(model, settings, name=f"model:{model}",
                                        base_url=base_url, device=device)
        else:
            chat = load_model(model, base_url=base_url, api_key=api_key, device=device)
            factory = model_agents(chat, settings, name=f"model:{model}")
        ran = make_executor(executor, backend=backend, slots=jobs, records_root=records,
                            ray_address=ray_address)
    except (SuiteError, ModelError, PrerequisiteError, ExecutorError, ValueError) as exc:
        _usage(str(exc))
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  disable=as_json) as bar:
        bar_task = bar.add_task(f"eval {model}", total=len(loaded.tasks) * k)

        def progress(done: int, total: int, result: Any) -> None:
            bar.update(bar_task, completed=done,
                       description=f"{result.task_name[:30]} {result.outcome.value}")

        try:
            report = evaluate(loaded, factory, k=k, executor=ran, progress=progress,
                              journal=Journal(journal_path), model=model,
                              agent_timeout=agent_timeout)
        finally:
            ran.close()
    report.save(output)
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        _print_report(report)
        typer.echo(f"report: {output}")
    raise typer.Exit(1 if report.infra_errors else 0)


def compare_command(
    before: Path = typer.Argument(..., help="Report of the model before (REPORT.json)."),
    after: Path = typer.Argument(..., help="Report of the model after."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> None:
    """Paired comparison: change in pass rate (pp), 95% interval, p-value, trials paired."""
    from posttrain_arena.evaluate.report import EvalReport
    from posttrain_arena.evaluate.stats import SuiteMismatch, compare

    try:
        result = compare(EvalReport.load(before), EvalReport.load(after))
    except SuiteMismatch as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(1) from None
    except ValueError as exc:
        _usage(str(exc))
    if as_json:
        typer.echo(json.dumps(result.model_dump(), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{result.before_model}[/] -> [bold]{result.after_model}[/] on "
                  f"{result.tasks} paired tasks ({result.suite_hash[:19]})")
    sign = "green" if result.ci_low_pp > 0 else "red" if result.ci_high_pp < 0 else "yellow"
    console.print(f"pass rate {100 * result.before_rate:.1f}% -> {100 * result.after_rate:.1f}%"
                  f"  change [{sign}]{result.change_pp:+.1f} pp[/] "
                  f"({100 * result.confidence:.0f}% CI {result.ci_low_pp:+.1f} to "
                  f"{result.ci_high_pp:+.1f}), improved {result.improved}, regressed "
                  f"{result.regressed}, {result.clusters} clusters, p = {result.p_value:.3g}")
    console.print(f"{result.paired_trials} trials paired per arm ({result.dropped_trials} "
                  f"dropped: their partner was lost); detectable at 80% power: "
                  f"{result.detectable_pp:.1f} pp")
    table = Table("domain", "tasks", "before", "after", "change (pp)")
    for d in result.domains:
        table.add_row(d.domain, str(d.tasks), f"{100 * d.before:.1f}%", f"{100 * d.after:.1f}%",
                      f"{d.change_pp:+.1f}")
    console.print(table)
    if result.regressed_tasks:
        console.print("regressed: " + ", ".join(
            f"{t.task_name} ({t.change_pp:+.0f} pp)" for t in result.regressed_tasks[:20]))
    if result.excluded:
        console.print(f"excluded (no counted trial): {', '.join(result.excluded)}")


def _print_report(report: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    console = Console()
    table = Table("task", "domain", "n", "passes", "pass rate", "mean reward", "infra")
    for t in report.tasks:
        table.add_row(t.task_name, t.domain, str(t.n), str(t.passes), pct(t.pass_rate),
                      "-" if t.mean_reward is None else f"{t.mean_reward:.2f}",
                      str(t.infra_errors) if t.infra_errors else "")
    console.print(table)
    domains = Table("domain", "tasks", "pass rate", "infra")
    for d in [*report.domains, report.overall]:
        domains.add_row(d.name, str(d.tasks), pct(d.pass_rate), str(d.infra_errors or ""))
    console.print(domains)
    console.print(f"{report.model}: pass rate {pct(report.overall.pass_rate)} over "
                  f"{report.overall.scored_tasks} tasks x k={report.k}; "
                  f"{report.overall.infra_errors} infrastructure error(s); "
                  f"{report.prompt_tokens + report.completion_tokens} tokens; "
                  f"{report.wall_sec:.1f} s")


def _usage(message: str) -> Any:
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(2)
