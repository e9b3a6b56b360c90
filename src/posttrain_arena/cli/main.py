"""The `arena` command: a thin shell over the library.

Each area registers its commands from its own module (`cli/<area>.py`, a `register(app)`
function). Those modules import heavy libraries lazily, inside the command functions, so
that `arena --help` and `arena task check` start fast.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="arena",
    help="PostTrain Arena: measure what language models learn from task environments.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Order is the order of `arena --help`.
_AREAS = (
    "task",
    "collection",
    "replay",
    "sandbox",
    "evaluate",
    "train",
    "demo",
    "service",
    "client",
)


def _register_all() -> None:
    from posttrain_arena.cli.groups import GROUPS

    for area in _AREAS:
        module = importlib.import_module(f"posttrain_arena.cli.{area}")
        module.register(app)
    for name, group in GROUPS.items():
        if group.registered_commands or group.registered_groups:
            app.add_typer(group, name=name)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if version:
        from posttrain_arena import __version__

        typer.echo(__version__)
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)


_register_all()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
