"""`arena demo`: the whole loop on the micro challenge, in minutes on a laptop."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from posttrain_arena.challenges.micro.demo import DemoResult


def _print_human(result: DemoResult) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"micro challenge, seed {result.seed}: change in held-out pass rate")
    for col in ("collection", "base", "final", "change", "95% interval", "learned"):
        table.add_column(col, justify="left" if col == "collection" else "right")
    for name, s in result.scores.items():
        table.add_row(name, f"{100 * s.base_rate:.1f}%", f"{100 * s.final_rate:.1f}%",
                      f"{s.delta_pp:+.1f} pp", f"[{s.ci95_low_pp:+.1f}, {s.ci95_high_pp:+.1f}] pp",
                      "yes" if s.learned else "no")
    Console().print(table)
    for s in result.scores.values():
        typer.echo(f"{s.collection}: score.json in {s.run_dir} ({s.seconds:.0f} s)")


def register(app: typer.Typer) -> None:
    """Add `arena demo` to the root app."""

    @app.command("demo")
    def demo(
        compare: bool = typer.Option(
            False, "--compare", help="Also post-train on the off-topic collection, to compare"
        ),
        as_json: bool = typer.Option(
            False, "--json", help="Print each collection's score as JSON, keyed by its name"
        ),
        seed: int = typer.Option(0, "--seed", help="Seed of the challenge and the runs"),
        workdir: Path | None = typer.Option(
            None, "--workdir", help="Where to build the challenge and keep the runs "
            "(default ~/.cache/posttrain-arena/micro)"
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
        from rich.console import Console

        from posttrain_arena.challenges.micro.demo import run_demo
        from posttrain_arena.train.stages import StageEvent

        if backend not in ("local", "docker", "auto"):
            typer.echo(f"--backend must be local, docker or auto (got {backend!r})", err=True)
            raise typer.Exit(2)
        err = Console(stderr=True)

        def progress(ev: StageEvent) -> None:
            if ev.status == "step":
                if ev.done == ev.total or (ev.done or 0) % 20 == 0:
                    err.print(f"  {ev.stage}: {ev.done}/{ev.total} {ev.message}".rstrip())
            elif ev.status != "checkpoint":
                err.print(f"[bold]{ev.stage}[/bold] {ev.status} {ev.message}".rstrip())

        try:
            # Trainers print their logs on stdout; keep stdout for the result alone.
            with contextlib.redirect_stdout(sys.stderr):
                result = run_demo(workdir, seed=seed, compare=compare, backend=backend,
                                  resume=resume, progress=progress)
        except Exception as exc:  # the demo's failure is the user's first impression: say why
            typer.echo(f"arena demo failed: {type(exc).__name__}: {exc}", err=True)
            raise typer.Exit(1) from None
        if as_json:
            data = {name: s.model_dump() for name, s in result.scores.items()}
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
        else:
            _print_human(result)
