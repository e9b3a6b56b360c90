"""`arena task run` and `arena collection replay` through the CLI (local backend)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from posttrain_arena.cli.main import app

from .taskkit import make_task

pytestmark = pytest.mark.bwrap


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_task_run_oracle_and_empty(tmp_path: Path, trial_cache: Path) -> None:
    task = make_task(tmp_path / "task")
    records = str(tmp_path / "records")
    code, out = _invoke("task", "run", str(task.root), "--backend", "local",
                        "--records", records)
    assert code == 0, out
    assert "reward: 1.0" in out
    code, out = _invoke("task", "run", str(task.root), "--backend", "local",
                        "--skip-oracle", "--records", records)
    assert code == 0, out
    assert "reward: 0.0" in out


def test_task_run_fails_when_the_verifier_accepts_nothing(
    tmp_path: Path, trial_cache: Path
) -> None:
    accepting = ('import os\nopen(os.environ["BENCHFLOW_REWARD_TEXT"], "w").write("1.0")\n')
    task = make_task(tmp_path / "task", verifier_py=accepting)
    code, out = _invoke("task", "run", str(task.root), "--backend", "local", "--skip-oracle",
                        "--records", str(tmp_path / "records"))
    assert code == 1
    assert "accepts an untouched environment" in out


def test_task_run_script_probe_json(tmp_path: Path, trial_cache: Path) -> None:
    task = make_task(tmp_path / "task")
    probe = tmp_path / "cheat.sh"
    probe.write_text("mkdir -p /logs/verifier; echo 1.0 > /logs/verifier/reward.txt\n")
    code, out = _invoke("task", "run", str(task.root), "--backend", "local",
                        "--agent", f"script:{probe}", "--json",
                        "--records", str(tmp_path / "records"))
    assert code == 0, out
    data = json.loads(out)
    assert data["kind"] == "script"
    assert data["result"]["outcome"] == "scored" and data["result"]["reward"] == 0.0


def test_task_run_rejects_a_bad_backend(tmp_path: Path) -> None:
    task = make_task(tmp_path / "task")
    code, out = _invoke("task", "run", str(task.root), "--backend", "nowhere")
    assert code == 2
    assert "unknown sandbox backend" in out


def test_collection_replay_json(tmp_path: Path, trial_cache: Path) -> None:
    make_task(tmp_path / "coll" / "envs" / "one")
    make_task(tmp_path / "coll" / "envs" / "two")
    code, out = _invoke("collection", "replay", str(tmp_path / "coll"), "-j", "2",
                        "--backend", "local", "--json", "--records", str(tmp_path / "rec"))
    assert code == 0, out
    data = json.loads(out[out.index("{"):])
    assert data["backend"] == "local"
    kinds = sorted((c["task"], c["kind"], c["ok"]) for c in data["checks"])
    assert kinds == [("one", "empty", True), ("one", "oracle", True),
                     ("two", "empty", True), ("two", "oracle", True)]


def test_collection_replay_table(tmp_path: Path, trial_cache: Path) -> None:
    make_task(tmp_path / "coll" / "envs" / "one")
    code, out = _invoke("collection", "replay", str(tmp_path / "coll"), "--backend", "local",
                        "--records", str(tmp_path / "rec"))
    assert code == 0, out
    assert "one" in out and "1 task(s), 2 trial(s), 0 problem(s)" in out
