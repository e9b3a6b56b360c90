"""`arena demo --compare`: post-training on the relevant collection shows real learning
on the held-out suite, and post-training on the off-topic collection does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from posttrain_arena.challenges.micro import OFFTOPIC, RELEVANT
from posttrain_arena.cli.main import app

pytestmark = [pytest.mark.slow, pytest.mark.bwrap]


def test_demo_compare_learns_from_the_relevant_collection_only(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--compare", "--json", "--seed", "0",
                                      "--workdir", str(tmp_path / "micro")])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert set(scores) == {RELEVANT, OFFTOPIC}
    relevant, offtopic = scores[RELEVANT], scores[OFFTOPIC]
    assert relevant["ci95_low_pp"] > 0, relevant
    assert relevant["final_rate"] > relevant["base_rate"]
    assert not offtopic["ci95_low_pp"] > 0, offtopic
    for score in scores.values():
        assert score["tasks"] == 40 and score["samples_per_task"] == 4
        assert Path(score["run_dir"], "stages", "score", "score.json").is_file()
