"""The start-up floor of any typer command here: a one-command app that takes a folder
and a flag, as `arena collection check` does, and only says whether the folder exists
(`bench_check.py` runs it as a whole process).

typer (0.29) coerces parameters through pydantic TypeAdapters, so parsing one `Path`
argument already imports pydantic, and pydantic's plugin loader importlib.metadata:
whatever a typer CLI does afterwards, it starts from here.

    python benchmarks/typer_floor.py FOLDER [--json]
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def check(
    directory: Path = typer.Argument(..., help="A folder."),
    as_json: bool = typer.Option(False, "--json", help="Unused; parsed like arena's."),
) -> None:
    """Exit 0 when the folder exists."""
    raise typer.Exit(0 if directory.is_dir() else 1)


if __name__ == "__main__":
    app()
