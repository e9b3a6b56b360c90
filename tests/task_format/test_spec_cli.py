"""The CLI: exit codes 0/1/2, --json, no tracebacks on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from posttrain_arena.cli.main import app

from .conftest import write_collection, write_package

runner = CliRunner()


def arena(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        result.output, result.exception)
    assert "Traceback" not in result.output
    return result


def test_task_check_exit_codes_and_json(tmp_path: Path) -> None:
    good = write_package(tmp_path / "good")
    bad = write_package(tmp_path / "bad", drop=("oracle/solve.sh",))
    assert arena("task", "check", str(good)).exit_code == 0
    result = arena("task", "check", str(good), str(bad), "--json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert [t["ok"] for t in data["tasks"]] == [True, False]
    assert data["tasks"][1]["findings"][0]["code"] == "oracle"
    human = arena("task", "check", str(bad))
    assert human.exit_code == 1 and "oracle/solve.sh" in human.output


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert arena("task", "check").exit_code == 2
    assert arena("task", "new", "x", "--category", "astrology").exit_code == 2
    assert arena("collection", "check", "--bogus").exit_code == 2


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", "/abs", "UPPER", "-dash", ""])
def test_task_new_refuses_unsafe_names(tmp_path: Path, name: str) -> None:
    result = arena("task", "new", name, "--category", "cybersecurity", "--dir", str(tmp_path))
    assert result.exit_code == 2
    assert list(tmp_path.iterdir()) == [] and not (tmp_path.parent / "escape").exists()


def test_task_new_then_check(tmp_path: Path) -> None:
    result = arena("task", "new", "parse-logs", "--category", "cybersecurity",
                   "--dir", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    path = Path(json.loads(result.output)["path"])
    assert arena("task", "check", str(path)).exit_code == 0
    again = arena("task", "new", "parse-logs", "--category", "cybersecurity",
                  "--dir", str(tmp_path))
    assert again.exit_code == 1


def test_schema_command() -> None:
    task = json.loads(arena("task", "schema").output)
    sub = json.loads(arena("task", "schema", "--submission").output)
    assert "metadata" in task["properties"] and "metadata" in task["required"]
    assert set(sub["required"]) == {"team_name", "contact_email", "track"}


def test_collection_check_outputs(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", 2)
    result = arena("collection", "check", str(root))
    assert result.exit_code == 0 and "software-engineering 2" in result.output
    data = json.loads(arena("collection", "check", str(root), "--json").output)
    assert data["ok"] and data["content_hash"].startswith("sha256:")
    empty = write_collection(tmp_path / "empty", 0)
    assert arena("collection", "check", str(empty)).exit_code == 1
    nosub = write_collection(tmp_path / "nosub", 1, submission=None)
    out = arena("collection", "check", str(nosub), "--json")
    assert out.exit_code == 1 and not json.loads(out.output)["ok"]


def test_bad_input_corpus_through_the_real_process(tmp_path: Path) -> None:
    """One subprocess over many broken packages: findings on stdout, no traceback."""
    broken = {
        "bomb": {"task.md": "---\na: &a [1,1]\nb: &b [*a,*a]\nc: [*b,*b]\n---\n## prompt\nx\n"},
        "binary": {"task.md": b"\x89PNG\r\n\x1a\n\x00\x00"},
        "types": {"task.md": "---\nversion: 1\nmetadata: 3\nagent: []\nverifier: x\n---\n"},
    }
    paths = [str(write_package(tmp_path / name, files)) for name, files in broken.items()]
    loop = write_package(tmp_path / "loop")
    os.symlink("self", loop / "environment" / "self")
    paths.append(str(loop))
    proc = subprocess.run([sys.executable, "-m", "posttrain_arena.cli.main", "task", "check",
                           *paths], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    for name in broken:
        assert f"{tmp_path / name}/task.md" in proc.stdout
    assert "symlink loop" in proc.stdout
