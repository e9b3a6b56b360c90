"""The whole pipeline on a tiny model and tiny tasks in the local sandbox: score.json,
exclusions, and resume after kills inside a stage and between stages."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from posttrain_arena.agents.model import initial_messages
from posttrain_arena.evaluate.report import EvalReport
from posttrain_arena.train.pipeline import run_recipe
from posttrain_arena.train.recipe import parse_recipe
from posttrain_arena.train.sources import taskset_hash
from posttrain_arena.train.stages import StageEvent

from .taskkit import make_word_task

TRAIN = {
    "greet": ("hello", "Put a greeting word into answer.txt for the visitors."),
    "fruit": ("apple", "Name a red fruit in answer.txt, lowercase, nothing else."),
    "color": ("blue", "The sky's colour goes into answer.txt as one word."),
}
HELD = {
    "animal": ("cat", "Which pet says meow? Answer in answer.txt with one word."),
    "metal": ("gold", "Write the yellow precious metal's name to answer.txt."),
}


class Killed(Exception):
    """Stands in for the process dying."""


def _collections(root: Path) -> tuple[Path, Path]:
    train, held = root / "collection", root / "suite"
    (train / "envs").mkdir(parents=True)
    (train / "submission.yaml").write_text(
        "team_name: tests\ncontact_email: t@example.org\ntrack: environments\n")
    for name, (word, prompt) in TRAIN.items():
        make_word_task(train / "envs" / name, word=word, prompt=prompt)
    for name, (word, prompt) in HELD.items():
        make_word_task(held / name, word=word, prompt=prompt)
    shutil.copytree(held / "metal", train / "envs" / "zz-copied-metal")  # leakage
    return train, held


def _recipe(tmp: Path, model: Path) -> Any:
    train, held = _collections(tmp)
    data = {
        "name": "pipeline-test",
        "model": {"id": str(model)},
        "train": {"collection": str(train)},
        "eval": {"suite": str(held), "sha256": taskset_hash(held)},
        "teacher": {"kind": "oracle"},
        "sft": {"method": "lora", "max_steps": 4, "per_device_batch_size": 1,
                "gradient_accumulation_steps": 1, "learning_rate": 5e-3, "save_steps": 2,
                "lora": {"r": 4, "alpha": 8}},
        "grpo": {"steps": 1, "tasks_per_step": 1, "num_generations": 2,
                 "max_completion_length": 256, "learning_rate": 1e-3,
                 "lora": {"r": 4, "alpha": 8}, "gate": {"tasks": 2, "on_fail": "continue"}},
        "agent": {"max_turns": 2, "max_new_tokens": 8, "timeout_sec": 60},
        "runtime": {"sandbox": "local", "concurrency": 2, "k": 1, "seed": 3, "device": "cpu"},
        "output": {"dir": str(tmp / "runs")},
    }
    return parse_recipe(data, base_dir=tmp)


def _events(kill: tuple[str, str] | None = None) -> tuple[list[StageEvent], Any]:
    seen: list[StageEvent] = []

    def progress(e: StageEvent) -> None:
        seen.append(e)
        if kill is not None and (e.stage, e.status) == kill:
            raise Killed(f"{e.stage} {e.status}")

    return seen, progress


@pytest.mark.bwrap
@pytest.mark.slow
def test_pipeline_scores_and_resumes(tiny_model: Path, tmp_path: Path,
                                     train_cache: Path) -> None:
    recipe = _recipe(tmp_path, tiny_model)
    run_dir = tmp_path / "runs" / "r1"

    _, kill_in_sft = _events(("sft", "checkpoint"))
    with pytest.raises(Killed):
        run_recipe(recipe, run_dir=run_dir, progress=kill_in_sft)
    assert (run_dir / "stages" / "sft.partial" / "checkpoints").is_dir()

    _, kill_before_grpo = _events(("grpo", "start"))
    with pytest.raises(Killed):
        run_recipe(recipe, run_dir=run_dir, progress=kill_before_grpo)
    sft = json.loads((run_dir / "stages" / "sft" / "done.json").read_text())["summary"]
    assert sft["resumed_from"] == "checkpoint-2"  # continued inside the stage
    assert sft["param_delta_norm"] > 0

    seen, progress = _events()
    score = run_recipe(recipe, run_dir=run_dir, progress=progress)
    status = {e.stage: e.status for e in seen if e.status in ("skip", "done")}
    for stage in ("snapshot", "leakage", "baseline", "teacher", "sft", "after_sft", "gate"):
        assert status[stage] == "skip"  # not recomputed
    for stage in ("grpo", "final", "score"):
        assert status[stage] == "done"

    assert score.status == "scored"
    assert score.base is not None and score.final is not None and score.change is not None
    assert score.base.tasks == len(HELD)
    assert score.change.delta_pp == pytest.approx(
        100 * (score.final.pass_rate - score.base.pass_rate))
    assert score.change.ci95_low_pp <= score.change.delta_pp <= score.change.ci95_high_pp
    assert 0.0 <= score.change.p_value <= 1.0
    assert [(e.task, e.reason, e.held_out_task) for e in score.exclusions] == [
        ("zz-copied-metal", "exact-copy", "metal")]
    assert score.teacher["covered"] == len(TRAIN) and score.teacher["coverage"] == 1.0
    assert score.grpo["steps"] == 1 and "training_pass_rate_after" in score.grpo
    # GRPO's own change: final minus the SFT policy on the same suite, paired.
    assert score.after_sft is not None and score.grpo_change is not None
    assert score.grpo_change.delta_pp == pytest.approx(
        100 * (score.final.pass_rate - score.after_sft.pass_rate))
    assert score.grpo_change.paired_tasks == len(HELD)
    assert "strata" in score.change.method and score.change.clusters == len(HELD)
    # Coverage of every evaluation: each held-out task's k = 1 trial, all scored.
    for arm in ("base", "after_sft", "final"):
        assert (score.coverage[arm].attempted, score.coverage[arm].scored) == (len(HELD),
                                                                              len(HELD))
    assert score.change.paired_trials == len(HELD) and score.change.dropped_trials == 0
    assert score.change.detectable_pp > 0 and score.change.verdict
    prov = score.provenance
    assert prov is not None and prov.suite_sealed and prov.recipe_hash == recipe.recipe_hash()
    # The run's seed (3) picks its evaluation seeds, so another seed's run (the
    # repeat-seed control) measures its own baseline instead of seeds 0..k-1 again.
    assert (prov.seeds["eval_first_seed"], prov.seeds["eval_last_seed"]) == (3, 3)
    for arm in ("baseline", "after_sft", "final"):
        report = EvalReport.load(run_dir / "stages" / arm / "eval.json")
        assert {t.seed for t in report.trials} == {3}
    assert prov.model_content_hash and prov.collection_hash.startswith("sha256:")
    # Teacher trajectories are in the model agent's own message format.
    lines = (run_dir / "stages" / "teacher" / "trajectories.jsonl").read_text().splitlines()
    traj = json.loads(lines[0])
    assert [m["role"] for m in traj["messages"]] == [
        "system", "user", "assistant", "tool", "assistant"]
    system, _user = initial_messages(TRAIN[traj["task"]][1], 60)
    assert traj["messages"][0]["content"] == system.content
    assert traj["messages"][1]["content"].startswith(TRAIN[traj["task"]][1])
    call = traj["messages"][2]["tool_calls"][0]
    assert call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == {
        "command": f"echo {TRAIN[traj['task']][0]} > answer.txt"}
    assert traj["messages"][3]["content"].startswith("[exit code 0]")
    assert traj["messages"][4]["tool_calls"][0]["function"]["name"] == "submit"
    on_disk = json.loads((run_dir / "score.json").read_text())
    assert on_disk["change"]["delta_pp"] == score.change.delta_pp

    # The final evaluation's trials lost to the harness: the run scores nothing, it says
    # "incomplete" with the counts (this was change 0.0 [0.0, 0.0], p = 1).
    final_eval = run_dir / "stages" / "final" / "eval.json"
    report = EvalReport.load(final_eval)
    report.model_copy(update={"trials": [
        t.model_copy(update={"outcome": "infra_error", "reason": "sandbox did not start"})
        for t in report.trials]}).save(final_eval)
    shutil.rmtree(run_dir / "stages" / "score")
    again = run_recipe(recipe, run_dir=run_dir, progress=_events()[1])
    assert again.status == "incomplete"
    assert again.change is None and again.final is None and again.base is None
    assert (again.coverage["final"].scored, again.coverage["final"].lost) == (0, len(HELD))
    assert again.coverage["final"].lost_by_cause == {"harness": len(HELD)}
    assert again.coverage["base"].scored == len(HELD)
    assert any(line.startswith(f"final: 0 of {len(HELD)} trials scored")
               for line in again.incomplete)
