"""The `arena` command: a thin shell over the library.

Each area registers its commands from its own module (`cli/<area>.py`, a `register(app)`
function). Those modules import heavy libraries lazily, inside the command functions, so
that `arena --help` and `arena task check` start fast. The console script goes further:
`arena NAME ...` imports and mounts only the areas that define NAME (COMMAND_AREAS), so
typer builds one branch of the command tree, not all of it (`python -m` too). `app`, the
fully registered root, is what tests drive.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer

# Order is the order of `arena --help`.
AREAS = (
    "task",
    "collection",
    "replay",
    "sandbox",
    "evaluate",
    "export",
    "train",
    "demo",
    "service",
    "client",
)

#: The areas that define each top-level command. A name that is missing here (a typo,
#: `--help`) gets every area. tests/cli/test_cli_root.py proves the table complete.
COMMAND_AREAS: dict[str, tuple[str, ...]] = {
    "task": ("task", "replay"),
    "collection": ("collection", "replay"),
    "sandbox": ("sandbox",),
    "images": ("sandbox",),
    "eval": ("evaluate",),
    "compare": ("evaluate",),
    "export": ("export",),
    "train": ("train",),
    "demo": ("demo",),
    "serve": ("service",),
    "worker": ("service",),
    "admin": ("service", "demo"),
    "challenges": ("client",),
    "validate": ("client",),
    "submit": ("client",),
    "run": ("client",),
    "runs": ("client",),
    "cancel": ("client",),
    "review": ("client",),
    "leaderboard": ("client",),
    "budget": ("client",),
    "result": ("client",),
    "token": ("client",),
    "board": ("client",),
}


def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    # main() held the collector off while the CLI started; what exists now lives as long
    # as the process, so move it out of the collector's generations and turn it back on.
    gc.freeze()
    gc.enable()
    if version:
        from posttrain_arena import __version__

        typer.echo(__version__)
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)


def build_app(areas: Sequence[str] = AREAS) -> typer.Typer:
    """A root `arena` app with the commands of `areas` mounted."""
    from posttrain_arena.cli.groups import GROUPS

    root = typer.Typer(
        name="arena",
        help="PostTrain Arena: measure what language models learn from task environments.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    root.callback(invoke_without_command=True)(_root)
    for area in AREAS:  # in help order, whatever order `areas` came in
        if area in areas:
            importlib.import_module(f"posttrain_arena.cli.{area}").register(root)
    for name, group in GROUPS.items():
        if group.registered_commands or group.registered_groups:
            root.add_typer(group, name=name)
    return root


def areas_for(argv: Sequence[str]) -> tuple[str, ...]:
    """The areas needed to run `arena *argv`: the command's own, else all of them."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return COMMAND_AREAS.get(first, AREAS) if first is not None else AREAS


_full_app: typer.Typer | None = None


def __getattr__(name: str) -> Any:
    """`app`: the root with every area, built on first use."""
    global _full_app
    if name == "app":
        if _full_app is None:
            _full_app = build_app()
        return _full_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Environment defaults for an `arena` process, set before any library loads (a value the
#: user set wins). OMP_WAIT_POLICY: torch's OpenMP threads sleep when they have no work
#: instead of spinning, which is read once, when torch loads. On two shared cores,
#: spinning SFT threads took the CPU from whatever ran beside them (sandboxes, another
#: run): with two busy processes beside `arena demo`, SFT took 119 s spinning and 55 s
#: sleeping, with the same figures; alone it costs a few seconds.
PROCESS_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}


def main() -> None:
    """Console-script entry point."""
    for name, value in PROCESS_DEFAULTS.items():
        os.environ.setdefault(name, value)
    # Start-up builds tens of thousands of objects that never die (modules, typer's
    # commands); collecting while they are made only rescans them. _root turns the
    # collector back on before any command runs.
    gc.disable()
    build_app(areas_for(sys.argv[1:]))()


if __name__ == "__main__":
    main()
