"""`arena collection gate` through the CLI (local backend, scripted base model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from posttrain_arena.cli.main import app

from .kit import failing_script, make_package, solving_script


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.mark.bwrap
def test_gate_prints_the_table_writes_records_and_reuses_them(
        tmp_path: Path, arena_cache_dir: Path) -> None:
    root = tmp_path / "coll" / "envs"
    solved = make_package(root, "solved")
    make_package(root, "unsolved")
    script = tmp_path / "model.yaml"
    script.write_text(yaml.safe_dump({"scripts": [{"match": "Task solved:",
                                                   "responses": solving_script(solved)}],
                                      "default": failing_script()}))
    records = tmp_path / "records"
    args = ["collection", "gate", str(tmp_path / "coll"), "--model", f"scripted:{script}",
            "-k", "2", "--reruns", "2", "-j", "2", "--backend", "local",
            "--records", str(records)]
    code, out = _invoke(*args, "--json")
    assert code == 1, out  # a scripted model solves always or never: nothing is learnable
    report = json.loads(out[out.index("{"):])
    by_task = {e["task"]: e for e in report["evidence"]}
    assert by_task["solved"]["base"]["solved"] == 2 and by_task["unsolved"]["base"]["solved"] == 0
    assert all(e["verdict"]["eligible"] is False for e in by_task.values())
    assert len(list((records / "evidence").glob("*.json"))) == 2

    code, out = _invoke(*args)
    assert code == 1, out
    flat = " ".join(out.split())  # the table wraps to the terminal's width
    assert "0 trial(s) and 0 probe verification(s) run, 2 record(s) reused" in flat, out
    assert "(reused)" in flat and "not learnable" in flat


@pytest.mark.parametrize(("extra", "message"), [
    (["-k", "1"], "k of at least 2"),
    (["--model", "nonsense"], "not understood"),
])
def test_gate_usage_errors_exit_2(tmp_path: Path, extra: list[str], message: str) -> None:
    make_package(tmp_path / "envs", "one")
    args = ["collection", "gate", str(tmp_path), "--model", "scripted:/nonexistent.yaml",
            "--backend", "local", "--records", str(tmp_path / "r")]
    if extra[0] == "--model":
        args[4] = extra[1]
    else:
        args += extra
        script = tmp_path / "m.yaml"
        script.write_text(yaml.safe_dump(failing_script()))
        args[4] = f"scripted:{script}"
    code, out = _invoke(*args)
    assert code == 2 and message in out, out


def test_gate_refuses_a_missing_folder(tmp_path: Path) -> None:
    code, out = _invoke("collection", "gate", str(tmp_path / "nope"), "--model", "scripted:x")
    assert code == 2 and "is not a folder" in out
