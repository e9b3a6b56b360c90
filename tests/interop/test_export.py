"""Episodes out: TRL-ready SFT rows as JSONL and as a `datasets` dataset on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.interop.harbor_kit import write_harbor_task
from typer.testing import CliRunner

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.cli.main import app
from posttrain_arena.task_format.package import load_task
from posttrain_arena.trajectories.export import export, read_attempts, read_records
from posttrain_arena.trial.runner import TrialRunner


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("export")
    task = load_task(write_harbor_task(root / "count-words"))
    with TrialRunner("local", warm_pool=False, records_root=root / "records") as runner:
        assert runner.run(task, OracleAgent()).reward == 1.0
        assert runner.run(task, EmptyAgent()).reward == 0.0
    return root / "records"


@pytest.mark.bwrap
def test_passing_episodes_become_trl_rows(records: Path, tmp_path: Path) -> None:
    from datasets import load_from_disk
    from trl.data_utils import is_conversational

    out, ds_dir = tmp_path / "rows.jsonl", tmp_path / "ds"
    report = export(read_records(records), out, ds_dir)
    assert report.episodes == 2 and report.rows == 1
    assert report.skipped == {"no assistant turn": 1}  # the empty agent only got the prompt
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert is_conversational(row)
    roles = [m["role"] for m in row["messages"]]
    assert roles[0] == "user" and roles[-1] == "assistant"
    call = row["messages"][1]["tool_calls"][0]
    assert call["function"]["name"] == "bash"
    assert "solve.sh" in call["function"]["arguments"]["command"]  # an object, not a string
    assert row["tools"][0]["function"]["name"] == "bash"
    assert row["reward"] == 1.0 and row["outcome"] == "scored" and row["task"] == "count-words"
    ds = load_from_disk(str(ds_dir))
    assert len(ds) == 1 and ds[0]["messages"][0]["content"] == row["messages"][0]["content"]
    assert ds[0]["trial_id"] == row["trial_id"]


@pytest.mark.bwrap
def test_all_keeps_failures_but_never_infrastructure(records: Path, tmp_path: Path) -> None:
    report = export(read_records(records), tmp_path / "all.jsonl", None, include_all=True)
    rows = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    # the empty agent never speaks: no assistant turn, nothing to learn from, even with --all
    assert report.rows == len(rows) == 1 and report.skipped == {"no assistant turn": 1}


def test_teacher_attempts_are_a_source(tmp_path: Path) -> None:
    from posttrain_arena.train.teacher import TeacherAttempt

    msgs = [{"role": "user", "content": "do it"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c0", "type": "function",
                 "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
            {"role": "tool", "content": "a\n", "tool_call_id": "c0"},
            {"role": "assistant", "content": "done"}]
    lines = [TeacherAttempt(task="t", attempt=i, outcome=o, reward=r, accepted=r == 1.0,
                            messages=msgs).model_dump_json()
             for i, (o, r) in enumerate([("scored", 1.0), ("scored", 0.0),
                                         ("infra_error", None)])]
    log = tmp_path / "attempts.jsonl"
    log.write_text("\n".join(lines) + "\nnot json\n")
    report = export(read_attempts(log), tmp_path / "o.jsonl", None, include_all=True)
    assert report.rows == 2 and report.skipped == {"infrastructure failure": 1}
    row = json.loads((tmp_path / "o.jsonl").read_text().splitlines()[0])
    assert row["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"command": "ls"}
    assert row["messages"][2]["name"] == "bash" and row["messages"][2]["tool_call_id"] == "c0"


def test_cli_export(tmp_path: Path) -> None:
    runner = CliRunner()
    none = runner.invoke(app, ["export", str(tmp_path)])
    assert none.exit_code == 2
    bad = runner.invoke(app, ["export", str(tmp_path / "missing.txt"), "-o", "x.jsonl"])
    assert bad.exit_code == 2
    (tmp_path / "empty").mkdir()
    ok = runner.invoke(app, ["export", str(tmp_path / "empty"), "-o",
                             str(tmp_path / "r.jsonl")])
    assert ok.exit_code == 0 and json.loads(ok.output)["rows"] == 0
