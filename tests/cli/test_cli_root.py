"""The root `arena` command: version, help, and every area registered."""

from __future__ import annotations

from typer.testing import CliRunner

from posttrain_arena import __version__
from posttrain_arena.cli.main import app

runner = CliRunner()


def test_version_prints_the_package_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == __version__


def test_no_command_shows_help_as_a_usage_error() -> None:
    result = runner.invoke(app, [])
    assert result.exit_code == 2
    assert "Commands" in result.output


def test_every_user_facing_entry_point_is_registered() -> None:
    result = runner.invoke(app, ["--help"])
    for command in ("task", "collection", "eval", "compare", "train", "demo", "serve",
                    "worker", "submit", "leaderboard", "sandbox", "images"):
        assert command in result.output, command
