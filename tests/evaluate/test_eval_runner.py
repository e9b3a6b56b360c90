"""Evaluation end to end: scripted model agents on real local sandboxes, resume, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agents.tasks import write_task
from posttrain_arena.cli.main import app
from posttrain_arena.evaluate.report import EvalReport
from posttrain_arena.evaluate.runner import evaluate, model_agents
from posttrain_arena.evaluate.suite import load_suite
from posttrain_arena.models.openai import OpenAIChatModel
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.trial.journal import Journal
from posttrain_arena.trial.runner import TrialRunner

pytestmark = pytest.mark.bwrap

# Solves the tasks whose word is "alpha" or "beta"; writes the wrong word elsewhere.
SCRIPT = """\
scripts:
  - match: 'alpha'
    responses: [{bash: 'echo alpha > out.txt'}, {submit: true}]
  - match: 'beta'
    responses: [{bash: 'echo beta > out.txt'}, {submit: true}]
default: [{bash: 'echo wrong > out.txt'}, {submit: true}]
"""


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    for name, word, domain in [("a", "alpha", "software-engineering"),
                               ("b", "beta", "cybersecurity"),
                               ("c", "gamma", "cybersecurity")]:
        write_task(tmp_path / "suite", name, word=word, domain=domain)
    (tmp_path / "script.yaml").write_text(SCRIPT)
    return tmp_path


def test_evaluate_rates_and_progress(suite_dir: Path) -> None:
    suite = load_suite(suite_dir / "suite")
    model = ScriptedModel.from_file(suite_dir / "script.yaml")
    seen: list[int] = []
    report = evaluate(suite, model_agents(model), k=2, jobs=2, runner=TrialRunner("local"),
                      progress=lambda done, total, r: seen.append(done))
    assert sorted(seen) == list(range(1, 7))
    assert {t.task_name: t.pass_rate for t in report.tasks} == {"a": 1.0, "b": 1.0, "c": 0.0}
    assert report.overall.pass_rate == pytest.approx(2 / 3)
    assert {d.name: d.pass_rate for d in report.domains} == {
        "cybersecurity": 0.5, "software-engineering": 1.0}
    assert report.overall.infra_errors == 0 and len(report.trials) == 6
    assert report.completion_tokens > 0 and report.suite_hash == suite.hash


def test_evaluation_seeds_start_where_asked(suite_dir: Path) -> None:
    """A run with another seed samples its own trials (its own identities, its own
    sampling seeds), not seeds 0..k-1 again."""
    suite = load_suite(suite_dir / "suite")
    model = ScriptedModel.from_file(suite_dir / "script.yaml")
    first = evaluate(suite, model_agents(model), k=2, runner=TrialRunner("local"))
    other = evaluate(suite, model_agents(model), k=2, runner=TrialRunner("local"), first_seed=6)
    assert sorted({t.seed for t in first.trials}) == [0, 1]
    assert sorted({t.seed for t in other.trials}) == [6, 7]
    assert not {t.trial_id for t in first.trials} & {t.trial_id for t in other.trials}


@pytest.mark.parametrize("journal_on", ["runner", "evaluate"])
def test_resume_reruns_only_missing_or_infrastructure(suite_dir: Path, journal_on: str) -> None:
    suite = load_suite(suite_dir / "suite")
    journal = Journal(suite_dir / "j.jsonl")
    runner = TrialRunner("local", journal=journal if journal_on == "runner" else None)
    own = journal if journal_on == "evaluate" else None
    dead = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="", max_retries=0)
    first = evaluate(suite, model_agents(dead, name="model:x"), runner=runner, journal=own)
    assert first.overall.infra_errors == 3 and first.overall.pass_rate is None
    good = ScriptedModel.from_file(suite_dir / "script.yaml")
    second = evaluate(suite, model_agents(good, name="model:x"), runner=runner, journal=own)
    assert second.overall.infra_errors == 0 and second.overall.pass_rate == pytest.approx(2 / 3)
    # Finished trials are read back, not re-run: the dead model changes nothing now.
    third = evaluate(suite, model_agents(dead, name="model:x"), runner=runner, journal=own)
    assert [t.model_dump() for t in third.tasks] == [t.model_dump() for t in second.tasks]


def test_cli_eval_then_compare(suite_dir: Path) -> None:
    cli = CliRunner()
    before, after = suite_dir / "before.json", suite_dir / "after.json"
    (suite_dir / "none.jsonl").write_text(json.dumps({"submit": True}) + "\n")
    res = cli.invoke(app, ["eval", str(suite_dir / "suite"), "--model",
                           f"scripted:{suite_dir / 'none.jsonl'}", "-o", str(before),
                           "--backend", "local"])
    assert res.exit_code == 0, res.output
    res = cli.invoke(app, ["eval", str(suite_dir / "suite"), "--model",
                           f"scripted:{suite_dir / 'script.yaml'}", "-k", "2", "-j", "2",
                           "-o", str(after), "--backend", "local"])
    assert res.exit_code == 0, res.output
    assert EvalReport.load(after).overall.pass_rate == pytest.approx(2 / 3)
    res = cli.invoke(app, ["compare", str(before), str(after), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["change_pp"] == pytest.approx(200 / 3) and data["improved"] == 2
    res = cli.invoke(app, ["compare", str(before), str(after)])
    assert res.exit_code == 0 and "pp" in res.output
    # The journal beside the report guards against silently mixing runs.
    res = cli.invoke(app, ["eval", str(suite_dir / "suite"), "--model",
                           f"scripted:{suite_dir / 'script.yaml'}", "-o", str(after)])
    assert res.exit_code == 2 and "--resume" in res.output


def test_cli_refuses_bad_heldout_and_spec(suite_dir: Path) -> None:
    cli = CliRunner()
    res = cli.invoke(app, ["eval", str(suite_dir / "suite"), "--model", "nope",
                           "-o", str(suite_dir / "r.json"), "--backend", "local"])
    assert res.exit_code == 2 and "openai:MODEL" in res.output
    res = cli.invoke(app, ["eval", str(suite_dir / "suite"), "--model",
                           f"scripted:{suite_dir / 'script.yaml'}", "--heldout",
                           "-o", str(suite_dir / "r2.json"), "--backend", "local"])
    assert res.exit_code == 2 and "held-out" in res.output
