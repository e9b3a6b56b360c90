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
                "detectable", "GRPO's own", "verdict"):
        table.add_column(col, justify="left" if col == "control" else "right")
    for name, s in result.scores.items():
        sft = "-" if s.after_sft_rate is None else f"{100 * s.after_sft_rate:.1f}%"
        grpo = "-" if s.grpo_delta_pp is None else (
            f"{s.grpo_delta_pp:+.1f} [{s.grpo_ci95_low_pp:+.1f}, {s.grpo_ci95_high_pp:+.1f}]")
        table.add_row(name, f"{100 * s.base_rate:.1f}%", sft, f"{100 * s.final_rate:.1f}%",
                      f"{s.delta_pp:+.1f} pp", f"[{s.ci95_low_pp:+.1f}, {s.ci95_high_pp:+.1f}] pp",
                      f"{s.detectable_pp:.1f} pp", grpo, s.verdict)
    # Not a terminal (a log, CI, `| tee`): wide enough for every column, not rich's 80.
    Console(width=None if sys.stdout.isatty() else 150).print(table)
    for line in result.statement():
        typer.echo(line)
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


# Measured on two CPU cores at load 8-14 (README, "arena demo": 6 min 40 s in all): one
# collection's run, the build with the shipped base, and a base pretrained from nothing
# (when the spec or code makes another; 31 minutes here). The protocol's five runs take
# about four runs' time (three share the first's baseline).
RUN_MINUTES, BUILD_MINUTES, PRETRAIN_MINUTES = 6, 1, 30


class _Lines:
    """Stages and steps as plain lines on stderr when it is not a terminal (a log, CI,
    `| tee`), where bars do not draw: every start, end and failure, and the current
    stage's count, elapsed time and an estimate of the time left at least every
    `every` seconds, from a timer thread when no event comes."""

    def __init__(self, plan: str, every: float = 20.0) -> None:
        import threading
        import time

        self.stream = sys.stderr  # bound now: during a run, sys.stderr is the run's log
        self.every = every
        self.clock = time.monotonic
        self.start = self.last = self.clock()
        self.stage = ""
        self.stage_start = self.start
        self.done: int | None = None
        self.total: int | None = None
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="demo-progress", daemon=True)
        self._print(plan)

    def __enter__(self) -> _Lines:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()

    def _print(self, text: str) -> None:
        with self.lock:
            now = self.clock()
            m, s = divmod(int(now - self.start), 60)
            self.stream.write(f"[{m:3d}:{s:02d}] {text}\n")
            self.stream.flush()
            self.last = now

    def _status(self) -> str:
        spent = self.clock() - self.stage_start
        text = f"{self.stage}: {spent:.0f} s in this stage"
        if self.done is not None and self.total:
            text += f", {self.done}/{self.total}"
            if self.done:
                text += f", about {spent / self.done * (self.total - self.done):.0f} s left"
        return text

    def _beat(self) -> None:
        while not self.stopped.wait(min(1.0, self.every / 3)):
            if self.stage and self.clock() - self.last >= self.every:
                self._print(self._status())

    def __call__(self, ev: StageEvent) -> None:
        if ev.status == "checkpoint":
            return
        if ev.stage != self.stage or ev.status == "start":
            self.stage, self.stage_start = ev.stage, self.clock()
            self.done = self.total = None
        if ev.status == "step":
            self.done, self.total = ev.done, ev.total
            if self.clock() - self.last >= self.every or ev.done == ev.total:
                self._print(self._status())
            return
        self._print(f"{ev.stage} {ev.status} {ev.message}".rstrip())
        if ev.status in ("done", "skip", "failed"):
            self.stage = ""


def _plan(compare: bool, seed: int | None) -> str:
    runs = 4 if compare else 1
    what = "the protocol of five controls" if compare else "micro-relevant"
    which = "the protocol's declared seed" if seed is None else f"seed {seed}"
    return (f"arena demo: builds the micro challenge ({which}) with the shipped base "
            f"model, then post-trains on {what} (baseline evaluation, SFT, evaluation, "
            f"GRPO, final evaluation): about {BUILD_MINUTES + round(RUN_MINUTES * runs)} "
            f"minutes on two cores, {PRETRAIN_MINUTES} more if the base must be pretrained "
            "here; library output goes to build.log and each run's run.log")


def create_micro_challenge(
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="The arena's data directory (default: $ARENA_DATA_DIR)"),
    seed: int | None = typer.Option(
        None, "--seed", help="Seed of the generated suite (default: the protocol's "
        "declared seed, whose controls ship with the package)"),
) -> None:
    """Build the micro challenge into the arena's data directory and create it as the
    challenge `micro`: a first challenge for a fresh arena, generated here with the tiny
    base model shipped with the package (nothing downloaded)."""
    import json as _json

    from posttrain_arena.challenges.micro import RELEVANT, build_micro
    from posttrain_arena.challenges.micro.protocol import declared
    from posttrain_arena.service.app import open_database
    from posttrain_arena.service.auth import SYSTEM
    from posttrain_arena.service.challenges import create_challenge, to_out
    from posttrain_arena.service.config import Settings
    from posttrain_arena.service.schemas import ChallengeCreate

    settings = Settings(data_dir=data_dir) if data_dir is not None else Settings()
    seed = declared().seed if seed is None else seed
    try:
        db = open_database(settings)  # creates the data directory
        ch = build_micro(Path(settings.data_dir) / "challenges" / f"micro-seed{seed}", seed=seed)
        model_key = _json.loads((Path(ch.model) / "pretraining.json").read_text())["key"]
        body = ChallengeCreate(
            slug="micro", title=f"Micro challenge (seed {seed})",
            base_model="posttrain-arena micro base",  # its folder is the server's: not shown
            base_model_revision=model_key, recipe=ch.recipes[RELEVANT], suite_path=ch.suite,
            description="Sixteen procedural shell-task families on a tiny from-scratch "
            "model: the whole loop on two CPU cores (`arena demo` runs it locally).")
        with db.write() as s:
            out = to_out(create_challenge(s, SYSTEM, body))
    except Exception as exc:  # the organizer's first command: say what failed and where
        typer.echo(f"create-micro-challenge failed: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(out.model_dump_json(indent=2))


def register(app: typer.Typer) -> None:
    """Add `arena demo` to the root app, and `arena admin create-micro-challenge`."""
    from posttrain_arena.cli.groups import admin_app

    admin_app.command("create-micro-challenge")(create_micro_challenge)

    @app.command("demo")
    def demo(
        compare: bool = typer.Option(
            False, "--compare", help="Run the protocol of controls: micro-relevant, "
            "micro-relevant-seed1, micro-partial, micro-broken-verifiers, micro-off-topic"
        ),
        as_json: bool = typer.Option(
            False, "--json", help="Print each collection's score as JSON, keyed by its name"
        ),
        seed: int | None = typer.Option(
            None, "--seed", help="Seed of the challenge and the runs (default: the "
            "protocol's declared seed, challenges/micro/challenge.toml)"),
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
        sink: _Bars | _Lines
        if sys.stderr.isatty():
            sink = _Bars()
            sink.bars.console.print(_plan(compare, seed))
            shown: Any = sink.bars
        else:
            sink = shown = _Lines(_plan(compare, seed))
        try:
            with shown:
                result = run_demo(workdir, seed=seed, compare=compare, backend=backend,
                                  resume=resume, progress=sink)
        except Exception as exc:  # the demo's failure is the user's first impression: say why
            typer.echo(f"arena demo failed: {type(exc).__name__}: {exc}", err=True)
            raise typer.Exit(1) from None
        if as_json:
            data = {name: s.model_dump() for name, s in result.scores.items()}
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
        else:
            _print_human(result)
