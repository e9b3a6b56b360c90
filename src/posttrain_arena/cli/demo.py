"""`arena demo`: the whole loop on the micro challenge, in minutes on a laptop."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from posttrain_arena.challenges.micro.demo import DemoResult
    from posttrain_arena.train.stages import StageEvent


def _print_human(result: DemoResult) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"micro challenge, seed {result.seed}: change in held-out pass rate")
    for col in ("control", "base", "after SFT", "final", "change", "95% interval",
                "GRPO's own", "learned"):
        table.add_column(col, justify="left" if col == "control" else "right")
    for name, s in result.scores.items():
        sft = "-" if s.after_sft_rate is None else f"{100 * s.after_sft_rate:.1f}%"
        grpo = "-" if s.grpo_delta_pp is None else (
            f"{s.grpo_delta_pp:+.1f} [{s.grpo_ci95_low_pp:+.1f}, {s.grpo_ci95_high_pp:+.1f}]")
        table.add_row(name, f"{100 * s.base_rate:.1f}%", sft, f"{100 * s.final_rate:.1f}%",
                      f"{s.delta_pp:+.1f} pp", f"[{s.ci95_low_pp:+.1f}, {s.ci95_high_pp:+.1f}] pp",
                      grpo, "yes" if s.learned else "no")
    Console().print(table)
    for s in result.scores.values():
        typer.echo(f"{s.collection}: score.json and run.log in {s.run_dir} ({s.seconds:.0f} s)")
    for plot in result.plots:
        typer.echo(f"plot: {plot}")


class _Bars:
    """Stages and their steps as rich progress bars on the terminal's stderr."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        # Bound to the terminal now: during a run, sys.stderr goes to the run's log.
        self.bars = Progress(TextColumn("{task.description}"), BarColumn(),
                             MofNCompleteColumn(), TimeElapsedColumn(),
                             console=Console(file=sys.stderr))
        self.current: dict[str, Any] = {}

    def __call__(self, ev: StageEvent) -> None:
        if ev.status == "checkpoint":
            return
        if ev.status == "start" or ev.stage not in self.current:
            self.current[ev.stage] = self.bars.add_task(f"{ev.stage} {ev.message}".strip(),
                                                        total=None)
        task = self.current[ev.stage]
        if ev.status == "step":
            self.bars.update(task, completed=ev.done or 0, total=ev.total,
                             description=f"{ev.stage} {ev.message}".strip())
        elif ev.status != "start":
            total = self.bars.tasks[task].total or 1
            colour = "red" if ev.status == "failed" else "green"
            self.bars.update(task, completed=total, total=total,
                             description=f"[{colour}]{ev.stage} {ev.status}[/] {ev.message}")


def register(app: typer.Typer) -> None:
    """Add `arena demo` to the root app."""

    @app.command("demo")
    def demo(
        compare: bool = typer.Option(
            False, "--compare", help="Run the protocol of controls: micro-relevant, "
            "micro-relevant-seed1, micro-partial, micro-broken-verifiers, micro-off-topic"
        ),
        as_json: bool = typer.Option(
            False, "--json", help="Print each collection's score as JSON, keyed by its name"
        ),
        seed: int = typer.Option(0, "--seed", help="Seed of the challenge and the runs"),
        workdir: Path | None = typer.Option(
            None, "--workdir", help="Where to build the challenge and keep the runs "
            "(default $ARENA_CACHE_DIR/micro, ~/.cache/posttrain-arena/micro unless set)"
        ),
        backend: str = typer.Option(
            "local", "--backend", help="Sandbox backend: local (bubblewrap), docker or auto"
        ),
        resume: bool = typer.Option(
            False, "--resume", help="Continue interrupted runs instead of starting over"
        ),
    ) -> None:
        """Build the micro challenge, post-train its tiny model on the relevant collection
        and print the change in held-out pass rate with its 95% interval."""
        from posttrain_arena.challenges.micro.demo import run_demo

        if backend not in ("local", "docker", "auto"):
            typer.echo(f"--backend must be local, docker or auto (got {backend!r})", err=True)
            raise typer.Exit(2)
        bars = _Bars()
        try:
            with bars.bars:
                result = run_demo(workdir, seed=seed, compare=compare, backend=backend,
                                  resume=resume, progress=bars)
        except Exception as exc:  # the demo's failure is the user's first impression: say why
            typer.echo(f"arena demo failed: {type(exc).__name__}: {exc}", err=True)
            raise typer.Exit(1) from None
        if as_json:
            data = {name: s.model_dump() for name, s in result.scores.items()}
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
        else:
            _print_human(result)
