"""`arena sandbox doctor|reap` and `arena images bootstrap`."""

from __future__ import annotations

import json

import typer

from posttrain_arena.cli.groups import images_app, sandbox_app


def register(app: typer.Typer) -> None:
    """This area's commands live on the shared `sandbox` and `images` groups."""


@sandbox_app.command("doctor")
def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Say which sandbox backends work here and how to fix the others."""
    from posttrain_arena.sandbox.doctor import diagnose

    report = diagnose()
    if as_json:
        typer.echo(json.dumps(report.model_dump(), indent=2))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table("backend", "works", "detail")
        for b in report.backends:
            table.add_row(b.name, "[green]yes[/]" if b.works else "[red]no[/]", b.detail)
        console = Console()
        console.print(table)
        for image in report.base_images:
            state = f"present {image.image_id[:19]}" if image.present else "missing"
            console.print(f"base image {image.name}: {state}")
        console.print(f"--backend auto uses: {report.auto or 'nothing (no backend works)'}")
        for hint in report.hints:
            console.print(f"hint: {hint}")
    raise typer.Exit(0 if report.ok else 1)


@sandbox_app.command("reap")
def reap(
    max_age_hours: float = typer.Option(
        6.0, "--max-age-hours", help="Also remove sessions older than this, whoever owns them."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what was removed as JSON."),
) -> None:
    """Remove containers and local sessions left behind by crashed processes."""
    from dataclasses import asdict

    from posttrain_arena.sandbox.reaper import reap_orphans

    report = reap_orphans(max_age_hours * 3600)
    if as_json:
        typer.echo(json.dumps(asdict(report), indent=2))
        return
    typer.echo(f"containers removed: {len(report.containers)} {' '.join(report.containers)}")
    typer.echo(f"local sessions removed: {len(report.local_sessions)}")
    typer.echo(f"cgroups removed: {report.cgroups}")
    for note in report.notes:
        typer.echo(note)


@images_app.command("bootstrap")
def bootstrap(
    force: bool = typer.Option(False, "--force", help="Rebuild even if the images exist."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
) -> None:
    """Build the Debian bookworm base images locally (debootstrap + docker import)."""
    from dataclasses import asdict

    from posttrain_arena.sandbox.base import SandboxError
    from posttrain_arena.sandbox.images import bootstrap_base_images

    try:
        results = bootstrap_base_images(
            force=force, on_progress=None if as_json else lambda m: typer.echo(m, err=True)
        )
    except SandboxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if as_json:
        typer.echo(json.dumps([asdict(r) for r in results], indent=2))
    else:
        for r in results:
            typer.echo(f"{r.name}: {r.action} ({r.image_id[:19]}, {r.seconds:.1f} s)")


@images_app.command("map")
def image_map(
    as_json: bool = typer.Option(False, "--json", help="Print the map as JSON."),
) -> None:
    """Show the image map in force ($ARENA_IMAGE_MAP, else
    ~/.config/posttrain-arena/image-map.toml): each FROM name, the image it is built
    from instead, and whether this machine's engine has that image."""
    from posttrain_arena.sandbox.base import SandboxError
    from posttrain_arena.sandbox.engine import docker_client
    from posttrain_arena.sandbox.imagemap import EngineImages, map_status

    try:
        path, rows = map_status(EngineImages(docker_client()).has)
    except SandboxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if as_json:
        typer.echo(json.dumps({"path": str(path) if path else None, "entries": [
            {"name": a, "image": b, "present": ok} for a, b, ok in rows]}, indent=2))
        raise typer.Exit(0 if all(ok for *_, ok in rows) else 1)
    typer.echo(f"image map: {path}" if path else "no image map (set ARENA_IMAGE_MAP or "
               "write ~/.config/posttrain-arena/image-map.toml)")
    for name, image, ok in rows:
        typer.echo(f"{name} -> {image}: {'present' if ok else 'MISSING on this engine'}")
    raise typer.Exit(0 if all(ok for *_, ok in rows) else 1)
