"""The root `arena` command: version, help, and every area registered."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from posttrain_arena import __version__
from posttrain_arena.cli.main import AREAS, COMMAND_AREAS, app, areas_for

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


_TREE = """
import json, sys
import typer.main
from posttrain_arena.cli.main import AREAS, build_app

def tree(command):
    subs = getattr(command, "commands", None)
    if subs is None:
        return sorted(p.name for p in command.params)
    return {name: tree(sub) for name, sub in subs.items()}

areas = sys.argv[1].split(",") if sys.argv[1] else AREAS
print(json.dumps(tree(typer.main.get_command(build_app(areas)))))
"""


def _tree(areas: Sequence[str]) -> dict[str, Any]:
    """The command tree of a root built from `areas`, in a fresh interpreter: areas add
    commands to shared groups as they are imported, so one process cannot build twice."""
    proc = subprocess.run([sys.executable, "-c", _TREE, ",".join(areas)],
                          capture_output=True, text=True, check=True)
    tree: dict[str, Any] = json.loads(proc.stdout)
    return tree


@pytest.fixture(scope="module")
def full_tree() -> dict[str, Any]:
    return _tree(AREAS)


def test_every_top_level_command_says_which_areas_define_it(full_tree: dict[str, Any]) -> None:
    assert set(full_tree) == set(COMMAND_AREAS)


@pytest.mark.parametrize("name", sorted(COMMAND_AREAS))
def test_a_command_built_from_its_own_areas_matches_the_full_app(
        name: str, full_tree: dict[str, Any]) -> None:
    """`arena NAME` builds only NAME's areas; what it gets must be all of NAME."""
    assert _tree(areas_for([name, "--help"]))[name] == full_tree[name]


def test_options_before_the_command_do_not_hide_it() -> None:
    assert areas_for(["--verbose", "demo"]) == COMMAND_AREAS["demo"]
    assert areas_for([]) == AREAS
    assert areas_for(["no-such-command"]) == AREAS


def test_the_console_script_runs_a_lean_command(tmp_path: Path) -> None:
    """End to end through `main()`: the process only knows `task`'s branch and works."""
    new = subprocess.run([sys.executable, "-m", "posttrain_arena.cli.main", "task", "new",
                          "t1", "--dir", str(tmp_path), "--category", "cybersecurity"],
                         capture_output=True, text=True, check=False)
    assert new.returncode == 0, new.stderr
    check = subprocess.run([sys.executable, "-m", "posttrain_arena.cli.main", "task", "check",
                            str(tmp_path / "t1")], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    typo = subprocess.run([sys.executable, "-m", "posttrain_arena.cli.main", "tsk"],
                          capture_output=True, text=True, check=False)
    assert typo.returncode == 2
    assert "No such command" in typo.stderr


def test_commands_run_with_the_collector_on(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """main() pauses garbage collection while the CLI starts; the command gets it back."""
    import gc

    from posttrain_arena.cli.main import main

    monkeypatch.setattr(sys, "argv", ["arena", "--version"])
    try:
        with pytest.raises(SystemExit) as exit_info:
            main()
        assert exit_info.value.code == 0
        assert capsys.readouterr().out.strip() == __version__
        assert gc.isenabled()
    finally:
        gc.enable()


_SHOW_ENV = """
import os, sys
from posttrain_arena.cli import main as entry
entry.build_app = lambda areas: lambda: print(os.environ.get("OMP_WAIT_POLICY"),
                                             "torch" in sys.modules)
sys.argv = ["arena", "demo"]
entry.main()
"""


@pytest.mark.parametrize(("given", "seen"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_the_process_defaults_are_set_before_torch_loads_and_yield_to_the_user(
        given: str | None, seen: str) -> None:
    """An `arena` process's OpenMP threads sleep when idle unless the user says otherwise,
    set before any command imports torch (libgomp reads it once, when it loads)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    shown = subprocess.run([sys.executable, "-c", _SHOW_ENV], env=env, capture_output=True,
                           text=True, check=False)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == [seen, "False"]
