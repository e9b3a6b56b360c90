"""verifier.md rubrics: the weighted sum of reward.json's dimensions is the reward."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.task_format.checks import check_task
from posttrain_arena.task_format.package import load_task
from posttrain_arena.task_format.rubric import Dimension, Rubric, score
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.rubric import apply_rubric
from posttrain_arena.trial.runner import TrialRunner
from posttrain_arena.trial.verifier import VerifierReading, read_reward

RUBRIC = Rubric(dimensions={"correctness": Dimension(weight=0.75),
                            "style": Dimension(weight=0.25)})


def test_weighted_sum_of_dimensions() -> None:
    got = score(RUBRIC, {"correctness": 1.0, "style": 0.2}, None)
    assert got.reason is None and got.reward == pytest.approx(0.75 + 0.25 * 0.2)
    assert {d.name: d.score for d in got.dimensions} == {"correctness": 1.0, "style": 0.2}
    nested = score(RUBRIC, {"dimensions": {"correctness": 0.0, "style": 1.0}}, None)
    assert nested.reward == pytest.approx(0.25)


def test_weights_are_normalised() -> None:
    heavy = Rubric(dimensions={"a": Dimension(weight=3), "b": Dimension(weight=1)})
    assert score(heavy, {"a": 1, "b": 1}, None).reward == pytest.approx(1.0)
    assert score(heavy, {"a": 0, "b": 1}, None).reward == pytest.approx(0.25)


def test_one_number_still_works() -> None:
    assert score(RUBRIC, {"reward": 0.5}, 0.5).reward == 0.5
    assert score(RUBRIC, None, 1.0).reward == 1.0
    assert score(RUBRIC, None, None).reward is None


@pytest.mark.parametrize(("data", "written", "why"), [
    ({"correctness": 1.0}, None, "not style"),
    ({"correctness": 1.0, "style": 1.5}, None, "in [0, 1]"),
    ({"correctness": 1.0, "style": "good"}, None, "in [0, 1]"),
    ({"correctness": 1.0, "style": True}, None, "in [0, 1]"),
    ({"correctness": 1.0, "style": float("nan")}, None, "in [0, 1]"),
    ({"correctness": 1.0, "style": 0.0}, 1.0, "agree"),
])
def test_partial_or_bad_or_disagreeing_scores_are_no_reward(data: dict[str, object],
                                                            written: float | None,
                                                            why: str) -> None:
    got = score(RUBRIC, data, written)
    assert got.reward is None and got.reason is not None and why in got.reason


@pytest.mark.parametrize(("txt", "expected"), [(None, 0.25), ("0.25", 0.25), ("1.0", None)])
def test_reward_txt_beside_dimensions_must_agree_with_their_sum(
        tmp_path: Path, txt: str | None, expected: float | None) -> None:
    # A dimensions-only reward.json (sum 0.25) beside a reward.txt: code the verifier ran
    # must not lift the reward by writing the other file.
    (tmp_path / "reward.json").write_text(json.dumps({"correctness": 0.0, "style": 1.0}))
    if txt is not None:
        (tmp_path / "reward.txt").write_text(txt)
    reward, reason = read_reward(tmp_path)
    got = apply_rubric(RUBRIC, tmp_path, VerifierReading(reward, reason),
                       exited_normally=True)
    assert got.reward == (pytest.approx(expected) if expected is not None else None)
    if expected is None:
        assert got.reason is not None


VERIFIER_MD = """\
---
document_version: "1.0"
verifier:
  name: graded
  rubric:
    combine: weighted_sum
    dimensions:
      correctness: {weight: 0.75, source: pytest}
      style: {weight: 0.25}
---

## role:reviewer

Be fair.
"""

VERIFIER_PY = """\
import json, pathlib
root = pathlib.Path("/root")
correct = (root / "answer.txt").is_file() and (root / "answer.txt").read_text().strip() == "42"
style = 1.0 if (root / "NOTES.md").is_file() else 0.0
out = pathlib.Path("/logs/verifier")
out.mkdir(parents=True, exist_ok=True)
(out / "reward.json").write_text(json.dumps({"correctness": 1.0 if correct else 0.0,
                                             "style": style}))
"""


def _graded(root: Path, solve: str, verifier_md: str = VERIFIER_MD) -> Path:
    (root / "environment").mkdir(parents=True)
    (root / "verifier").mkdir()
    (root / "oracle").mkdir()
    (root / "task.md").write_text(
        "---\nschema_version: \"1.3\"\nmetadata:\n  category: software-engineering\n"
        "agent:\n  timeout_sec: 60\nverifier:\n  timeout_sec: 60\nsandbox:\n  cpus: 1\n"
        "---\nWrite 42 into /root/answer.txt.\n")
    (root / "environment" / "Dockerfile").write_text(
        "FROM posttrain-arena/python:bookworm\nWORKDIR /root\n")
    (root / "verifier" / "verifier.py").write_text(VERIFIER_PY)
    (root / "verifier" / "verifier.md").write_text(verifier_md)
    (root / "oracle" / "solve.sh").write_text(f"#!/bin/bash\n{solve}\n")
    return root


def test_check_reads_the_rubric_and_locates_its_errors(tmp_path: Path) -> None:
    ok = check_task(_graded(tmp_path / "a", "echo 42 > answer.txt"))
    assert ok.ok and ok.package is not None and ok.package.rubric is not None
    assert set(ok.package.rubric.dimensions) == {"correctness", "style"}
    bad = check_task(_graded(tmp_path / "b", "true",
                             VERIFIER_MD.replace("weight: 0.25", "weight: heavy")))
    [err] = bad.errors
    assert err.field == "verifier.rubric.dimensions.style.weight"
    assert err.path.endswith("verifier/verifier.md") and err.line is not None
    assert VERIFIER_MD.splitlines()[err.line - 1].strip().startswith("style:")
    zero = check_task(_graded(tmp_path / "c", "true",
                              VERIFIER_MD.replace("0.75", "0").replace("0.25", "0")))
    assert [f.code for f in zero.errors] == ["rubric"]
    other = check_task(_graded(tmp_path / "d", "true",
                               VERIFIER_MD.replace("weighted_sum", "max")))
    assert [f.field for f in other.errors] == ["verifier.rubric.combine"]


@pytest.mark.bwrap
def test_a_trial_reward_is_the_weighted_sum(tmp_path: Path) -> None:
    full = load_task(_graded(tmp_path / "full", "echo 42 > answer.txt; touch NOTES.md"))
    part = load_task(_graded(tmp_path / "part", "echo 42 > answer.txt"))
    with TrialRunner("local", warm_pool=False) as runner:
        best = runner.run(full, OracleAgent())
        some = runner.run(part, OracleAgent())
        none = runner.run(part, EmptyAgent())
    assert best.outcome is Outcome.SCORED and best.reward == pytest.approx(1.0)
    assert some.outcome is Outcome.SCORED and some.reward == pytest.approx(0.75)
    assert none.outcome is Outcome.SCORED and none.reward == pytest.approx(0.0)
    dims = {d.name: d.message for d in some.details if d.name.startswith("rubric:")}
    assert set(dims) == {"rubric:correctness", "rubric:style"}
    assert "score 1" in dims["rubric:correctness"] and "score 0" in dims["rubric:style"]
    assert json.loads(json.dumps(some.model_dump(mode="json")))["reward"] == 0.75


BLOCKS = [
    VERIFIER_MD,
    VERIFIER_MD.replace("verifier:\n  name: graded\n", "verifier:\n  name: graded\n  # c\n"),
    "---\nrubric:\n  dimensions:\n    a: {weight: 1}\nother: 1\n---\n",
    "---\nverifier:\n  outputs:\n    rubric: {dimensions: {a: {weight: 1}}}\n---\n",
    "---\nnotes:\n  rubric:\n    dimensions: {a: {weight: 1}}\n---\n",
    "---\nverifier:\n  rubric: &r\n    dimensions: {a: {weight: 1}}\n---\n",
    "---\nverifier:\n  rubric:\n    dimensions:\n      a: {weight: 1}\n  name: x\n"
    "verifier: {}\n---\n",
    '---\nverifier:\n  "rub\\x69ric": {dimensions: {a: {weight: 1}}}\n---\n',
]


@pytest.mark.parametrize("text", BLOCKS)
def test_the_rubric_fast_path_means_what_the_full_parse_means(text: str) -> None:
    from posttrain_arena.task_format.rubric import _rubric_block, _rubric_of
    from posttrain_arena.task_format.yamlsafe import YamlProblem, load_yaml

    yaml_lines = text.split("---\n")[1].splitlines()
    try:
        full: object = _rubric_of(load_yaml("\n".join(yaml_lines))[0])
    except YamlProblem:
        full = "error"
    try:
        fast = _rubric_block(yaml_lines)
    except YamlProblem:
        fast = "error"
    if fast is None:
        return  # the caller parses it all: the same by construction
    assert fast != "error" and full != "error"
    assert _rubric_of(fast[0]) == full  # type: ignore[index]
