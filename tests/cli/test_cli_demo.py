"""`arena demo`'s progress when its output is not a terminal, and the organizer's first
command, `arena admin create-micro-challenge`, with the first page it leads to."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from posttrain_arena.cli import demo as cli_demo
from posttrain_arena.cli.main import app
from posttrain_arena.service.app import create_app
from posttrain_arena.service.config import Settings
from posttrain_arena.train.stages import StageEvent


def test_plain_lines_say_the_plan_then_report_at_least_every_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    lines = cli_demo._Lines(cli_demo._plan(False, 0), every=0.3)
    with lines:
        lines(StageEvent(stage="sft", status="start", message="on 160 trajectories"))
        lines(StageEvent(stage="sft", status="step", done=3, total=12))
        time.sleep(1.5)  # no event for a while: the timer reports the stage anyway
        lines(StageEvent(stage="sft", status="done", message="loss 0.2"))
        time.sleep(0.7)  # between stages: nothing to report, nothing printed
    out = err.getvalue().splitlines()
    assert re.search(r"builds the micro challenge.*about \d+ minutes", out[0]), out
    assert any("sft start on 160 trajectories" in line for line in out)
    beats = [line for line in out if re.search(r"sft: \d+ s in this stage, 3/12, about \d+ s "
                                               r"left", line)]
    assert len(beats) >= 2, out  # 1.5 s of silence at a 0.3 s interval
    assert out[-1].endswith("sft done loss 0.2"), out  # the stage ended: no more beats
    assert all(re.match(r"\[\s*\d+:\d\d\] ", line) for line in out), out


def test_an_empty_arena_says_the_command_that_creates_its_first_challenge(
        tmp_path: Path, arena_cache_dir: Path) -> None:
    data = tmp_path / "arena"
    with TestClient(create_app(Settings(data_dir=data))) as client:
        page = client.get("/arena").text
    assert "arena admin create-micro-challenge --data-dir" in page
    # Cap and reserved as separate, readable figures (they rendered as "1000.000.00").
    assert re.search(r"<dt>Cap</dt><dd>1,000\.00</dd>", page), page
    result = CliRunner().invoke(app, ["admin", "create-micro-challenge", "--data-dir",
                                      str(data)])
    assert result.exit_code == 0, result.output
    made = json.loads(result.stdout)
    assert made["slug"] == "micro" and made["suite_size"] == 40
    with TestClient(create_app(Settings(data_dir=data))) as client:
        page = client.get("/arena").text
        assert "/arena/challenges/micro" in page
        assert "create-micro-challenge" not in page
        challenge_page = client.get("/arena/challenges/micro")
        assert challenge_page.status_code == 200
        # What everyone may read names the recipe and the base, never the server's folders.
        answers = [client.get("/api/challenges"), client.get("/api/challenges/micro")]
        assert [a.status_code for a in answers] == [200, 200]
        for public in (page, challenge_page.text, *(a.text for a in answers)):
            assert str(data) not in public and str(data.resolve()) not in public
        assert made["recipe"].endswith(".toml") and "/" not in made["recipe"]
